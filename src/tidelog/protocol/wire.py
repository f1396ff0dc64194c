"""Hand-written codecs for the two hot paths: Produce requests in, Fetch responses out.

Why not kio here: kio's reader copies each record set into an immutable `bytes`, while the log
rewrites baseOffset in place (D2) and wants a writable view of the receive buffer; and a Fetch
response must leave holes for record bytes that go by sendfile (D6). Everything else uses kio.
Sans-I/O: bytes in, values out; no sockets.

Produce request v3-v13 (after the request header; v9+ flexible: compact forms + tagged fields;
v11-v12 are v10's layout)::

    transactional_id   nullable string   int16 length (-1 null) | v9+: uvarint length+1 (0 null)
    acks               int16             0, 1 or -1
    timeout_ms         int32
    topic_data         array             int32 count | v9+: uvarint count+1
      name             string            v3-v12 | v13+: topic_id uuid (16 bytes, KIP-516)
      partition_data   array
        index          int32
        records        nullable bytes    int32 length (-1 null) | v9+: uvarint length+1
        [tagged fields]                  v9+ only, per partition / topic / request

Fetch response v4-v16 (after the response header; v12+ flexible)::

    throttle_time_ms   int32
    error_code         int16             v7+
    session_id         int32             v7+
    responses          array
      topic            string            v4-v12 name | v13+: topic_id uuid (16 bytes)
      partitions       array
        partition_index        int32
        error_code             int16
        high_watermark         int64
        last_stable_offset     int64
        log_start_offset       int64     v5+
        aborted_transactions   nullable array of (producer_id int64, first_offset int64)
        preferred_read_replica int32     v11+ (-1)
        records                nullable bytes: the length, then the segment bytes by sendfile
        [tagged fields]
      [tagged fields]
    [tagged fields]
"""

from __future__ import annotations

import io
import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from tidelog.errors import ProtocolDecodeError
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.codec import RequestHeader
from tidelog.protocol.guard import read_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")
_PARTITION_FIXED = struct.Struct(">ihqq")  # partition_index, error_code, high_watermark, lso
_I64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")  # producer_id, first_offset


# --- reading ---------------------------------------------------------------------------------
class _Reader:
    __slots__ = ("frame", "position")

    def __init__(self, frame: memoryview, position: int) -> None:
        self.frame = frame
        self.position = position

    def need(self, count: int) -> None:
        if count < 0 or self.position + count > len(self.frame):
            raise ProtocolDecodeError(
                f"field of {count} bytes at {self.position} runs past the"
                f" {len(self.frame)}-byte frame"
            )

    def int16(self) -> int:
        self.need(2)
        value: int = _I16.unpack_from(self.frame, self.position)[0]
        self.position += 2
        return value

    def int32(self) -> int:
        self.need(4)
        value: int = _I32.unpack_from(self.frame, self.position)[0]
        self.position += 4
        return value

    def uvarint(self) -> int:
        value, self.position = read_uvarint(self.frame, self.position, len(self.frame))
        return value

    def length(self, flexible: bool) -> int:
        """A string/bytes/array length: -1 means null."""
        if flexible:
            return self.uvarint() - 1
        return self.int32()

    def string(self, flexible: bool, nullable: bool) -> str | None:
        size = self.uvarint() - 1 if flexible else self.int16()
        if size < 0:
            if nullable:
                return None
            raise ProtocolDecodeError("null where a string is required")
        self.need(size)
        text = bytes(self.frame[self.position : self.position + size]).decode("utf-8", "replace")
        self.position += size
        return text

    def count(self, flexible: bool, limit_each: int) -> int:
        """An array length, checked against the bytes left (each element >= limit_each bytes)."""
        size = self.length(flexible)
        if size < 0:
            raise ProtocolDecodeError("null where an array is required")
        if size * limit_each > len(self.frame) - self.position:
            raise ProtocolDecodeError(f"array of {size} elements cannot fit the frame")
        return size

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            size = self.uvarint()
            self.need(size)
            self.position += size


@dataclass(frozen=True, slots=True)
class ProducePartition:
    index: int
    records: memoryview | None  # a view into the (writable) frame buffer


@dataclass(frozen=True, slots=True)
class ProduceTopic:
    name: str  # v13+: "" until the handler resolves `topic_id`
    partitions: tuple[ProducePartition, ...]
    topic_id: uuid.UUID | None = None  # v13+


@dataclass(frozen=True, slots=True)
class ProduceRequestData:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: tuple[ProduceTopic, ...]


def decode_request_header(frame: memoryview) -> tuple[RequestHeader, int]:
    """The request header and the position of the body; flexible = Produce v9+ here."""
    if len(frame) < _HEADER.size:
        raise ProtocolDecodeError(f"frame of {len(frame)} bytes has no request header")
    api_key, api_version, correlation_id, client_id_length = _HEADER.unpack_from(frame, 0)
    reader = _Reader(frame, _HEADER.size)
    client_id = None
    if client_id_length >= 0:
        reader.need(client_id_length)
        client_id = bytes(frame[reader.position : reader.position + client_id_length]).decode(
            "utf-8", "replace"
        )
        reader.position += client_id_length
    flexible = api_key == ApiKey.PRODUCE and api_version >= 9
    if flexible:
        reader.skip_tagged_fields()
    return RequestHeader(api_key, api_version, correlation_id, client_id, flexible), reader.position


