"""Tiered archive: records moved from the log to Parquet, and the manifest that says which.

Layout under the archive root:
  _tidelog_manifest.json        the manifest (below); the only file readers trust
  topic=<T>/partition=<P>/<run id>-part-*.parquet   records of one partition, columns key,
                                value, offset, timestamp, timestampType, headers (topic and
                                partition live in the path, as Spark's partitionBy writes them)
  _staging/<run id>/            a running archive job's output; moved into place, then listed

Manifest (JSON, replaced atomically with os.replace):
  version   1
  ranges    list of {topic, partition, start_offset, end_offset, files}: the records of
            [start_offset, end_offset) of that partition are exactly the rows of `files`
            (paths relative to the root). A partition's ranges are contiguous and ascending.
Files not named by the manifest (a job that died before updating it) are ignored, so a rerun
archives the same offsets again without creating duplicates.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import pyarrow as pa
import pyarrow.dataset as pa_dataset

from tidelog.spark.schema import arrow_schema, conform

MANIFEST_NAME = "_tidelog_manifest.json"
MANIFEST_VERSION = 1


class ArchiveError(ValueError):
    """The archive manifest is unreadable or describes overlapping or gapped ranges."""


@dataclass(frozen=True, slots=True)
class ArchivedRange:
    topic: str
    partition: int
    start_offset: int
    end_offset: int
    files: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Manifest:
    ranges: tuple[ArchivedRange, ...] = ()

    def ranges_of(self, topic: str, partition: int) -> list[ArchivedRange]:
        return [r for r in self.ranges if (r.topic, r.partition) == (topic, partition)]

    def archived_end(self, topic: str, partition: int) -> int | None:
        own = self.ranges_of(topic, partition)
        return own[-1].end_offset if own else None

    def archived_start(self, topic: str, partition: int) -> int | None:
        own = self.ranges_of(topic, partition)
        return own[0].start_offset if own else None

    def with_range(self, added: ArchivedRange) -> Manifest:
        end = self.archived_end(added.topic, added.partition)
        if end is not None and added.start_offset != end:
            raise ArchiveError(
                f"{added.topic}/{added.partition}: new range starts at {added.start_offset} "
                f"but the archive ends at {end}"
            )
        if added.end_offset <= added.start_offset:
            raise ArchiveError(f"empty archived range {added}")
        return Manifest((*self.ranges, added))


def load_manifest(root: str) -> Manifest:
    path = os.path.join(root, MANIFEST_NAME)
    if not os.path.exists(path):
        return Manifest()
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
        if document.get("version") != MANIFEST_VERSION:
            raise ArchiveError(f"{path}: unknown manifest version {document.get('version')!r}")
        manifest = Manifest()
        for item in document["ranges"]:
            manifest = manifest.with_range(
                ArchivedRange(
                    topic=str(item["topic"]),
                    partition=int(item["partition"]),
                    start_offset=int(item["start_offset"]),
                    end_offset=int(item["end_offset"]),
                    files=tuple(str(f) for f in item["files"]),
                )
            )
        return manifest
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, ArchiveError):
            raise
        raise ArchiveError(f"{path}: unreadable manifest: {exc}") from None


def save_manifest(root: str, manifest: Manifest) -> None:
    """Write the manifest next to the data and swap it in atomically."""
    path = os.path.join(root, MANIFEST_NAME)
    document = {
        "version": MANIFEST_VERSION,
        "ranges": [{**asdict(r), "files": list(r.files)} for r in manifest.ranges],
    }
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def read_archived(
    root: str,
    archived: ArchivedRange,
    start_offset: int,
    end_offset: int,
    include_headers: bool,
) -> Iterator[pa.RecordBatch]:
    """Executor side: rows of `archived` with start_offset <= offset < end_offset, in offset
    order, in the source's Arrow schema."""
    paths = [os.path.join(root, f) for f in archived.files]
    dataset = pa_dataset.dataset(paths, format="parquet")
    wanted = (pa_dataset.field("offset") >= start_offset) & (
        pa_dataset.field("offset") < end_offset
    )
    table = dataset.to_table(filter=wanted).sort_by("offset")
    table = conform(table, archived.topic, archived.partition, include_headers)
    schema = arrow_schema(include_headers)
    for batch in table.to_batches(max_chunksize=10_000):
        yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)
