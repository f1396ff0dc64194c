"""Client side of Fetch v11 for one partition: request encoding and response decoding by hand.

Used by readers that want a partition's raw record batches (the Spark source's bulk reads),
so the record bytes stay a view into the received frame, with no per-record object. Pure: no
sockets, no clocks. Every length is checked against the frame before it is used.

Request frame (Fetch v11 is the newest non-flexible version: request header v1)::

    size               int32   bytes that follow
    api_key            int16   1 (Fetch)
    api_version        int16   11
    correlation_id     int32
    client_id          string  int16 length + UTF-8
    replica_id         int32   -1: a consumer
    max_wait_ms        int32
    min_bytes          int32
    max_bytes          int32
    isolation_level    int8    0 read_uncommitted, 1 read_committed
    session_id         int32   0: sessionless
    session_epoch      int32   -1: full fetch
    topics             int32 count (1)
      topic            string
      partitions       int32 count (1)
        partition            int32
        current_leader_epoch int32   -1: unknown
        fetch_offset         int64
        log_start_offset     int64   -1 (consumers)
        partition_max_bytes  int32
    forgotten_topics   int32 count (0)
    rack_id            string  empty

Response frame, after the size prefix (response header v0)::

    correlation_id     int32
    throttle_time_ms   int32
    error_code         int16   top-level (fetch sessions)
    session_id         int32
    responses          int32 count
      topic            string
      partitions       int32 count
        partition_index       int32
        error_code            int16
        high_watermark        int64
        last_stable_offset    int64
        log_start_offset      int64
        aborted_transactions  int32 count (-1 null), each producer_id int64, first_offset int64
        preferred_read_replica int32
        records               int32 length (-1 null), then that many bytes of record batches
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tidelog.errors import ProtocolDecodeError
from tidelog.protocol.api_keys import ApiKey

FETCH_VERSION = 11
REPLICA_ID_CONSUMER = -1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_REQUEST_HEAD = struct.Struct(">ihhih")  # size, api_key, api_version, correlation_id, len
_REQUEST_BODY = struct.Struct(">iiiibii")
_PARTITION = struct.Struct(">iiiqqi")  # 1 partition: count, partition, epoch, offset, lso, max
_TAIL = struct.Struct(">ih")  # forgotten topics count, rack_id length
_RESPONSE_HEAD = struct.Struct(">iihi")  # correlation_id, throttle, error_code, session_id
_PARTITION_HEAD = struct.Struct(">ihqqq")  # index, error_code, hw, last stable, log start
_ABORTED_SIZE = 16


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    partition: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: memoryview  # concatenated record batches; the last one may be cut short


def encode_fetch_request(
    correlation_id: int,
    client_id: str,
    topic: str,
    partition: int,
    fetch_offset: int,
    *,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partition_max_bytes: int,
    isolation_level: int = 0,
) -> bytes:
    """One framed Fetch v11 request for one partition (layout in the module docstring)."""
    client = client_id.encode()
    name = topic.encode()
    body = b"".join(
        (
            client,
            _REQUEST_BODY.pack(
                REPLICA_ID_CONSUMER, max_wait_ms, min_bytes, max_bytes, isolation_level, 0, -1
            ),
            _I32.pack(1),
            _I16.pack(len(name)),
            name,
            _PARTITION.pack(1, partition, -1, fetch_offset, -1, partition_max_bytes),
            _TAIL.pack(0, 0),
        )
    )
    size = _REQUEST_HEAD.size - 4 + len(body)
    return _REQUEST_HEAD.pack(size, ApiKey.FETCH, FETCH_VERSION, correlation_id, len(client)) + body


def decode_fetch_response(
    frame: memoryview, correlation_id: int, topic: str, partition: int
) -> FetchedPartition:
    """Decode a Fetch v11 response frame (without its size prefix) for one partition.

    Raises ProtocolDecodeError when the frame is malformed, answers another request, or does not
    name the partition asked for."""
    reader = _Reader(frame)
    answered, _throttle, error_code, _session = reader.unpack(_RESPONSE_HEAD)
    if answered != correlation_id:
        raise ProtocolDecodeError(f"correlation id {answered}, expected {correlation_id}")
    if error_code:
        return FetchedPartition(partition, error_code, -1, -1, memoryview(b""))
    wanted = topic.encode()
    for _ in range(reader.count()):
        name = reader.take(reader.unpack(_I16)[0])
        for _ in range(reader.count()):
            index, code, high_watermark, _last_stable, log_start = reader.unpack(_PARTITION_HEAD)
            aborted = reader.unpack(_I32)[0]
            if aborted > 0:
                reader.take(aborted * _ABORTED_SIZE)
            reader.unpack(_I32)  # preferred_read_replica
            size = reader.unpack(_I32)[0]
            records = reader.take(size) if size > 0 else memoryview(b"")
            if name == wanted and index == partition:
                return FetchedPartition(index, code, high_watermark, log_start, records)
    raise ProtocolDecodeError(f"the response does not name {topic}/{partition}")


class _Reader:
    """Bounds-checked reads from a frame; every failure is a ProtocolDecodeError."""

    __slots__ = ("_frame", "_position")

    def __init__(self, frame: memoryview) -> None:
        self._frame = frame
        self._position = 0

    def unpack(self, layout: struct.Struct) -> tuple[int, ...]:
        end = self._position + layout.size
        if end > len(self._frame):
            raise ProtocolDecodeError("Fetch response cut short")
        values = layout.unpack_from(self._frame, self._position)
        self._position = end
        return values

    def take(self, size: int) -> memoryview:
        end = self._position + size
        if size < 0 or end > len(self._frame):
            raise ProtocolDecodeError(f"Fetch response field of {size} bytes overruns the frame")
        self._position = end
        return self._frame[end - size : end]

    def count(self) -> int:
        value = self.unpack(_I32)[0]
        # Each element takes at least 4 bytes: a forged count cannot make us loop for long.
        if value < 0 or value * 4 > len(self._frame) - self._position:
            raise ProtocolDecodeError(f"Fetch response array count {value}")
        return value
