"""Build magic v2 record batches: internal records, tests and tools.

Each record inside the records section (before compression) is::

    length          varint   bytes of the record after this field
    attributes      int8     unused, always 0
    timestampDelta  varlong  timestamp - batch baseTimestamp
    offsetDelta     varint   offset - batch baseOffset (0, 1, 2, ... here)
    keyLength       varint   -1 for a null key
    key             bytes
    valueLength     varint   -1 for a null value
    value           bytes
    headerCount     varint
    headers         [headerKeyLength varint, headerKey utf-8,
                     headerValueLength varint (-1 = null), headerValue]*

The batch header is the one documented in `tidelog.records.batch`: baseTimestamp is the first
record's timestamp (deltas may be negative, as in Kafka), maxTimestamp the largest one, and the
CRC32C is computed last, over attributes .. end, after compression.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from tidelog.records.batch import (
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    CRC_POSITION,
    CRC_START,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_V2,
    Codec,
    TimestampType,
    crc32c,
)
from tidelog.records.codecs import compress
from tidelog.records.varint import encode_varint

_CRC = struct.Struct(">I")
_NULL = encode_varint(-1)


@dataclass(frozen=True, slots=True)
class NewRecord:
    """A record to put in a batch; `timestamp_ms=None` means "now" (the builder's now_ms)."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_ms: int | None = None


def _encode_record(
    out: bytearray, record: NewRecord, timestamp_delta: int, offset_delta: int
) -> None:
    body = bytearray(b"\x00")  # attributes
    body += encode_varint(timestamp_delta)
    body += encode_varint(offset_delta)
    key = record.key
    if key is None:
        body += _NULL
    else:
        body += encode_varint(len(key))
        body += key
    value = record.value
    if value is None:
        body += _NULL
    else:
        body += encode_varint(len(value))
        body += value
    body += encode_varint(len(record.headers))
    for header_key, header_value in record.headers:
        encoded_key = header_key.encode("utf-8")
        body += encode_varint(len(encoded_key))
        body += encoded_key
        if header_value is None:
            body += _NULL
        else:
            body += encode_varint(len(header_value))
            body += header_value
    out += encode_varint(len(body))
    out += body


def encode_records(
    records: Sequence[NewRecord], timestamps: Sequence[int], base_timestamp: int
) -> bytearray:
    """The uncompressed records section for `records` at offset deltas 0..n-1."""
    out = bytearray()
    for offset_delta, (record, timestamp) in enumerate(zip(records, timestamps, strict=True)):
        _encode_record(out, record, timestamp - base_timestamp, offset_delta)
    return out


def build_batch(
    records: Sequence[NewRecord],
    *,
    base_offset: int = 0,
    codec: Codec = Codec.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    partition_leader_epoch: int = -1,
    now_ms: int = 0,
) -> bytearray:
    """Encode one batch holding `records` (at least one) at offsets base_offset, +1, ...

    With LOG_APPEND_TIME every record's timestamp is now_ms, as a broker stamps them.
    Raises ValueError for an empty batch or values that do not fit their fields.
    """
    if not records:
        raise ValueError("a record batch holds at least one record")
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        timestamps = [now_ms] * len(records)
    else:
        timestamps = [now_ms if r.timestamp_ms is None else r.timestamp_ms for r in records]
    base_timestamp = timestamps[0]
    max_timestamp = max(timestamps)
    section = encode_records(records, timestamps, base_timestamp)
    payload = section if codec == Codec.NONE else compress(codec, section)

    attributes = int(codec)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= ATTR_TIMESTAMP_TYPE
    if transactional:
        attributes |= ATTR_TRANSACTIONAL
    if control:
        attributes |= ATTR_CONTROL

    buffer = bytearray(HEADER_SIZE + len(payload))
    try:
        HEADER_STRUCT.pack_into(
            buffer,
            0,
            base_offset,
            len(buffer) - LOG_OVERHEAD,
            partition_leader_epoch,
            MAGIC_V2,
            0,  # crc, filled in below once the bytes it covers are final
            attributes,
            len(records) - 1,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
    except struct.error as error:
        raise ValueError(f"batch header field out of range: {error}") from None
    buffer[HEADER_SIZE:] = payload
    _CRC.pack_into(buffer, CRC_POSITION, crc32c(memoryview(buffer)[CRC_START:]))
    return buffer
