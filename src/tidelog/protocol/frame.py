"""Sans-I/O splitting of a Kafka byte stream into request frames.

Stream layout (both directions)::

    size    int32   big-endian count of the bytes that follow, 0 <= size <= max_frame_bytes
    frame   size bytes (request header + body; see codec.py)
    size    int32   next frame ...

The size is checked the moment its four bytes are known, before any byte of the frame is
buffered, so a peer declaring 2 GiB costs us nothing (Kafka's socket.request.max.bytes rule).
Bytes are buffered only as they arrive, never pre-allocated from a declared size.
"""

from __future__ import annotations

import struct

from tidelog.errors import ProtocolDecodeError

_SIZE = struct.Struct(">i")


class FrameSizeError(ProtocolDecodeError):
    """A frame's declared size is impossible; the connection must be closed."""

    def __init__(self, declared_size: int, max_frame_bytes: int, message: str) -> None:
        super().__init__(message)
        self.declared_size = declared_size
        self.max_frame_bytes = max_frame_bytes


class FrameTooLarge(FrameSizeError):
    """Declared size above ``max_frame_bytes`` (socket.request.max.bytes)."""


class NegativeFrameSize(FrameSizeError):
    """Declared size below zero."""


class FrameDecoder:
    """Feed it bytes as they arrive; get back every frame completed by them, in order.

    Frames come back as ``bytes`` without their size prefix (kio's reader refuses
    ``bytearray``). After a size error the decoder stays failed: every later ``feed`` raises
    the same error, because the stream can no longer be split.
    """

    __slots__ = ("_buffer", "_error", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int) -> None:
        if max_frame_bytes < 0:
            raise ValueError(f"max_frame_bytes must be >= 0, got {max_frame_bytes}")
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._error: FrameSizeError | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for a frame not yet complete (size prefix included)."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        if self._error is not None:
            raise self._error
        frames: list[bytes] = []
        buffer = self._buffer
        if not buffer:
            # Fast path: whole frames straight out of `data`, no staging copy.
            position = self._split(data, frames)
            if position < len(data):
                buffer += data[position:]
        else:
            buffer += data
        if len(buffer) >= 4:
            position = self._split(buffer, frames)
            # Deleting a prefix of a bytearray is O(1) amortised in CPython.
            del buffer[:position]
        return frames

    def _split(self, data: bytes | bytearray | memoryview, frames: list[bytes]) -> int:
        """Append complete frames from ``data``; return where the unconsumed bytes start."""
        position = 0
        available = len(data)
        while available - position >= 4:
            (size,) = _SIZE.unpack_from(data, position)
            self._check_size(size)
            end = position + 4 + size
            if end > available:
                return position
            frames.append(bytes(data[position + 4 : end]))
            position = end
        return position

    def _check_size(self, size: int) -> None:
        if size < 0:
            self._error = NegativeFrameSize(
                size, self.max_frame_bytes, f"frame declares a negative size {size}"
            )
            raise self._error
        if size > self.max_frame_bytes:
            self._error = FrameTooLarge(
                size,
                self.max_frame_bytes,
                f"frame of {size} bytes is larger than the limit of {self.max_frame_bytes}",
            )
            raise self._error
