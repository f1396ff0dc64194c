"""Raw Kafka-protocol I/O for the differential harness: plain dicts in, plain data out.

Requests are written as nested dicts (field names are kio's, i.e. Kafka's JSON schema names
in snake_case) and turned into kio entities of the exact version asked for; a key that is not
a field of that version is an error, so a script cannot silently send less than it says.
Fields left out get kio's default or, without one, the zero of their type.

Responses come back as plain data (dicts, lists, ints, strings): timedeltas become
milliseconds, UUIDs strings, error codes ``NAME(code)``, and every ``records`` field is parsed
into a list of batches (see ``parse_records``) so two brokers' record bytes compare field by
field instead of as opaque blobs.

Nothing here imports Tidelog: the harness must judge Tidelog from the outside.
"""

from __future__ import annotations

import dataclasses
import enum
import io
import socket
import struct
import sys
import types
import typing
import uuid
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

API_VERSIONS = 18
CLIENT_ID = "tidelog-differential"

# Outcomes that are not a decoded response body.
CLOSED = {"<connection>": "closed by broker"}
NO_RESPONSE = {"<connection>": "no response (as expected)"}


class ScriptError(Exception):
    """A script asked for something the request schema does not have."""


# ---------------------------------------------------------------- building request entities


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return rest[0], True
    return tp, False


def _zero(tp: Any) -> Any:
    tp, optional = _unwrap_optional(tp)
    if optional:
        return None
    if typing.get_origin(tp) is tuple:
        return ()
    if dataclasses.is_dataclass(tp):
        return build(tp, {})
    if isinstance(tp, type):
        if issubclass(tp, timedelta):
            return timedelta(0)
        if issubclass(tp, uuid.UUID):
            return uuid.UUID(int=0)
        if issubclass(tp, bool):
            return False
        if issubclass(tp, enum.Enum):
            return next(iter(tp))
        if issubclass(tp, bytes):
            return b""
        if issubclass(tp, str):
            return ""
        if issubclass(tp, int):
            return 0
    raise ScriptError(f"no zero value for {tp!r}")


