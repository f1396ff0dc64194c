"""Zero-copy view over one Kafka record batch (magic v2), CRC32C, and produce-payload splitting.

Batch layout (big-endian; offsets are byte positions from the start of the batch)::

    0  baseOffset            int64   first offset in the batch (rewritten by the broker)
    8  batchLength           int32   bytes after this field: total size = batchLength + 12
   12  partitionLeaderEpoch  int32   (rewritten by the broker; not under the CRC)
   16  magic                 int8    always 2
   17  crc                   uint32  CRC32C over bytes 21..end (attributes to the last record)
   21  attributes            int16   bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
   23  lastOffsetDelta       int32   offset of the last record minus baseOffset
   27  baseTimestamp         int64
   35  maxTimestamp          int64
   43  producerId            int64
   51  producerEpoch         int16
   53  baseSequence          int32
   57  recordsCount          int32
   61  records...                    (compressed as one block when the codec is not none)

The broker never decodes records on the produce path (ARCHITECTURE D2): it validates the
header and CRC here, rewrites baseOffset / partitionLeaderEpoch in place (and, for
LogAppendTime topics, attributes + maxTimestamp + the CRC), and appends the bytes. The field
positions below (`*_POSITION`) and `HEADER_STRUCT` are the one copy of this layout: the
builder, the log validator, the segment and the cleaner use them.
"""

from __future__ import annotations

import enum
import mmap
import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c as _crc32c

from tidelog.errors import CorruptRecordError, InvalidRecordError

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted by batchLength
MAGIC_V2 = 2
CRC_START = 21  # the CRC covers attributes .. end of batch

# Byte positions of the header fields (the table above).
BASE_OFFSET_POSITION = 0
BATCH_LENGTH_POSITION = 8
LEADER_EPOCH_POSITION = 12
MAGIC_POSITION = 16
CRC_POSITION = 17
ATTRIBUTES_POSITION = 21
LAST_OFFSET_DELTA_POSITION = 23
BASE_TIMESTAMP_POSITION = 27
MAX_TIMESTAMP_POSITION = 35
PRODUCER_ID_POSITION = 43
PRODUCER_EPOCH_POSITION = 51
BASE_SEQUENCE_POSITION = 53
RECORDS_COUNT_POSITION = 57

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
assert HEADER_STRUCT.size == HEADER_SIZE
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_MAX_TIMESTAMP = struct.Struct(">q")
_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")

ATTR_CODEC_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40


