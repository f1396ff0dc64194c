"""Decode the records of a magic v2 batch into absolute offsets and timestamps.

Record layout (inside the records section, after decompression; see `tidelog.records.builder`
for the field list)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint, key | valueLength varint, value | headerCount varint |
    [headerKeyLength varint, headerKey utf-8, headerValueLength varint, headerValue]*

Lengths of -1 mean null (key, value, header value); a header key is never null. A record's
`length` must match the bytes its fields take, the batch must hold exactly `recordsCount`
records, and no bytes may trail the last one, as Kafka's DefaultRecordBatch checks.

offset = baseOffset + offsetDelta. timestamp = baseTimestamp + timestampDelta, except in a
LOG_APPEND_TIME batch, where every record takes the batch's maxTimestamp (Kafka does the same:
the broker rewrites only the header). The CRC is not checked here; `RecordBatch.validate()`
does that.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tidelog.errors import CorruptRecordError
from tidelog.records.batch import ATTR_CODEC_MASK, ATTR_TIMESTAMP_TYPE, Codec, RecordBatch
from tidelog.records.codecs import DEFAULT_MAX_UNCOMPRESSED_BYTES, decompress
from tidelog.records.varint import read_varint

# length, attributes, timestampDelta, offsetDelta, keyLength, valueLength, headerCount: 1 each.
MIN_RECORD_SIZE = 7

Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


def iter_records(
    batch: RecordBatch, *, max_uncompressed_bytes: int = DEFAULT_MAX_UNCOMPRESSED_BYTES
) -> Iterator[Record]:
    """Yield the batch's records; malformed bytes raise CorruptRecordError (lazily, while
    iterating), a records section decompressing past `max_uncompressed_bytes` too."""
    attributes = batch.attributes
    codec_id = attributes & ATTR_CODEC_MASK
    if codec_id > Codec.ZSTD:
        raise CorruptRecordError(f"unknown compression codec {codec_id}")
    count = batch.records_count
    if count < 0:
        raise CorruptRecordError(f"negative recordsCount {count}")
    data = decompress(Codec(codec_id), batch.records_bytes, max_uncompressed_bytes)
    if count > len(data) // MIN_RECORD_SIZE:
        raise CorruptRecordError(f"{len(data)} bytes cannot hold {count} records")
    base_offset = batch.base_offset
    if attributes & ATTR_TIMESTAMP_TYPE:
        yield from _decode(data, count, base_offset, 0, batch.max_timestamp)
    else:
        yield from _decode(data, count, base_offset, batch.base_timestamp, None)


def _decode(
    data: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None
) -> Iterator[Record]:
    size = len(data)
    position = 0
    for _ in range(count):
        length, position = read_varint(data, position)
        end = position + length
        if length < MIN_RECORD_SIZE - 1 or end > size:
            raise CorruptRecordError(f"record length {length} does not fit the batch")
        # Fields are read against `end`, the record's own bound, not the batch's.
        timestamp_delta, position = read_varint(data, position + 1)  # skip attributes
        offset_delta, position = read_varint(data, position)
        key_length, position = read_varint(data, position)
        if key_length < 0:
            if key_length != -1:
                raise CorruptRecordError(f"key length {key_length}")
            key = None
        else:
            if position + key_length > end:
                raise CorruptRecordError(f"key of {key_length} bytes overruns its record")
            key = data[position : position + key_length]
            position += key_length
        value_length, position = read_varint(data, position)
        if value_length < 0:
            if value_length != -1:
                raise CorruptRecordError(f"value length {value_length}")
            value = None
        else:
            if position + value_length > end:
                raise CorruptRecordError(f"value of {value_length} bytes overruns its record")
            value = data[position : position + value_length]
            position += value_length
        header_count, position = read_varint(data, position)
        if header_count:
            headers, position = _decode_headers(data, position, end, header_count)
        else:
            headers = ()
        if position != end:
            raise CorruptRecordError(f"record length {length} disagrees with its fields")
        yield Record(
            base_offset + offset_delta,
            base_timestamp + timestamp_delta if log_append_time is None else log_append_time,
            key,
            value,
            headers,
        )
    if position != size:
        raise CorruptRecordError(f"{size - position} bytes trail the last record")


def _decode_headers(
    data: bytes, position: int, end: int, header_count: int
) -> tuple[tuple[Header, ...], int]:
    # Each header takes at least 2 bytes: bound the count before looping on it.
    if header_count < 0 or header_count * 2 > end - position:
        raise CorruptRecordError(f"header count {header_count} does not fit the record")
    headers: list[Header] = []
    for _ in range(header_count):
        key_length, position = read_varint(data, position)
        if key_length < 0 or position + key_length > end:
            raise CorruptRecordError(f"header key length {key_length}")
        try:
            header_key = data[position : position + key_length].decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptRecordError("header key is not UTF-8") from None
        position += key_length
        value_length, position = read_varint(data, position)
        if value_length < 0:
            if value_length != -1:
                raise CorruptRecordError(f"header value length {value_length}")
            headers.append((header_key, None))
        else:
            if position + value_length > end:
                raise CorruptRecordError(f"header value of {value_length} bytes overruns")
            headers.append((header_key, data[position : position + value_length]))
            position += value_length
    return tuple(headers), position
