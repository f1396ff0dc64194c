"""Batch factories and linear-scan oracles for the storage tests."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tidelog.records.batch import RecordBatch, iter_batches
from tidelog.records.builder import NewRecord, build_batch
from tidelog.storage.log import PartitionLog


def make_batch(
    count: int = 1,
    *,
    value_size: int = 20,
    timestamp_ms: int = 1_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    tag: int = 0,
) -> RecordBatch:
    """A writable batch of `count` records whose values carry `tag` (to tell batches apart)."""
    value = (tag.to_bytes(8, "big") * (value_size // 8 + 1))[:value_size]
    records = [NewRecord(value, timestamp_ms=timestamp_ms) for _ in range(count)]
    buffer = build_batch(
        records, producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=base_sequence, now_ms=timestamp_ms,
    )
    return RecordBatch(memoryview(buffer))


def all_batches(log: PartitionLog) -> list[RecordBatch]:
    """Every stored batch, read straight from the .log files (the oracle's input)."""
    out: list[RecordBatch] = []
    for segment in log.segments():
        data = Path(segment.path).read_bytes()
        out.extend(iter_batches(data))
    return out


def read_all(log: PartitionLog, offset: int | None = None) -> list[RecordBatch]:
    """Everything from `offset` through the read path (FileSlice.read_bytes)."""
    start = log.log_start_offset if offset is None else offset
    batches: list[RecordBatch] = []
    while start < log.log_end_offset:
        result = log.read(start, 1 << 30)
        data = b"".join(s.read_bytes() for s in result.slices)
        got = list(iter_batches(data))
        assert got, f"no batch returned at offset {start}"
        batches.extend(got)
        start = got[-1].next_offset
    return batches


def index_files(directory: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes()
        for p in sorted(directory.iterdir())
        if p.suffix in (".index", ".timeindex")
    }


def linear_offset_lookup(batches: Sequence[RecordBatch], offset: int) -> int | None:
    for batch in batches:
        if batch.last_offset >= offset:
            return batch.base_offset
    return None


def linear_timestamp_lookup(
    batches: Sequence[RecordBatch], timestamp: int, log_start: int
) -> tuple[int, int] | None:
    for batch in batches:
        if batch.last_offset >= log_start and batch.max_timestamp >= timestamp:
            return max(batch.base_offset, log_start), batch.max_timestamp
    return None


def flip_bit(path: Path, position: int, bit: int) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        byte = os.pread(fd, 1, position)[0]
        os.pwrite(fd, bytes([byte ^ (1 << bit)]), position)
    finally:
        os.close(fd)
