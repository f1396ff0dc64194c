"""Sans-I/O splitting of a Kafka byte stream into request frames.

Stream layout (both directions)::

    size    int32   big-endian count of the bytes that follow,
                    min_frame_bytes <= size <= max_frame_bytes
    frame   size bytes (request header + body; see codec.py)
    size    int32   next frame ...

The size is checked the moment its four bytes are known, before any byte of the frame is
buffered, so a peer declaring 2 GiB costs us nothing (Kafka's socket.request.max.bytes rule).
Bytes are buffered only as they arrive, never pre-allocated from a declared size.

`FrameReceiver` is the one implementation. It is shaped like `asyncio.BufferedProtocol`
(`get_buffer` / `buffer_updated`, then `next_frame`) so the kernel copies straight into its
buffers, yet it touches no socket:

- The receive buffer (RECEIVE_BUFFER_BYTES) collects small frames; each complete frame is
  copied out once into its own bytearray (the log rewrites baseOffset in it). It is an
  anonymous mmap, so only the pages data has reached are resident: an idle connection costs
  a few KiB, not 256.
- A frame above BIG_FRAME_BYTES that is not complete yet gets its own bytearray, and the
  caller receives into it directly: a big frame is copied at most once per receive buffer's
  worth (the part that arrived with the previous read). That bytearray starts at
  BIG_FRAME_START_BYTES and doubles as bytes arrive, up to the declared size: memory follows
  the bytes received, so a peer declaring 100 MiB frames and sending nothing costs little.

`FrameDecoder` is the push-style front end for bytes that are already in memory (`feed`).
"""

from __future__ import annotations

import mmap
import struct

from tidelog.errors import ProtocolDecodeError

_SIZE = struct.Struct(">i")
RECEIVE_BUFFER_BYTES = 256 * 1024
BIG_FRAME_BYTES = 64 * 1024
BIG_FRAME_START_BYTES = 1024 * 1024


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


class FrameTooSmall(FrameSizeError):
    """Declared size below ``min_frame_bytes`` (a request header alone needs 8 bytes)."""


