"""Builder -> RecordBatch -> iter_records round trips, for every codec."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog.errors import CorruptRecordError
from tidelog.records.batch import Codec, RecordBatch, TimestampType, split_batches
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.record import Record, iter_records

from .strategies import new_records

SAMPLE = [
    NewRecord(
        b"value-1", key=b"key-1", headers=(("trace", b"abc"), ("empty", b"")), timestamp_ms=1000
    ),
    NewRecord(None, key=b"tombstone", timestamp_ms=999),  # earlier than the base: negative delta
    NewRecord(b"no key", headers=(("null-value", None),)),  # timestamp_ms None -> now_ms
    NewRecord(None),
    NewRecord(b"x" * 5000, key=b"", headers=(("ünïcode", b"\x00\xff"),), timestamp_ms=2**41),
]


def expected(records: list[NewRecord], base_offset: int, now_ms: int) -> list[Record]:
    return [
        Record(
            base_offset + i,
            now_ms if r.timestamp_ms is None else r.timestamp_ms,
            r.key,
            r.value,
            r.headers,
        )
        for i, r in enumerate(records)
    ]


@pytest.mark.parametrize("codec", list(Codec))
def test_round_trip_every_codec(codec: Codec) -> None:
    buffer = build_batch(SAMPLE, base_offset=42, codec=codec, now_ms=1234, partition_leader_epoch=7)
    batch = RecordBatch(buffer)
    batch.validate()
    assert batch.codec == codec
    assert batch.base_offset == 42
    assert batch.last_offset == 46
    assert batch.records_count == 5
    assert batch.partition_leader_epoch == 7
    assert batch.base_timestamp == 1000
    assert batch.max_timestamp == 2**41
    assert batch.timestamp_type == TimestampType.CREATE_TIME
    assert list(iter_records(batch)) == expected(SAMPLE, 42, 1234)


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.ZSTD])
def test_log_append_time_uses_max_timestamp(codec: Codec) -> None:
    buffer = build_batch(
        SAMPLE, codec=codec, timestamp_type=TimestampType.LOG_APPEND_TIME, now_ms=777
    )
    batch = RecordBatch(buffer)
    batch.validate()
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert batch.max_timestamp == 777
    assert [r.timestamp for r in iter_records(batch)] == [777] * len(SAMPLE)


def test_log_append_time_follows_a_rewritten_max_timestamp() -> None:
    # A broker stamping LogAppendTime rewrites maxTimestamp only; every record must follow it.
    buffer = build_batch(SAMPLE[:2], now_ms=5)
    buffer[22] |= 0x08  # timestamp type bit; CRC is not checked by iter_records
    buffer[35:43] = (123456).to_bytes(8, "big")
    assert [r.timestamp for r in iter_records(RecordBatch(buffer))] == [123456, 123456]


def test_producer_fields_and_flags() -> None:
    buffer = build_batch(
        [NewRecord(b"a"), NewRecord(b"b")],
        producer_id=9001,
        producer_epoch=3,
        base_sequence=2**31 - 1,
        transactional=True,
        control=True,
    )
    batch = RecordBatch(buffer)
    batch.validate()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9001, 3, 2**31 - 1)
    assert batch.last_sequence == 0  # wraps like Kafka's sequence numbers
    assert batch.is_transactional and batch.is_control


def test_offsets_survive_base_offset_rewrite() -> None:
    buffer = build_batch(SAMPLE, codec=Codec.LZ4)
    batch = RecordBatch(buffer)
    batch.set_base_offset(10**12)
    batch.validate()  # baseOffset is outside the CRC
    assert [r.offset for r in iter_records(batch)] == [10**12 + i for i in range(len(SAMPLE))]


def test_empty_batch_is_refused() -> None:
    with pytest.raises(ValueError):
        build_batch([])


def test_limit_applies_to_uncompressed_records() -> None:
    buffer = build_batch([NewRecord(b"z" * 10_000)] * 20, codec=Codec.GZIP)
    with pytest.raises(CorruptRecordError):
        list(iter_records(RecordBatch(buffer), max_uncompressed_bytes=100_000))
    assert len(list(iter_records(RecordBatch(buffer), max_uncompressed_bytes=300_000))) == 20


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(new_records, min_size=1, max_size=12),
    codec=st.sampled_from(list(Codec)),
    base_offset=st.integers(min_value=0, max_value=2**62),
    now_ms=st.integers(min_value=0, max_value=2**42),
)
def test_builder_iter_records_identity(
    records: list[NewRecord], codec: Codec, base_offset: int, now_ms: int
) -> None:
    buffer = build_batch(records, base_offset=base_offset, codec=codec, now_ms=now_ms)
    (batch,) = split_batches(buffer)
    batch.validate()
    assert list(iter_records(batch)) == expected(records, base_offset, now_ms)
    timestamps = [now_ms if r.timestamp_ms is None else r.timestamp_ms for r in records]
    assert batch.max_timestamp == max(timestamps)
