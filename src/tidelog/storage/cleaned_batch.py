"""Compaction of one record batch: keep the latest record per key, rewrite with offsets intact.

A rewritten batch keeps baseOffset, partitionLeaderEpoch, lastOffsetDelta, codec, timestamp
type, transactional flag, producerId, producerEpoch and baseSequence, so every surviving record
keeps its offset and the batch still spans the offsets (and sequences) it spanned; only the
records section, recordsCount, maxTimestamp, the CRC and the delete horizon change. Surviving
records are copied byte for byte (offsetDelta unchanged) except when baseTimestamp moves, where
their timestampDelta is re-encoded against the new base.

Tombstones (null value) follow KIP-534: the first cleaning that keeps a tombstone as the
latest record of its key stamps the batch with a delete horizon (attributes bit 6 set,
baseTimestamp = now + delete.retention.ms); a later cleaning at or after the horizon drops it.
Consumers that read the log from the start within delete.retention.ms thus see the delete.

Records without a key cannot be compacted (Kafka rejects them at append with INVALID_RECORD);
one found in a compacted log (e.g. after cleanup.policy changed) is dropped, as Kafka's cleaner
does. Transactions are the pass's business (cleaner_pass.py: aborted batches are removed
whole, markers kept or stamped with `stamp_delete_horizon`); a committed transactional batch
is compacted here like any other. A batch left with no records is dropped: the offsets it
spanned become a gap that fetch and consumers skip.

Pure functions over bytes; raise CorruptRecordError on malformed batches.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tidelog.errors import CorruptRecordError
from tidelog.records.batch import (
    ATTR_CODEC_MASK,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTRIBUTES_POSITION,
    BASE_TIMESTAMP_POSITION,
    BATCH_LENGTH_POSITION,
    CRC_POSITION,
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    RECORDS_COUNT_POSITION,
    Codec,
    RecordBatch,
    crc32c,
)
from tidelog.records.codecs import DEFAULT_MAX_UNCOMPRESSED_BYTES, compress, decompress
from tidelog.records.varint import encode_varint, read_varint
from tidelog.storage.offset_map import OffsetMap, key_digest

_BATCH_LENGTH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMPS = struct.Struct(">qq")  # baseTimestamp, maxTimestamp at byte 27
_COUNT = struct.Struct(">i")
_CRC = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One record's place in a decompressed records section and the fields compaction reads."""

    start: int  # first byte of the length varint
    end: int  # one past the record's last byte
    timestamp_start: int  # first byte of timestampDelta (after the attributes byte)
    offset_start: int  # first byte of offsetDelta (the rest is copied unchanged)
    timestamp_delta: int
    offset: int
    key: bytes | None
    is_tombstone: bool


def parse_records(batch: RecordBatch, data: bytes) -> list[RawRecord]:
    """Locate each record of a decompressed records section (Kafka's record layout)."""
    count = batch.records_count
    size = len(data)
    if count < 0 or count > size // 7:
        raise CorruptRecordError(f"{size} bytes cannot hold {count} records")
    base_offset = batch.base_offset
    records: list[RawRecord] = []
    position = 0
    for _ in range(count):
        start = position
        length, position = read_varint(data, position)
        end = position + length
        if length < 6 or end > size:
            raise CorruptRecordError(f"record length {length} does not fit the batch")
        timestamp_start = position + 1  # skip the attributes byte
        timestamp_delta, offset_start = read_varint(data, timestamp_start)
        offset_delta, position = read_varint(data, offset_start)
        if not 0 <= offset_delta <= batch.last_offset_delta:
            raise CorruptRecordError(f"offsetDelta {offset_delta} outside the batch")
        key_length, position = read_varint(data, position)
        key: bytes | None = None
        if key_length >= 0:
            key = data[position : position + key_length]
            position += key_length
        elif key_length != -1:
            raise CorruptRecordError(f"key length {key_length}")
        value_length, position = read_varint(data, position)
        if position > end or value_length < -1 or position + max(value_length, 0) > end:
            raise CorruptRecordError("record fields overrun the record length")
        records.append(
            RawRecord(start, end, timestamp_start, offset_start, timestamp_delta,
                      base_offset + offset_delta, key, value_length == -1)
        )
        position = end
    if position != size:
        raise CorruptRecordError(f"{size - position} bytes trail the last record")
    return records


