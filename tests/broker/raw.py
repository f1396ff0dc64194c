"""A tiny raw Kafka client for broker tests: kio-encoded requests over a plain socket."""

from __future__ import annotations

import io
import socket
import struct
import sys
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

API_VERSIONS = 18


def request_module(api_key: int, version: int) -> Any:
    return sys.modules[load_request_schema(api_key, version).__module__]


def encode_request(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    request_cls = load_request_schema(api_key, version)
    header = request_cls.__header_schema__(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id="raw-test",
    )
    buffer = io.BytesIO()
    entity_writer(type(header))(buffer, header)
    entity_writer(request_cls)(buffer, body)
    payload = buffer.getvalue()
    return struct.pack(">i", len(payload)) + payload


class RawClient:
    def __init__(self, bootstrap: str, timeout_s: float = 30.0) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self._correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def next_correlation_id(self) -> int:
        self._correlation_id += 1
        return self._correlation_id

    def send(self, api_key: int, version: int, body: Any) -> int:
        correlation_id = self.next_correlation_id()
        self.sock.sendall(encode_request(api_key, version, correlation_id, body))
        return correlation_id

    def read_frame(self) -> bytes:
        """One response frame without its size prefix; b"" when the broker closed."""
        head = self._read_exactly(4)
        if len(head) < 4:
            return b""
        (size,) = struct.unpack(">i", head)
        return self._read_exactly(size)

    def _read_exactly(self, count: int) -> bytes:
        chunks = []
        while count:
            chunk = self.sock.recv(count)
            if not chunk:
                break
            chunks.append(chunk)
            count -= len(chunk)
        return b"".join(chunks)

    def read_response(self, api_key: int, version: int, correlation_id: int) -> Any:
        frame = self.read_frame()
        assert frame, "broker closed the connection"
        (got,) = struct.unpack_from(">i", frame, 0)
        assert got == correlation_id, (got, correlation_id)
        response_cls = load_response_schema(api_key, version)
        flexible = response_cls.__flexible__ and api_key != API_VERSIONS
        body, _ = entity_reader(response_cls)(frame, 5 if flexible else 4)
        return body

    def call(self, api_key: int, version: int, body: Any) -> Any:
        return self.read_response(api_key, version, self.send(api_key, version, body))

    def is_closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, TimeoutError):
            return True
