"""The `tidelog` PySpark data source: batch and streaming readers (writers in `sink.py`).

Driver side plans offset ranges (`planning.py`) from broker metadata (`client.Cluster`);
each Spark task reads one range of one partition, from the broker (`client.read_range`) or,
below the archive's end, from Parquet (`archive.read_archived`), and yields Arrow batches in
the exact schema Spark expects (`schema.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from tidelog.spark.archive import ArchivedRange, Manifest, load_manifest, read_archived
from tidelog.spark.client import Cluster, commit_group_offsets, consumer_config, read_range
from tidelog.spark.fetch_reader import (
    DEFAULT_FETCH_BYTES,
    DirectRead,
    Handover,
    direct_fetch_possible,
)
from tidelog.spark.options import EARLIEST, OffsetSpec, SourceOptions, parse_source_options
from tidelog.spark.planning import (
    OffsetRange,
    PartitionOffsets,
    check_data_loss,
    json_to_offsets,
    offsets_to_json,
    rate_limit,
    resolve_offset,
    split_ranges,
)
from tidelog.spark.schema import spark_ddl

log = logging.getLogger(__name__)


class LiveRange(InputPartition):  # type: ignore[misc]
    """One Spark task: [start_offset, end_offset) of one partition, read from the broker;
    `leader` is the partition's leader (host:port) when the plan was made."""

    def __init__(self, offset_range: OffsetRange, leader: str | None = None) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range
        self.leader = leader


class ArchiveRange(InputPartition):  # type: ignore[misc]
    """One Spark task: archived rows [start_offset, end_offset) of one manifest range."""

    def __init__(self, archived: ArchivedRange, start_offset: int, end_offset: int) -> None:
        super().__init__((archived.topic, archived.partition, start_offset, end_offset))
        self.archived = archived
        self.start_offset = start_offset
        self.end_offset = end_offset


def resolve_spec(
    cluster: Cluster,
    options: SourceOptions,
    spec: OffsetSpec,
    watermarks: dict[tuple[str, int], tuple[int, int]],
) -> PartitionOffsets:
    """Resolve `spec` for every partition in `watermarks` (ListOffsets for timestamps)."""
    times: dict[tuple[str, int], int] = {}
    if spec.kind == "timestamp":
        times = {tp: spec.timestamp_ms for tp in watermarks}
    elif spec.kind == "timestamps":
        times = {tp: ts for tp, ts in spec.timestamps.items() if tp in watermarks}
    found = cluster.offsets_for_times(times)
    return {
        tp: resolve_offset(
            spec, tp[0], tp[1], low, high, found.get(tp), options.timestamp_strategy_latest
        )
        for tp, (low, high) in watermarks.items()
    }


def _read(partition: InputPartition, options: SourceOptions) -> Iterator[pa.RecordBatch]:
    if isinstance(partition, ArchiveRange):
        assert options.archive_path is not None
        yield from read_archived(
            options.archive_path,
            partition.archived,
            partition.start_offset,
            partition.end_offset,
            options.include_headers,
        )
        return
    if not isinstance(partition, LiveRange):
        return  # Spark reads one placeholder partition when the plan is empty
    offset_range = partition.offset_range
    if options.direct_fetch and direct_fetch_possible(options.kafka_config, partition.leader):
        assert partition.leader is not None
        reader = DirectRead(
            partition.leader, offset_range, options.include_headers, options.poll_timeout_ms,
            max_bytes=int(options.kafka_config.get("max.partition.fetch.bytes",
                                                   DEFAULT_FETCH_BYTES)),
        )
        try:
            yield from reader.batches()
            return
        except Handover as handover:
            log.info("%s/%d: direct read stopped at offset %d (%s); continuing through "
                     "librdkafka", offset_range.topic, offset_range.partition,
                     handover.next_offset, handover)
            offset_range = replace(offset_range, start_offset=handover.next_offset)
    yield from read_range(
        options.kafka_config,
        offset_range,
        options.include_headers,
        options.fail_on_data_loss,
        options.poll_timeout_ms,
    )


def _live_ranges(
    cluster: Cluster, ranges: Sequence[OffsetRange], min_partitions: int | None
) -> list[InputPartition]:
    """One task per split range, each told its partition's leader for direct reads."""
    leaders = cluster.leaders((r.topic, r.partition) for r in ranges) if ranges else {}
    return [LiveRange(r, leaders.get((r.topic, r.partition)))
            for r in split_ranges(ranges, min_partitions)]


def _means_earliest(spec: OffsetSpec, tp: tuple[str, int]) -> bool:
    return spec.kind == "earliest" or (spec.kind == "offsets" and spec.offsets.get(tp) == EARLIEST)


def plan_batch(options: SourceOptions) -> list[InputPartition]:
    """Plan a batch read, stitching archived offsets (if `archive.path`) and live offsets so
    every offset in [start, end) is read exactly once."""
    manifest = load_manifest(options.archive_path) if options.archive_path else Manifest()
    cluster = Cluster(options.kafka_config)
    try:
        partitions = cluster.partitions(options.subscription)
        watermarks = cluster.watermarks(partitions)
        starts = resolve_spec(cluster, options, options.starting, watermarks)
        ends = resolve_spec(cluster, options, options.ending, watermarks)
        return _plan_ranges(cluster, options, manifest, watermarks, starts, ends)
    finally:
        cluster.close()