def records_section(batch: RecordBatch) -> bytes:
    codec_id = batch.attributes & ATTR_CODEC_MASK
    if codec_id > Codec.ZSTD:
        raise CorruptRecordError(f"unknown compression codec {codec_id}")
    return decompress(Codec(codec_id), batch.records_bytes, DEFAULT_MAX_UNCOMPRESSED_BYTES)


def clean_batch(
    batch: RecordBatch, offset_map: OffsetMap, *, now_ms: int, delete_retention_ms: int
) -> bytearray | memoryview | None:
    """The batch as compaction leaves it: the original bytes when nothing changes, new bytes
    when some records go or a delete horizon is stamped, None when no record survives.

    Every record of `batch` must be below the end of what `offset_map` covers."""
    if batch.is_control:
        return batch.buffer  # markers: the pass decides (cleaner_pass._clean_marker)
    data = records_section(batch)
    records = parse_records(batch, data)
    horizon = batch.base_timestamp if batch.has_delete_horizon else None
    drop_tombstones = horizon is not None and now_ms >= horizon
    kept: list[RawRecord] = []
    for record in records:
        if record.key is None:
            continue
        if offset_map.get(key_digest(record.key)) > record.offset:
            continue  # a later record of the same key exists
        if record.is_tombstone and drop_tombstones:
            continue
        kept.append(record)
    if not kept:
        return None
    keeps_tombstone = any(record.is_tombstone for record in kept)
    new_horizon: int | None = None
    if keeps_tombstone:
        new_horizon = horizon if horizon is not None else now_ms + delete_retention_ms
    if len(kept) == len(records) and new_horizon == horizon:
        return batch.buffer
    return _rewrite(batch, data, kept, new_horizon)


def stamp_delete_horizon(batch: RecordBatch, horizon_ms: int) -> bytearray:
    """The batch, every record kept, with a delete horizon: how Kafka's cleaner delays the
    removal of a transaction marker whose transaction's data is gone (by delete.retention.ms,
    as for tombstones)."""
    data = records_section(batch)
    return _rewrite(batch, data, parse_records(batch, data), horizon_ms)


def _rewrite(
    batch: RecordBatch, data: bytes, kept: list[RawRecord], horizon: int | None
) -> bytearray:
    old_base_timestamp = batch.base_timestamp
    log_append_time = bool(batch.attributes & ATTR_TIMESTAMP_TYPE)
    timestamps = [old_base_timestamp + record.timestamp_delta for record in kept]
    if horizon is not None:
        base_timestamp = horizon
    elif batch.has_delete_horizon:  # the horizon goes with the last tombstone
        base_timestamp = batch.max_timestamp if log_append_time else timestamps[0]
    else:
        base_timestamp = old_base_timestamp
    # LogAppendTime records all read maxTimestamp: their deltas mean nothing, keep them.
    rebase = not log_append_time and base_timestamp != old_base_timestamp
    section = bytearray()
    for record, timestamp in zip(kept, timestamps, strict=True):
        if not rebase:
            section += data[record.start : record.end]
            continue
        body = bytearray(data[record.timestamp_start - 1 : record.timestamp_start])
        body += encode_varint(timestamp - base_timestamp)
        body += data[record.offset_start : record.end]
        section += encode_varint(len(body))
        section += body
    codec = Codec(batch.attributes & ATTR_CODEC_MASK)
    payload = section if codec == Codec.NONE else compress(codec, section)
    max_timestamp = batch.max_timestamp if log_append_time else max(timestamps)
    attributes = batch.attributes & ~ATTR_DELETE_HORIZON
    if horizon is not None:
        attributes |= ATTR_DELETE_HORIZON
    # Header bytes 0..60 of the original, then the fields that change.
    out = bytearray(batch.buffer[:HEADER_SIZE])
    out += payload
    _BATCH_LENGTH.pack_into(out, BATCH_LENGTH_POSITION, len(out) - LOG_OVERHEAD)
    _ATTRIBUTES.pack_into(out, ATTRIBUTES_POSITION, attributes)
    _TIMESTAMPS.pack_into(out, BASE_TIMESTAMP_POSITION, base_timestamp, max_timestamp)
    _COUNT.pack_into(out, RECORDS_COUNT_POSITION, len(kept))
    _CRC.pack_into(out, CRC_POSITION, crc32c(memoryview(out)[CRC_START:]))
    return out
