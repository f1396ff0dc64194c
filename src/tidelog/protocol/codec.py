"""Sans-I/O request decoding and response encoding on top of kio.

Frame layout on the wire (every Kafka request and response)::

    size            int32   bytes that follow
    -- request header v1 (non-flexible APIs) / v2 (flexible: + tagged fields) --
    api_key         int16
    api_version     int16
    correlation_id  int32
    client_id       nullable string (int16 length; -1 = null)
    [tagged fields] uvarint count + fields, v2 only
    body            the request schema of (api_key, api_version)

    -- response header v0 / v1 (flexible: + tagged fields) --
    correlation_id  int32
    [tagged fields] v1 only; never for ApiVersions (COMPATIBILITY.md trap 1)
    body

`decode_request` takes one frame *without* its size prefix; `encode_response` returns the
frame *with* its size prefix. Everything here is pure: no sockets, no clocks.

Before kio's native reader sees a body, `guard.check_request` proves every declared length
and count fits the frame (kio would otherwise try to allocate from a forged count and abort
the process). A request whose (api_key, api_version) is not in the supported table raises
`UnsupportedVersionError` before its body is touched: the broker answers ApiVersions with the
v0 fallback (versions.encode_unsupported_api_versions) and closes the connection otherwise,
as Kafka does.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from tidelog.errors import ProtocolDecodeError
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.guard import check_request, read_uvarint, request_plan
from tidelog.protocol.versions import SUPPORTED_VERSIONS, api_name, is_supported

_HEADER_FIXED = struct.Struct(">hhih")
_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")


class UnsupportedVersionError(ProtocolDecodeError):
    """The API key is unknown or the version is outside the supported range."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"unsupported {api_name(api_key)} (key {api_key}) v{api_version}")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    flexible: bool


@dataclass(frozen=True, slots=True)
class Request:
    header: RequestHeader
    body: Any  # a kio request entity


def parse_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a frame; enough to answer an error."""
    if len(frame) < 8:
        raise ProtocolDecodeError(f"frame of {len(frame)} bytes has no request header")
    api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame, 0)
    return int(api_key), int(api_version), int(correlation_id)


@cache
def request_schema(api_key: int, api_version: int) -> Any:
    return load_request_schema(api_key, api_version)


@cache
def response_schema(api_key: int, api_version: int) -> Any:
    return load_response_schema(api_key, api_version)


@cache
def _reader(schema: Any) -> Any:
    return entity_reader(schema)


@cache
def _writer(schema: Any) -> Any:
    return entity_writer(schema)


def prepare(supported: Mapping[int, tuple[int, int]] = SUPPORTED_VERSIONS) -> None:
    """Load every request schema, kio reader and guard plan of ``supported`` now.

    Call once at broker start-up: the first request of each kind is then as fast as the
    rest, and a schema the guard cannot check fails at start-up instead of mid-traffic.
    """
    for api_key, (low, high) in supported.items():
        for api_version in range(low, high + 1):
            schema = request_schema(api_key, api_version)
            _reader(schema)
            request_plan(schema)


def decode_request(
    frame: bytes | memoryview,
    supported: Mapping[int, tuple[int, int]] = SUPPORTED_VERSIONS,
) -> Request:
    """Decode one request frame (without the size prefix).

    Raises UnsupportedVersionError (a ProtocolDecodeError) for an (api_key, api_version)
    outside ``supported``, and ProtocolDecodeError for anything malformed. ``frame`` must be
    ``bytes`` or a memoryview of ``bytes`` (kio refuses bytearray).
    """
    if len(frame) < _HEADER_FIXED.size:
        raise ProtocolDecodeError(f"frame of {len(frame)} bytes has no request header")
    api_key, api_version, correlation_id, client_id_length = _HEADER_FIXED.unpack_from(frame, 0)
    if not is_supported(api_key, api_version, supported):
        raise UnsupportedVersionError(int(api_key), int(api_version), int(correlation_id))
    position = _HEADER_FIXED.size
    client_id: str | None = None
    if client_id_length >= 0:
        end = position + client_id_length
        if end > len(frame):
            raise ProtocolDecodeError("client_id runs past the end of the frame")
        client_id = bytes(frame[position:end]).decode("utf-8", "replace")
        position = end
    elif client_id_length != -1:
        raise ProtocolDecodeError(f"client_id has a negative length {client_id_length}")
    try:
        schema = request_schema(api_key, api_version)
    except Exception as error:  # kio raises its own index errors for unknown keys/versions
        raise UnsupportedVersionError(int(api_key), int(api_version), int(correlation_id)) from (
            error
        )
    flexible = bool(schema.__flexible__)
    if flexible:
        position = _skip_tagged_fields(frame, position)
    check_request(schema, frame, position)
    try:
        body, _ = _reader(schema)(frame, position)
    except Exception as error:
        raise ProtocolDecodeError(f"malformed {schema.__name__} v{api_version}: {error}") from error
    header = RequestHeader(int(api_key), int(api_version), int(correlation_id), client_id, flexible)
    return Request(header, body)


def _skip_tagged_fields(frame: bytes | memoryview, position: int) -> int:
    count, position = read_uvarint(frame, position, len(frame))
    for _ in range(count):
        _, position = read_uvarint(frame, position, len(frame))
        size, position = read_uvarint(frame, position, len(frame))
        position += size
        if position > len(frame):
            raise ProtocolDecodeError("tagged field runs past the end of the frame")
    return position


def encode_response(header: RequestHeader, body: Any) -> bytes:
    """Encode a kio response entity as a complete frame (size prefix included)."""
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    buffer.write(_CORRELATION.pack(header.correlation_id))
    # Response header v1 (tagged fields) goes with flexible response versions, except for
    # ApiVersions, whose header is always v0 so any client can parse it (trap 1).
    if type(body).__flexible__ and header.api_key != ApiKey.API_VERSIONS:
        buffer.write(b"\0")  # empty tagged fields of response header v1
    body_type: Any = type(body)
    _writer(body_type)(buffer, body)
    frame = buffer.getbuffer()
    _SIZE.pack_into(frame, 0, len(frame) - 4)
    del frame
    return buffer.getvalue()
