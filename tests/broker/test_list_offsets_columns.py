"""ListOffsets by timestamp narrows a batch to the exact record through the C record decoder's
columns (`_exact_in_columns`): the same answers as decoding every record, on seeded random
batches (create and log-append time, compressed, a log start inside the batch, MAX_TIMESTAMP)."""

from __future__ import annotations

import random

from tidelog.broker.handlers.list_offsets import _exact_in_columns
from tidelog.records.batch import Codec, RecordBatch, TimestampType
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.record import iter_records
from tidelog.types import MAX_TIMESTAMP


def _by_records(batch: RecordBatch, log_start: int, timestamp: int) -> tuple[int, int] | None:
    records = [r for r in iter_records(batch) if r.offset >= log_start]
    if not records:
        return None
    if timestamp == MAX_TIMESTAMP:
        best = max(r.timestamp for r in records)
        return next((r.offset, r.timestamp) for r in records if r.timestamp == best)
    return next(((r.offset, r.timestamp) for r in records if r.timestamp >= timestamp), None)


def test_columns_answer_as_the_record_loop() -> None:
    rng = random.Random(15)
    for case in range(150):
        count = rng.randint(1, 300)
        base = 1_700_000_000_000
        records = [NewRecord(key=None if rng.random() < 0.5 else b"k",
                             value=rng.randbytes(rng.randint(0, 40)),
                             timestamp_ms=base + rng.randint(0, 5000)) for _ in range(count)]
        kind = TimestampType.LOG_APPEND_TIME if case % 5 == 0 else TimestampType.CREATE_TIME
        codec = Codec.ZSTD if case % 3 == 0 else Codec.NONE
        base_offset = rng.randint(0, 10_000)
        batch = RecordBatch(build_batch(records, base_offset=base_offset, codec=codec,
                                        timestamp_type=kind, now_ms=base + 2500))
        log_start = base_offset + rng.randint(0, count) if case % 4 == 0 else 0
        for timestamp in (base - 1, base + rng.randint(0, 5000), base + 6000, MAX_TIMESTAMP):
            assert _exact_in_columns(batch, log_start, timestamp) == \
                _by_records(batch, log_start, timestamp), (case, timestamp)