def _convert(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    tp, _ = _unwrap_optional(tp)
    if typing.get_origin(tp) is tuple:
        (element, *_rest) = typing.get_args(tp)
        return tuple(_convert(element, item) for item in value)
    if dataclasses.is_dataclass(tp) and isinstance(value, dict):
        return build(tp, value)
    if isinstance(tp, type):
        if issubclass(tp, timedelta) and isinstance(value, int):
            return timedelta(milliseconds=value)
        if issubclass(tp, uuid.UUID) and not isinstance(value, uuid.UUID):
            return uuid.UUID(int=0) if value in (0, None, "") else uuid.UUID(str(value))
        if issubclass(tp, enum.Enum) and isinstance(value, int):
            return tp(value)
    return value


def build(cls: Any, values: dict[str, Any]) -> Any:
    """The kio entity ``cls`` from a dict; unknown keys raise ScriptError."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(values) - set(fields)
    if unknown:
        raise ScriptError(f"{cls.__qualname__} v{cls.__version__} has no field {sorted(unknown)}")
    hints = _hints(cls)
    kwargs = {}
    for name, field in fields.items():
        if name in values:
            kwargs[name] = _convert(hints[name], values[name])
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            kwargs[name] = _zero(hints[name])
    return cls(**kwargs)


def encode_request(
    api_key: int, version: int, correlation_id: int, body: dict[str, Any] | bytes
) -> bytes:
    """A complete frame. ``body`` as bytes is sent verbatim after a v1/v2 header of the
    version's flexibility (or a v1 header when kio has no schema for that version)."""
    buffer = io.BytesIO()
    try:
        request_cls = load_request_schema(api_key, version)
    except Exception:
        request_cls = None
    if request_cls is None:
        if not isinstance(body, bytes):
            raise ScriptError(f"no kio schema for api {api_key} v{version}: send raw bytes")
        client = CLIENT_ID.encode()
        buffer.write(struct.pack(">hhih", api_key, version, correlation_id, len(client)))
        buffer.write(client)
        buffer.write(body)
    else:
        header = request_cls.__header_schema__(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=correlation_id,
            client_id=CLIENT_ID,
        )
        entity_writer(type(header))(buffer, header)
        if isinstance(body, bytes):
            buffer.write(body)
        else:
            entity_writer(request_cls)(buffer, build(request_cls, body))
    payload = buffer.getvalue()
    return struct.pack(">i", len(payload)) + payload


# ---------------------------------------------------------------- the connection


class Connection:
    """One TCP connection to one broker; reconnects lazily after the broker closed it."""

    def __init__(self, bootstrap: str, timeout_s: float = 20.0) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.address = (host, int(port))
        self.timeout_s = timeout_s
        self.sock: socket.socket | None = None
        self.correlation_id = 0

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _socket(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=self.timeout_s)
        return self.sock

    def exchange(
        self,
        api_key: int,
        version: int,
        body: dict[str, Any] | bytes,
        *,
        response_version: int | None = None,
        expect_response: bool = True,
        timeout_s: float | None = None,
    ) -> Any:
        """Send one request; the decoded response as plain data, or a ``<connection>`` dict."""
        self.correlation_id += 1
        correlation_id = self.correlation_id
        frame = encode_request(api_key, version, correlation_id, body)
        sock = self._socket()
        sock.settimeout(timeout_s or self.timeout_s)
        try:
            sock.sendall(frame)
        except OSError:
            self.close()
            return dict(CLOSED)
        if not expect_response:
            return dict(NO_RESPONSE)
        try:
            response = self._read_frame(sock)
        except TimeoutError:
            self.close()
            return {"<connection>": "timed out"}
        except OSError:
            response = b""
        if not response:
            self.close()
            return dict(CLOSED)
        (got,) = struct.unpack_from(">i", response, 0)
        if got != correlation_id:
            self.close()
            return {"<connection>": f"correlation id {got}, expected {correlation_id}"}
        return decode_response(
            api_key, version if response_version is None else response_version, response
        )

    def _read_frame(self, sock: socket.socket) -> bytes:
        head = _read_exactly(sock, 4)
        if len(head) < 4:
            return b""
        (size,) = struct.unpack(">i", head)
        return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    chunks = []
    while count:
        chunk = sock.recv(min(count, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def _skip_tagged_fields(frame: bytes, position: int) -> int:
    def uvarint(pos: int) -> tuple[int, int]:
        shift = value = 0
        while True:
            byte = frame[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value, pos
            shift += 7

    count, position = uvarint(position)
    for _ in range(count):
        _, position = uvarint(position)
        size, position = uvarint(position)
        position += size
    return position


def decode_response(api_key: int, version: int, frame: bytes) -> Any:
    try:
        response_cls = load_response_schema(api_key, version)
        position = 4
        if response_cls.__flexible__ and api_key != API_VERSIONS:
            position = _skip_tagged_fields(frame, position)
        body, consumed = entity_reader(response_cls)(frame, position)
    except Exception as error:  # a body kio cannot read is itself a finding
        return {"<undecodable>": f"{type(error).__name__}: {error}", "<bytes>": len(frame)}
    result = to_plain(body)
    if position + consumed != len(frame):
        result["<trailing bytes>"] = len(frame) - position - consumed
    return result


# ---------------------------------------------------------------- plain data


def to_plain(value: Any, field: str = "") -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name), f.name) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [to_plain(item, field) for item in value]
    if isinstance(value, timedelta):
        return int(value / timedelta(milliseconds=1))
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        if type(value).__name__ == "ErrorCode":
            return f"{value.name.upper()}({value.value})"
        return value.value
    if isinstance(value, bytes | bytearray | memoryview):
        if field == "records":
            return parse_records(bytes(value))
        return "0x" + bytes(value).hex()
    return value


# ---------------------------------------------------------------- record batches

_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
_BATCH_HEADER_SIZE = _BATCH_HEADER.size  # 61


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = raw = 0
    while True:
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def _crc32c(data: bytes) -> int:
    import crc32c  # the project's dependency; imported late so a missing one is clear

    return int(crc32c.crc32c(data))


def parse_records(data: bytes) -> list[dict[str, Any]]:
    """Magic v2 batches as dicts (CRC checked, records decoded when uncompressed).

    A trailing partial batch (Kafka may cut the last batch at the fetch size) is reported as
    ``{"partial_batch_bytes": n}``.
    """
    batches: list[dict[str, Any]] = []
    position = 0
    while position < len(data):
        if len(data) - position < 17:
            batches.append({"partial_batch_bytes": len(data) - position})
            break
        base_offset, length = struct.unpack_from(">qi", data, position)
        end = position + 12 + length
        if end > len(data) or length < _BATCH_HEADER_SIZE - 12:
            batches.append({"partial_batch_bytes": len(data) - position})
            break
        (
            _,
            _,
            leader_epoch,
            magic,
            crc,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        ) = _BATCH_HEADER.unpack_from(data, position)
        batch: dict[str, Any] = {
            "base_offset": base_offset,
            "partition_leader_epoch": leader_epoch,
            "magic": magic,
            "crc_ok": magic == 2 and crc == _crc32c(data[position + 21 : end]),
            "attributes": attributes,
            "last_offset_delta": last_offset_delta,
            "base_timestamp": base_timestamp,
            "max_timestamp": max_timestamp,
            "producer_id": producer_id,
            "producer_epoch": producer_epoch,
            "base_sequence": base_sequence,
            "records_count": count,
        }
        if magic == 2 and attributes & 0x07 == 0:
            try:
                batch["records"] = _parse_batch_records(
                    data[position + _BATCH_HEADER_SIZE : end], count, base_offset, base_timestamp
                )
            except (IndexError, struct.error) as error:
                batch["records"] = f"<unreadable: {error}>"
        batches.append(batch)
        position = end
    return batches


def _parse_batch_records(
    data: bytes, count: int, base_offset: int, base_timestamp: int
) -> list[dict[str, Any]]:
    records = []
    pos = 0
    for _ in range(count):
        length, pos = _varint(data, pos)
        end = pos + length
        pos += 1  # attributes
        ts_delta, pos = _varint(data, pos)
        offset_delta, pos = _varint(data, pos)
        key_len, pos = _varint(data, pos)
        key = None if key_len < 0 else data[pos : pos + key_len]
        pos += max(key_len, 0)
        value_len, pos = _varint(data, pos)
        value = None if value_len < 0 else data[pos : pos + value_len]
        pos += max(value_len, 0)
        header_count, pos = _varint(data, pos)
        records.append(
            {
                "offset": base_offset + offset_delta,
                "timestamp": base_timestamp + ts_delta,
                "key": None if key is None else key.decode("utf-8", "replace"),
                "value": None if value is None else value.decode("utf-8", "replace"),
                "headers": header_count,
            }
        )
        pos = end
    return records


def module_of(api_key: int, version: int) -> Any:
    return sys.modules[load_request_schema(api_key, version).__module__]
