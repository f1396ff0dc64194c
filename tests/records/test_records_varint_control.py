"""Varints and control records."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelog.errors import CorruptRecordError
from tidelog.records.batch import RecordBatch
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.control import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_transaction_batch,
    encode_control_key,
    parse_control_key,
    parse_end_transaction_marker,
    read_end_transaction_marker,
)
from tidelog.records.record import Record, iter_records
from tidelog.records.varint import encode_varint, read_unsigned_varint, read_varint, size_of_varint

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (300, b"\xd8\x04"),
        (-(2**63), b"\xff" * 9 + b"\x01"),
    ],
)
def test_known_encodings(value: int, encoded: bytes) -> None:
    # Values from Kafka's ByteUtilsTest (zigzag varint / varlong).
    assert encode_varint(value) == encoded
    assert read_varint(encoded, 0) == (value, len(encoded))


@given(INT64, st.binary(max_size=4))
def test_varint_identity_and_every_split(value: int, prefix: bytes) -> None:
    encoded = encode_varint(value)
    assert len(encoded) == size_of_varint(value)
    assert read_varint(prefix + encoded + b"\xff", len(prefix)) == (
        value,
        len(prefix) + len(encoded),
    )
    for cut in range(len(encoded)):
        with pytest.raises(CorruptRecordError):
            read_varint(encoded[:cut], 0)


def test_overlong_varints_are_refused() -> None:
    with pytest.raises(CorruptRecordError):
        read_varint(b"\xff" * 11, 0)
    with pytest.raises(CorruptRecordError):
        read_unsigned_varint(b"\xff" * 6, 0)
    with pytest.raises(ValueError):
        encode_varint(2**63)


@pytest.mark.parametrize("control_type", [ControlRecordType.ABORT, ControlRecordType.COMMIT])
def test_end_transaction_marker_round_trip(control_type: ControlRecordType) -> None:
    marker = EndTransactionMarker(control_type, coordinator_epoch=12)
    buffer = build_end_transaction_batch(
        marker, producer_id=77, producer_epoch=2, base_offset=500, now_ms=1234
    )
    batch = RecordBatch(buffer)
    batch.validate()
    assert batch.is_control and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch) == (77, 2)
    assert read_end_transaction_marker(batch) == marker
    (record,) = iter_records(batch)
    assert record.key == b"\x00\x00\x00" + bytes([control_type])
    assert record.value == b"\x00\x00\x00\x00\x00\x0c"
    assert (record.offset, record.timestamp) == (500, 1234)


def test_control_parsing_rejects_short_or_wrong_fields() -> None:
    assert parse_control_key(encode_control_key(ControlRecordType.LEADER_CHANGE)) == 2
    assert parse_control_key(b"\x00\x01\x00\x01extra") == 1  # newer versions may add fields
    for key in (None, b"", b"\x00\x00\x00"):
        with pytest.raises(CorruptRecordError):
            parse_control_key(key)
    with pytest.raises(CorruptRecordError):
        parse_control_key(b"\xff\xff\x00\x01")
    for key, value in [
        (encode_control_key(ControlRecordType.COMMIT), b"\x00\x00\x00"),
        (encode_control_key(ControlRecordType.COMMIT), None),
        (encode_control_key(ControlRecordType.LEADER_CHANGE), b"\x00" * 6),
    ]:
        with pytest.raises(CorruptRecordError):
            parse_end_transaction_marker(Record(0, 0, key, value, ()))
    with pytest.raises(CorruptRecordError):
        read_end_transaction_marker(RecordBatch(build_batch([NewRecord(b"data")])))
    with pytest.raises(ValueError):
        build_end_transaction_batch(
            EndTransactionMarker(ControlRecordType.SNAPSHOT_HEADER, 0),
            producer_id=1,
            producer_epoch=0,
            now_ms=0,
        )
