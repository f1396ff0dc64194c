"""Offset planning for the tidelog data source: pure functions over offsets, no I/O.

Streaming offsets are Spark's Kafka source JSON, `{"topic":{"0":123,"1":45}}`, in canonical
order (topics sorted, partitions sorted numerically) so that two plans of the same offsets are
the same string in the checkpoint's offset log.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tidelog.spark.options import EARLIEST, LATEST, OffsetSpec, SourceOptionError

PartitionOffsets = dict[tuple[str, int], int]


class DataLossError(RuntimeError):
    """Offsets the query still needs are gone from the log (retention removed them)."""


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Records [start_offset, end_offset) of one partition; one Spark task reads one range."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int

    @property
    def size(self) -> int:
        return max(0, self.end_offset - self.start_offset)


def offsets_to_json(offsets: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    """Canonical JSON form: topics sorted, partitions sorted numerically."""
    document: dict[str, dict[str, int]] = {}
    for (topic, partition) in sorted(offsets):
        document.setdefault(topic, {})[str(partition)] = offsets[(topic, partition)]
    return document


def json_to_offsets(document: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    try:
        return {
            (str(topic), int(partition)): int(offset)
            for topic, partitions in document.items()
            for partition, offset in partitions.items()
        }
    except (AttributeError, TypeError, ValueError) as exc:
        raise SourceOptionError(f"malformed offset document {document!r}: {exc}") from None


def resolve_offset(
    spec: OffsetSpec,
    topic: str,
    partition: int,
    log_start_offset: int,
    high_watermark: int,
    offset_for_time: int | None,
    strategy_latest: bool,
) -> int:
    """Resolve one end of a range for one partition.

    `offset_for_time` is the broker's answer to ListOffsets(timestamp) for this partition
    (None when no record has a timestamp >= the one asked for)."""
    if spec.kind == "earliest":
        return log_start_offset
    if spec.kind == "latest":
        return high_watermark
    if spec.kind in ("timestamp", "timestamps"):
        if spec.kind == "timestamps" and (topic, partition) not in spec.timestamps:
            raise SourceOptionError(f"no timestamp given for {topic}/{partition}")
        if offset_for_time is None:
            if strategy_latest:
                return high_watermark
            raise SourceOptionError(
                f"no record in {topic}/{partition} at or after the requested timestamp; set "
                "startingOffsetsByTimestampStrategy=latest to start from the end"
            )
        return offset_for_time
    wanted = spec.offsets.get((topic, partition))
    if wanted is None:
        raise SourceOptionError(f"offsets JSON names no offset for {topic}/{partition}")
    if wanted == EARLIEST:
        return log_start_offset
    if wanted == LATEST:
        return high_watermark
    return wanted


def rate_limit(
    start: Mapping[tuple[str, int], int],
    end: Mapping[tuple[str, int], int],
    max_rows: int,
) -> PartitionOffsets:
    """Share `max_rows` across partitions in proportion to each one's backlog, as Spark's
    Kafka source does: a share below one record rounds up (so small partitions still move),
    otherwise it rounds down; no partition passes its end."""
    backlog = {tp: max(0, end[tp] - start.get(tp, end[tp])) for tp in end}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(end)
    limited: PartitionOffsets = {}
    for tp, stop in end.items():
        begin = start.get(tp, stop)
        share = max_rows * (backlog[tp] / total)
        step = math.ceil(share) if share < 1 else math.floor(share)
        limited[tp] = min(stop, begin + step)
    return limited


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Drop empty ranges; if there are fewer than `min_partitions`, cut the ranges into
    pieces in proportion to their size so the read has at least that many tasks."""
    nonempty = [r for r in ranges if r.size > 0]
    if not min_partitions or len(nonempty) >= min_partitions:
        return nonempty
    total = sum(r.size for r in nonempty)
    result: list[OffsetRange] = []
    for r in nonempty:
        pieces = max(1, min(r.size, round(min_partitions * r.size / total)))
        step, extra = divmod(r.size, pieces)
        begin = r.start_offset
        for index in range(pieces):
            stop = begin + step + (1 if index < extra else 0)
            result.append(OffsetRange(r.topic, r.partition, begin, stop))
            begin = stop
    return result


def check_data_loss(
    wanted: Mapping[tuple[str, int], int],
    log_start_offsets: Mapping[tuple[str, int], int],
    fail_on_data_loss: bool,
) -> PartitionOffsets:
    """Move every start offset below its partition's log start offset up to it, or raise
    `DataLossError` when the query asked to fail on data loss."""
    adjusted: PartitionOffsets = {}
    for tp, offset in wanted.items():
        low = log_start_offsets.get(tp, offset)
        if offset < low:
            if fail_on_data_loss:
                raise DataLossError(
                    f"{tp[0]}/{tp[1]}: offsets {offset}..{low - 1} were removed by retention "
                    "before they were read; set failOnDataLoss=false to skip them"
                )
            offset = low
        adjusted[tp] = offset
    return adjusted
