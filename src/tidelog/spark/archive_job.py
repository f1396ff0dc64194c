"""The archive job: copy a topic's old records from the broker to Parquet, then list them.

For each partition it archives [archive end (or log start offset), cutoff), where the cutoff
is `--before OFFSET` or the first offset newer than `now - DURATION`, never past the high
watermark. Steps, each safe to crash after:
  1. Spark reads the ranges with the `tidelog` source and writes Parquet partitioned by topic
     and partition into `_staging/<run id>`;
  2. the files move to `topic=<T>/partition=<P>/<run id>-<name>`;
  3. the manifest gains one range per partition and is swapped in atomically.
Until step 3 the new files are invisible to readers, so a rerun starts over cleanly. After
step 3 retention may delete those offsets from the broker: the source reads them from here.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass
from typing import Any

from tidelog.spark.archive import ArchivedRange, load_manifest, save_manifest
from tidelog.spark.client import Cluster
from tidelog.spark.options import SourceOptionError, Subscription
from tidelog.spark.planning import offsets_to_json


@dataclass(frozen=True, slots=True)
class ArchiveResult:
    topic: str
    partition: int
    start_offset: int
    end_offset: int
    files: int


def plan_archive(
    kafka_config: dict[str, str],
    root: str,
    topic: str,
    before_offset: int | None,
    older_than_ms: int | None,
    now_ms: int,
) -> dict[tuple[str, int], tuple[int, int]]:
    """The [start, end) to archive per partition (only non-empty ranges)."""
    if (before_offset is None) == (older_than_ms is None):
        raise SourceOptionError("give exactly one of --before and --older-than")
    manifest = load_manifest(root)
    cluster = Cluster(kafka_config)
    try:
        partitions = cluster.partitions(Subscription("subscribe", topics=(topic,)))
        if not partitions:
            raise SourceOptionError(f"topic {topic!r} does not exist")
        watermarks = cluster.watermarks(partitions)
        cutoffs: dict[tuple[str, int], int | None] = {}
        if older_than_ms is not None:
            cutoffs = cluster.offsets_for_times({tp: now_ms - older_than_ms for tp in partitions})
    finally:
        cluster.close()
    plan: dict[tuple[str, int], tuple[int, int]] = {}
    for tp, (low, high) in watermarks.items():
        start = manifest.archived_end(*tp)
        start = low if start is None else start
        if older_than_ms is not None:
            found = cutoffs.get(tp)
            end = high if found is None else found
        else:
            assert before_offset is not None
            end = before_offset
        end = min(end, high)
        if end > start:
            plan[tp] = (start, end)
    return plan


def run_archive(
    spark: Any,
    kafka_config: dict[str, str],
    root: str,
    topic: str,
    before_offset: int | None = None,
    older_than_ms: int | None = None,
    now_ms: int = 0,
) -> list[ArchiveResult]:
    """Archive old records of `topic` under `root`; returns what was added to the manifest."""
    os.makedirs(root, exist_ok=True)
    plan = plan_archive(kafka_config, root, topic, before_offset, older_than_ms, now_ms)
    if not plan:
        return []
    run_id = uuid.uuid4().hex[:12]
    staging = os.path.join(root, "_staging", run_id)
    starting = json.dumps(offsets_to_json({tp: s for tp, (s, _) in plan.items()}))
    ending = json.dumps(offsets_to_json({tp: e for tp, (_, e) in plan.items()}))
    reader = spark.read.format("tidelog")
    for key, value in kafka_config.items():
        reader = reader.option(f"kafka.{key}", value)
    frame = (
        reader.option("assign", json.dumps({topic: sorted(p for _, p in plan)}))
        .option("startingOffsets", starting)
        .option("endingOffsets", ending)
        .option("includeHeaders", "true")
        .load()
    )
    frame.write.partitionBy("topic", "partition").parquet(staging)
    manifest = load_manifest(root)
    results: list[ArchiveResult] = []
    for (name, partition), (start, end) in sorted(plan.items()):
        relative_dir = os.path.join(f"topic={name}", f"partition={partition}")
        source_dir = os.path.join(staging, relative_dir)
        os.makedirs(os.path.join(root, relative_dir), exist_ok=True)
        files: list[str] = []
        parts = sorted(os.listdir(source_dir)) if os.path.isdir(source_dir) else []
        for part in parts:
            if not part.endswith(".parquet"):
                continue
            relative = os.path.join(relative_dir, f"{run_id}-{part}")
            os.replace(os.path.join(source_dir, part), os.path.join(root, relative))
            files.append(relative)
        # An empty file list is kept: every offset of the range was compacted away.
        manifest = manifest.with_range(ArchivedRange(name, partition, start, end, tuple(files)))
        results.append(ArchiveResult(name, partition, start, end, len(files)))
    save_manifest(root, manifest)
    shutil.rmtree(staging, ignore_errors=True)
    return results