class Codec(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


def crc32c(data: bytes | bytearray | memoryview) -> int:
    return int(_crc32c.crc32c(data))


class RecordBatch:
    """A view over one batch's bytes; reads fields lazily, copies nothing.

    `buffer` may be bytes, bytearray or memoryview; in-place rewrites need a writable buffer.
    The constructor checks only that the header is present and that batchLength fits the
    buffer; call `validate()` for the full check.
    """

    __slots__ = ("buffer", "size")

    def __init__(self, buffer: bytes | bytearray | memoryview) -> None:
        view = memoryview(buffer)
        if len(view) < HEADER_SIZE:
            raise CorruptRecordError(f"batch of {len(view)} bytes is shorter than the header")
        _, batch_length = _OFFSET_AND_LENGTH.unpack_from(view, 0)
        size = int(batch_length) + LOG_OVERHEAD
        if size < HEADER_SIZE or size > len(view):
            raise CorruptRecordError(
                f"batchLength {batch_length} does not fit the {len(view)} bytes given"
            )
        self.buffer = view[:size]
        self.size = size

    # --- header fields -------------------------------------------------------------------
    @property
    def base_offset(self) -> int:
        value: int = _BASE_OFFSET.unpack_from(self.buffer, 0)[0]
        return value

    @property
    def batch_length(self) -> int:
        return self.size - LOG_OVERHEAD

    @property
    def partition_leader_epoch(self) -> int:
        value: int = _LEADER_EPOCH.unpack_from(self.buffer, LEADER_EPOCH_POSITION)[0]
        return value

    @property
    def magic(self) -> int:
        return int(self.buffer[MAGIC_POSITION])

    @property
    def crc(self) -> int:
        value: int = struct.unpack_from(">I", self.buffer, CRC_POSITION)[0]
        return value

    @property
    def attributes(self) -> int:
        value: int = struct.unpack_from(">h", self.buffer, ATTRIBUTES_POSITION)[0]
        return value

    @property
    def last_offset_delta(self) -> int:
        value: int = struct.unpack_from(">i", self.buffer, LAST_OFFSET_DELTA_POSITION)[0]
        return value

    @property
    def base_timestamp(self) -> int:
        value: int = struct.unpack_from(">q", self.buffer, BASE_TIMESTAMP_POSITION)[0]
        return value

    @property
    def max_timestamp(self) -> int:
        value: int = _MAX_TIMESTAMP.unpack_from(self.buffer, MAX_TIMESTAMP_POSITION)[0]
        return value

    @property
    def producer_id(self) -> int:
        value: int = struct.unpack_from(">q", self.buffer, PRODUCER_ID_POSITION)[0]
        return value

    @property
    def producer_epoch(self) -> int:
        value: int = struct.unpack_from(">h", self.buffer, PRODUCER_EPOCH_POSITION)[0]
        return value

    @property
    def base_sequence(self) -> int:
        value: int = struct.unpack_from(">i", self.buffer, BASE_SEQUENCE_POSITION)[0]
        return value

    @property
    def records_count(self) -> int:
        value: int = struct.unpack_from(">i", self.buffer, RECORDS_COUNT_POSITION)[0]
        return value

    # --- derived -------------------------------------------------------------------------
    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def codec(self) -> Codec:
        codec_id = self.attributes & ATTR_CODEC_MASK
        if codec_id > Codec.ZSTD:  # bits 0-2 can say 5..7: bad input, typed error
            raise CorruptRecordError(f"unknown compression codec {codec_id}")
        return Codec(codec_id)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(1 if self.attributes & ATTR_TIMESTAMP_TYPE else 0)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    @property
    def records_bytes(self) -> memoryview:
        return self.buffer[HEADER_SIZE : self.size]

    # --- checks --------------------------------------------------------------------------
    def compute_crc(self) -> int:
        return crc32c(self.buffer[CRC_START : self.size])

    def is_valid(self) -> bool:
        return self.magic == MAGIC_V2 and self.compute_crc() == self.crc

    def validate(self) -> None:
        """Kafka's per-batch append checks: magic, CRC, counts. Raises a typed KafkaError."""
        if self.magic != MAGIC_V2:
            raise CorruptRecordError(f"unsupported magic {self.magic} (only v2 batches)")
        if self.compute_crc() != self.crc:
            raise CorruptRecordError("CRC32C mismatch")
        attributes = self.attributes
        if attributes & ATTR_CODEC_MASK > Codec.ZSTD:
            raise CorruptRecordError(f"unknown compression codec {attributes & 7}")
        count = self.records_count
        delta = self.last_offset_delta
        if count <= 0:
            raise InvalidRecordError(f"batch holds {count} records")
        if delta < 0 or (count - 1 > delta):
            raise InvalidRecordError(
                f"lastOffsetDelta {delta} inconsistent with recordsCount {count}"
            )
        if self.codec == Codec.NONE and self.size - HEADER_SIZE < count * 7:
            # A record is at least 7 bytes (length, attributes, deltas, key, value, headers).
            raise CorruptRecordError("records section too short for recordsCount")

    # --- in-place rewrites (not under the CRC) -------------------------------------------
    def set_base_offset(self, base_offset: int) -> None:
        _BASE_OFFSET.pack_into(self.buffer, BASE_OFFSET_POSITION, base_offset)

    def set_partition_leader_epoch(self, epoch: int) -> None:
        _LEADER_EPOCH.pack_into(self.buffer, LEADER_EPOCH_POSITION, epoch)

    def set_log_append_time(self, now_ms: int) -> None:
        """message.timestamp.type=LogAppendTime: set the timestamp-type bit, stamp maxTimestamp
        and recompute the CRC (both fields are under it). Records keep their deltas: readers
        use maxTimestamp for every record of a LogAppendTime batch."""
        buffer = self.buffer
        _ATTRIBUTES.pack_into(buffer, ATTRIBUTES_POSITION, self.attributes | ATTR_TIMESTAMP_TYPE)
        _MAX_TIMESTAMP.pack_into(buffer, MAX_TIMESTAMP_POSITION, now_ms)
        _CRC.pack_into(buffer, CRC_POSITION, crc32c(buffer[CRC_START : self.size]))

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset_delta="
            f"{self.last_offset_delta}, count={self.records_count}, size={self.size}, "
            f"codec={self.attributes & ATTR_CODEC_MASK})"
        )


class BatchHeader(NamedTuple):
    """The header fields the log needs to index and scan, plus the batch's file position."""

    position: int
    base_offset: int
    size: int
    last_offset_delta: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    attributes: int = 0

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)


def read_batch_header(
    buffer: bytes | bytearray | memoryview | mmap.mmap, offset: int, position: int
) -> BatchHeader:
    """The header at `buffer[offset:]` (HEADER_SIZE bytes must be there) of the batch at file
    `position`. Checks nothing: callers check size and magic."""
    (base, length, _, _, _, attributes, delta, _, max_ts, pid, epoch, seq, _) = (
        HEADER_STRUCT.unpack_from(buffer, offset)
    )
    return BatchHeader(
        position, base, length + LOG_OVERHEAD, delta, max_ts, pid, epoch, seq, attributes
    )


def peek_batch_size(buffer: bytes | bytearray | memoryview, position: int = 0) -> int:
    """Total size of the batch starting at `position`, or -1 if its 12-byte prefix is missing."""
    if len(buffer) - position < LOG_OVERHEAD:
        return -1
    _, batch_length = _OFFSET_AND_LENGTH.unpack_from(buffer, position)
    return int(batch_length) + LOG_OVERHEAD


def split_batches(payload: bytes | bytearray | memoryview) -> list[RecordBatch]:
    """Split a produce payload into batches; truncated or trailing bytes raise CORRUPT_MESSAGE."""
    view = memoryview(payload)
    batches: list[RecordBatch] = []
    position = 0
    end = len(view)
    while position < end:
        if end - position < HEADER_SIZE:
            raise CorruptRecordError(f"{end - position} trailing bytes after the last batch")
        batch = RecordBatch(view[position:])
        batches.append(batch)
        position += batch.size
    if not batches:
        raise CorruptRecordError("empty record set")
    return batches


def iter_batches(buffer: bytes | bytearray | memoryview) -> Iterator[RecordBatch]:
    """Yield the whole batches in `buffer`; stops silently at a partial tail (fetch responses)."""
    view = memoryview(buffer)
    position = 0
    end = len(view)
    while end - position >= HEADER_SIZE:
        size = peek_batch_size(view, position)
        if size < HEADER_SIZE or position + size > end:
            return
        yield RecordBatch(view[position : position + size])
        position += size