class FrameReceiver:
    """Receive into `get_buffer()`, report with `buffer_updated()`, take frames with
    `next_frame()` while the caller wants more (frames not taken stay buffered: that is how a
    caller applies back-pressure). After a size error it stays failed."""

    __slots__ = (
        "_big_filled",
        "_big_frame",
        "_big_size",
        "_buffer",
        "_end",
        "_error",
        "_ready",
        "_start",
        "_view",
        "max_frame_bytes",
        "min_frame_bytes",
    )

    def __init__(self, max_frame_bytes: int, *, min_frame_bytes: int = 0) -> None:
        if max_frame_bytes < 0:
            raise ValueError(f"max_frame_bytes must be >= 0, got {max_frame_bytes}")
        self.max_frame_bytes = max_frame_bytes
        self.min_frame_bytes = min_frame_bytes
        self._buffer = mmap.mmap(-1, RECEIVE_BUFFER_BYTES)  # pages untouched until used
        self._view = memoryview(self._buffer)
        self._start = 0  # first unparsed byte in _buffer
        self._end = 0  # end of received bytes in _buffer
        self._big_frame: bytearray | None = None  # a large frame being filled in place
        self._big_filled = 0
        self._big_size = 0  # its declared size; _big_frame grows towards it
        self._ready: bytearray | None = None  # a big frame completed, not taken yet
        self._error: FrameSizeError | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for frames not yet taken (size prefixes included)."""
        if self._big_frame is not None:
            return 4 + self._big_filled
        ready = 0 if self._ready is None else 4 + len(self._ready)
        return ready + self._end - self._start

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        if self._big_frame is not None:
            if self._big_filled == len(self._big_frame):
                self._grow_big_frame()
            return memoryview(self._big_frame)[self._big_filled :]
        if self._start == self._end:
            # Between frames: read at most BIG_FRAME_BYTES, so the head of a big frame that
            # gets copied into its own buffer stays small.
            self._start = self._end = 0
            return self._view[:BIG_FRAME_BYTES]
        if len(self._buffer) - self._end < BIG_FRAME_BYTES and self._start > 0:
            unparsed = self._end - self._start
            # bytes(): mmap slice assignment is a memcpy, and the two ranges may overlap.
            self._buffer[:unparsed] = bytes(self._view[self._start : self._end])
            self._start, self._end = 0, unparsed
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._big_frame is not None:
            self._big_filled += nbytes
            if self._big_filled == self._big_size:
                self._ready, self._big_frame = self._big_frame, None
            return
        self._end += nbytes

    def next_frame(self) -> bytearray | None:
        """The next complete frame (without its size prefix), or None until more bytes
        arrive. Raises FrameSizeError for an impossible declared size."""
        if self._ready is not None:
            frame, self._ready = self._ready, None
            return frame
        available = self._end - self._start
        if available < 4 or self._big_frame is not None:
            if self._error is not None:
                raise self._error
            return None
        (size,) = _SIZE.unpack_from(self._buffer, self._start)
        if size < self.min_frame_bytes or size > self.max_frame_bytes:  # inline: per frame
            self._refuse(size)
        if available - 4 >= size:
            begin = self._start + 4
            frame = bytearray(self._view[begin : begin + size])
            self._start = begin + size
            return frame
        if size > BIG_FRAME_BYTES:
            # Big frame: the caller receives into a frame-sized bytearray from now on.
            self._big_frame = bytearray(min(size, BIG_FRAME_START_BYTES))
            self._big_size = size
            self._big_filled = available - 4
            self._big_frame[: self._big_filled] = self._view[self._start + 4 : self._end]
            self._start = self._end = 0
        return None

    def _grow_big_frame(self) -> None:
        assert self._big_frame is not None
        size = min(self._big_size, 2 * len(self._big_frame))
        try:
            self._big_frame.extend(bytes(size - len(self._big_frame)))  # realloc, no copy
        except BufferError:  # a view of it is still alive: copy into a new buffer
            grown = bytearray(size)
            grown[: self._big_filled] = self._big_frame
            self._big_frame = grown

    def _refuse(self, size: int) -> None:
        error: FrameSizeError | None = None
        if size < 0:
            error = NegativeFrameSize(
                size, self.max_frame_bytes, f"frame declares a negative size {size}"
            )
        elif size < self.min_frame_bytes:
            error = FrameTooSmall(
                size,
                self.max_frame_bytes,
                f"frame of {size} bytes is smaller than {self.min_frame_bytes}",
            )
        elif size > self.max_frame_bytes:
            error = FrameTooLarge(
                size,
                self.max_frame_bytes,
                f"frame of {size} bytes is larger than the limit of {self.max_frame_bytes}",
            )
        if error is not None:
            self._error = error
            self._start = self._end = 0  # the stream cannot be split any more
            raise error


class FrameDecoder:
    """Feed it bytes as they arrive; get back every frame completed by them, in order.

    Frames come back as ``bytes`` without their size prefix (kio's reader refuses
    ``bytearray``). After a size error the decoder stays failed: every later ``feed`` raises
    the same error, because the stream can no longer be split.
    """

    __slots__ = ("_receiver",)

    def __init__(self, max_frame_bytes: int) -> None:
        self._receiver = FrameReceiver(max_frame_bytes)

    @property
    def max_frame_bytes(self) -> int:
        return self._receiver.max_frame_bytes

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for a frame not yet complete (size prefix included)."""
        return self._receiver.buffered_bytes

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        receiver = self._receiver
        source = memoryview(data)
        frames: list[bytes] = []
        position = 0
        while True:
            while (frame := receiver.next_frame()) is not None:
                frames.append(bytes(frame))
            if position == len(source):
                return frames
            target = receiver.get_buffer(len(source) - position)
            count = min(len(target), len(source) - position)
            assert count > 0, "a drained receiver always has room"
            target[:count] = source[position : position + count]
            receiver.buffer_updated(count)
            position += count