def _plan_ranges(
    cluster: Cluster,
    options: SourceOptions,
    manifest: Manifest,
    watermarks: dict[tuple[str, int], tuple[int, int]],
    starts: PartitionOffsets,
    ends: PartitionOffsets,
) -> list[InputPartition]:
    for tp in starts:
        archived_start = manifest.archived_start(*tp)
        if archived_start is not None and _means_earliest(options.starting, tp):
            # "earliest" is the oldest offset held anywhere, the archive included.
            starts[tp] = min(starts[tp], archived_start)
    planned: list[InputPartition] = []
    live: list[OffsetRange] = []
    log_starts: dict[tuple[str, int], int] = {}
    for tp in sorted(watermarks):
        start, end = starts[tp], ends[tp]
        for archived in manifest.ranges_of(*tp):
            if not archived.files:
                continue
            low, high = max(start, archived.start_offset), min(end, archived.end_offset)
            if low < high:
                planned.append(ArchiveRange(archived, low, high))
        live_start = max(start, manifest.archived_end(*tp) or start)
        if live_start < end:
            live.append(OffsetRange(tp[0], tp[1], live_start, end))
            log_starts[tp] = watermarks[tp][0]
    checked = check_data_loss(
        {(r.topic, r.partition): r.start_offset for r in live}, log_starts,
        options.fail_on_data_loss,
    )
    live = [OffsetRange(r.topic, r.partition, checked[(r.topic, r.partition)], r.end_offset)
            for r in live]
    planned.extend(_live_ranges(cluster, live, options.min_partitions))
    return planned


class TidelogBatchReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        return plan_batch(self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.options)


class TidelogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """Micro-batch reader. Offsets are `{"topic":{"partition":next_offset}}`; a partition that
    appears after the query started is read from its log start offset, as Spark's Kafka
    source does."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._cluster: Cluster | None = None
        self._latest: PartitionOffsets | None = None
        self._available_now_target: PartitionOffsets | None = None
        self._committer: Any = None

    def __getstate__(self) -> dict[str, Any]:
        # Executors only need the options; the driver's clients must not be pickled.
        return {"options": self.options, "_cluster": None, "_latest": None,
                "_available_now_target": None, "_committer": None}

    def _client(self) -> Cluster:
        if self._cluster is None:
            self._cluster = Cluster(self.options.kafka_config)
        return self._cluster

    def _watermarks(self) -> dict[tuple[str, int], tuple[int, int]]:
        cluster = self._client()
        return cluster.watermarks(cluster.partitions(self.options.subscription))

    def initialOffset(self) -> dict[str, dict[str, int]]:
        watermarks = self._watermarks()
        return offsets_to_json(
            resolve_spec(self._client(), self.options, self.options.starting, watermarks)
        )

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now_target = {tp: high for tp, (_, high) in self._watermarks().items()}

    def latestOffset(self, start: dict[str, dict[str, int]], limit: ReadLimit) -> dict[str, Any]:
        begin = json_to_offsets(start)
        watermarks = self._watermarks()
        latest = {tp: high for tp, (_, high) in watermarks.items()}
        self._latest = latest
        if self._available_now_target is not None:
            target = self._available_now_target
            latest = {tp: min(high, target.get(tp, watermarks[tp][0]))
                      for tp, high in latest.items()}
        # New partitions start at their log start offset; never move a partition backwards.
        begin = {tp: begin.get(tp, watermarks[tp][0]) for tp in latest}
        end = {tp: max(latest[tp], begin[tp]) for tp in latest}
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, end, limit.max_rows)
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return offsets_to_json(self._latest) if self._latest is not None else None

    def partitions(
        self, start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]
    ) -> Sequence[InputPartition]:
        begin, stop = json_to_offsets(start), json_to_offsets(end)
        watermarks = self._client().watermarks(stop)
        wanted = {tp: begin.get(tp, watermarks[tp][0])
                  for tp in stop if stop[tp] > begin.get(tp, -1)}
        checked = check_data_loss(
            wanted, {tp: watermarks[tp][0] for tp in wanted}, self.options.fail_on_data_loss
        )
        ranges = [OffsetRange(t, p, checked[(t, p)], stop[(t, p)]) for (t, p) in sorted(checked)]
        return _live_ranges(self._client(), ranges, self.options.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.options)

    def commit(self, end: dict[str, Any]) -> None:
        """Offsets live in Spark's checkpoint; with `commitOffsetsToGroup` they are also
        committed to that group, for lag tools (never read back by the source)."""
        if self.options.commit_group is None:
            return
        if self._committer is None:
            config = consumer_config(self.options.kafka_config)
            config["group.id"] = self.options.commit_group
            self._committer = Consumer(config)
        commit_group_offsets(self._committer, json_to_offsets(end))

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
        if self._committer is not None:
            self._committer.close()
            self._committer = None


class TidelogDataSource(DataSource):  # type: ignore[misc]
    """`spark.read.format("tidelog")`, `readStream`, `df.write`, `df.writeStream`."""

    @classmethod
    def name(cls) -> str:
        return "tidelog"

    def schema(self) -> str:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return spark_ddl(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        return TidelogBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return TidelogStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from tidelog.spark.sink import TidelogBatchWriter, parse_sink_options

        return TidelogBatchWriter(parse_sink_options(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from tidelog.spark.sink import TidelogStreamWriter, parse_sink_options

        return TidelogStreamWriter(parse_sink_options(self.options))