def decode_produce_request(frame: memoryview, version: int, position: int) -> ProduceRequestData:
    """Decode a Produce v3-v13 body; record sets stay views into `frame` (no copies)."""
    flexible = version >= 9
    reader = _Reader(frame, position)
    transactional_id = reader.string(flexible, nullable=True)
    acks = reader.int16()
    timeout_ms = reader.int32()
    topics = []
    for _ in range(reader.count(flexible, 2)):
        topic_id = None
        if version >= 13:
            reader.need(16)
            topic_id = uuid.UUID(bytes=bytes(reader.frame[reader.position : reader.position + 16]))
            reader.position += 16
            name: str | None = ""
        else:
            name = reader.string(flexible, nullable=False)
        partitions = []
        for _ in range(reader.count(flexible, 5)):
            index = reader.int32()
            size = reader.length(flexible)
            records = None
            if size >= 0:
                reader.need(size)
                records = frame[reader.position : reader.position + size]
                reader.position += size
            if flexible:
                reader.skip_tagged_fields()
            partitions.append(ProducePartition(index, records))
        if flexible:
            reader.skip_tagged_fields()
        topics.append(ProduceTopic(name or "", tuple(partitions), topic_id))
    if flexible:
        reader.skip_tagged_fields()
    if reader.position != len(frame):
        raise ProtocolDecodeError(f"{len(frame) - reader.position} trailing bytes after Produce")
    return ProduceRequestData(transactional_id, acks, timeout_ms, tuple(topics))


# --- writing ---------------------------------------------------------------------------------
def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@dataclass(frozen=True, slots=True)
class SendSlice:
    """Record bytes to sendfile from `file`, a private open file description of a segment
    (opened via /proc/self/fd when the fetch was answered), so retention closing the segment
    meanwhile cannot change what is sent. The sender closes `file`."""

    file: io.FileIO
    position: int
    length: int


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A response frame as parts: bytes to write and file slices to sendfile, in order."""

    parts: tuple[bytes | SendSlice, ...]
    size: int  # total frame bytes including the size prefix


@dataclass(frozen=True, slots=True)
class FetchPartitionData:
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: Sequence[SendSlice] = ()
    # aborted_transactions: the array `aborted_transactions` (producer id, first offset)
    # when True (a read_committed read), else null.
    aborted_transactions_listed: bool = False
    aborted_transactions: Sequence[tuple[int, int]] = ()


@dataclass(frozen=True, slots=True)
class FetchTopicData:
    name: str
    topic_id: uuid.UUID
    partitions: Sequence[FetchPartitionData]


def encode_fetch_response(
    header: RequestHeader,
    topics: Sequence[FetchTopicData],
    *,
    error_code: int = 0,
    session_id: int = 0,
    throttle_time_ms: int = 0,
) -> Outgoing:
    """Encode a Fetch v4-v16 response frame whose record bytes stay in the log files."""
    version = header.api_version
    flexible = version >= 12
    parts: list[bytes | SendSlice] = []
    out = bytearray(_I32.pack(header.correlation_id))
    if flexible:
        out.append(0)
    out += _I32.pack(throttle_time_ms)
    if version >= 7:
        out += _I16.pack(error_code) + _I32.pack(session_id)
    out += _uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    for topic in topics:
        if version >= 13:
            out += topic.topic_id.bytes
        else:
            name = topic.name.encode("utf-8")
            out += _uvarint(len(name) + 1) if flexible else _I16.pack(len(name))
            out += name
        count = len(topic.partitions)
        out += _uvarint(count + 1) if flexible else _I32.pack(count)
        for partition in topic.partitions:
            out += _PARTITION_FIXED.pack(
                partition.partition_index,
                partition.error_code,
                partition.high_watermark,
                partition.last_stable_offset,
            )
            if version >= 5:
                out += _I64.pack(partition.log_start_offset)
            if partition.aborted_transactions_listed:
                aborted = partition.aborted_transactions
                out += _uvarint(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
                for producer_id, first_offset in aborted:
                    out += _ABORTED.pack(producer_id, first_offset)
                    if flexible:
                        out.append(0)
            else:
                out += b"\x00" if flexible else b"\xff\xff\xff\xff"  # null
            if version >= 11:
                out += b"\xff\xff\xff\xff"  # preferred_read_replica: none
            records_size = sum(piece.length for piece in partition.records)
            out += _uvarint(records_size + 1) if flexible else _I32.pack(records_size)
            if records_size:
                parts.append(bytes(out))
                parts.extend(piece for piece in partition.records if piece.length)
                out = bytearray()
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    if flexible:
        out.append(0)
    parts.append(bytes(out))
    body_size = sum(len(part) if isinstance(part, bytes) else part.length for part in parts)
    first = parts[0]
    assert isinstance(first, bytes)  # the header always leads
    parts[0] = _I32.pack(body_size) + first
    return Outgoing(tuple(parts), body_size + 4)
