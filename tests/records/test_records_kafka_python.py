"""Batches written by a real client (kafka-python's DefaultRecordBatchBuilder) decode exactly,
and kafka-python's reader decodes ours.

kafka-python compresses snappy only through python-snappy, which is not installed here; the
test gives kafka-python's codec module a stand-in `snappy` whose compress/decompress are
cramjam's raw snappy, so the xerial framing (header + [int32 length, block]*) is still written
and read by kafka-python's own code.
"""

from __future__ import annotations

import types
from collections.abc import Iterator

import cramjam
import pytest
from kafka import codec as kafka_codec
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from tidelog.records.batch import Codec, RecordBatch, split_batches
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.codecs import XERIAL_MAGIC
from tidelog.records.record import Record, iter_records

ROWS = [
    (0, 1_700_000_000_000, b"user-1", b"clicked " * 40, [("source", b"web"), ("n", None)]),
    (1, 1_700_000_000_005, None, b"no key " * 40, []),
    (2, 1_699_999_999_000, b"user-2", None, [("tomb", b"stone")]),
    (3, 1_700_000_000_100, b"", b"", []),
]


@pytest.fixture(autouse=True)
def cramjam_snappy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if kafka_codec.snappy is None:
        stand_in = types.SimpleNamespace(
            compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
            decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
        )
        monkeypatch.setattr(kafka_codec, "snappy", stand_in)
    yield


def kafka_python_batch(codec: Codec) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=4242,
        producer_epoch=1,
        base_sequence=17,
        batch_size=1 << 20,
    )
    for offset, timestamp, key, value, headers in ROWS:
        assert builder.append(offset, timestamp, key, value, headers) is not None
    return bytes(builder.build())


@pytest.mark.parametrize("codec", list(Codec))
def test_kafka_python_batches_decode_exactly(codec: Codec) -> None:
    raw = kafka_python_batch(codec)
    (batch,) = split_batches(raw)
    batch.validate()
    assert batch.codec == codec  # the rows compress well, so kafka-python keeps the codec
    if codec == Codec.SNAPPY:
        assert raw[61:69] == XERIAL_MAGIC
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 1, 17)
    assert batch.records_count == len(ROWS)
    assert batch.max_timestamp == max(row[1] for row in ROWS)
    assert list(iter_records(batch)) == [
        Record(offset, timestamp, key, value, tuple(headers))
        for offset, timestamp, key, value, headers in ROWS
    ]


@pytest.mark.parametrize("codec", list(Codec))
def test_kafka_python_reads_our_batches(codec: Codec) -> None:
    records = [
        NewRecord(value, key=key, headers=tuple(headers), timestamp_ms=timestamp)
        for _, timestamp, key, value, headers in ROWS
    ]
    ours = bytes(
        build_batch(records, base_offset=100, codec=codec, producer_id=5, producer_epoch=0)
    )
    theirs = DefaultRecordBatch(ours)
    assert theirs.validate_crc()
    assert theirs.compression_type == int(codec)
    decoded = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs]
    assert decoded == [
        (100 + offset, timestamp, key, value, headers)
        for offset, timestamp, key, value, headers in ROWS
    ]


def test_kafka_python_payload_of_many_batches() -> None:
    payload = b"".join(kafka_python_batch(codec) for codec in Codec)
    batches = split_batches(payload)
    assert [b.codec for b in batches] == list(Codec)
    for batch in batches:
        batch.validate()
        assert len(list(iter_records(batch))) == len(ROWS)
    assert isinstance(batches[0], RecordBatch)
