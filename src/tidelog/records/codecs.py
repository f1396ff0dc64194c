"""Compression codecs of record batches, with bounded decompression.

The records section of a compressed batch (everything after the 61-byte header) is one
compressed block. Formats, per codec (attributes bits 0-2):

- 1 gzip: RFC 1952 gzip member(s) (stdlib zlib; concatenated members are accepted).
- 2 snappy: either raw snappy (what librdkafka writes: unsigned-varint uncompressed length,
  then the compressed stream) or the xerial framing the Java client writes::

      0   magic    8 bytes  0x82 'S' 'N' 'A' 'P' 'P' 'Y' 0x00
      8   version  int32    1
      12  compat   int32    1
      16  blocks   [int32 compressed length, raw snappy block]*  (each block <= 32 KiB raw)

- 3 lz4: the LZ4 frame format with independent blocks (Kafka's reader rejects linked blocks).
- 4 zstd: one or more zstd frames.

Decompression never produces more than `max_uncompressed_bytes`: gzip and lz4 decompress with
a `max_length`, zstd through a stream reader read in chunks, snappy checks each declared
uncompressed length before decompressing. A bomb raises CorruptRecordError, as does any
malformed input; nothing else escapes.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import lz4.frame
import zstandard

from tidelog.errors import CorruptRecordError
from tidelog.records.batch import Codec
from tidelog.records.varint import read_unsigned_varint

DEFAULT_MAX_UNCOMPRESSED_BYTES = 64 * 1024 * 1024
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")
_ZSTD_SLICE = 128

Buffer = bytes | bytearray | memoryview


def compress(codec: Codec, data: Buffer) -> bytes:
    """Compress a records section; snappy uses the Java client's xerial framing."""
    if codec == Codec.NONE:
        return bytes(data)
    if codec == Codec.GZIP:
        return gzip.compress(bytes(data), compresslevel=6, mtime=0)
    if codec == Codec.SNAPPY:
        return compress_snappy_xerial(data)
    if codec == Codec.LZ4:
        result: bytes = lz4.frame.compress(
            bytes(data),
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
        )
        return result
    if codec == Codec.ZSTD:
        compressed: bytes = zstandard.ZstdCompressor(level=3).compress(bytes(data))
        return compressed
    raise ValueError(f"unknown codec {codec!r}")


def compress_snappy_raw(data: Buffer) -> bytes:
    return bytes(cramjam.snappy.compress_raw(bytes(data)))


def compress_snappy_xerial(data: Buffer) -> bytes:
    view = memoryview(data)
    out = bytearray(XERIAL_HEADER)
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(bytes(view[start : start + XERIAL_BLOCK_SIZE])))
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def decompress(
    codec: Codec, data: Buffer, max_uncompressed_bytes: int = DEFAULT_MAX_UNCOMPRESSED_BYTES
) -> bytes:
    """Decompress a records section; more than `max_uncompressed_bytes` raises."""
    if codec == Codec.NONE:
        if len(data) > max_uncompressed_bytes:
            raise _bomb(max_uncompressed_bytes)
        return bytes(data)
    if codec == Codec.GZIP:
        return _decompress_gzip(data, max_uncompressed_bytes)
    if codec == Codec.SNAPPY:
        return _decompress_snappy(data, max_uncompressed_bytes)
    if codec == Codec.LZ4:
        return _decompress_lz4(data, max_uncompressed_bytes)
    if codec == Codec.ZSTD:
        return _decompress_zstd(data, max_uncompressed_bytes)
    raise CorruptRecordError(f"unknown compression codec {int(codec)}")


def _bomb(limit: int) -> CorruptRecordError:
    return CorruptRecordError(f"records decompress to more than {limit} bytes")


def _decompress_gzip(data: Buffer, limit: int) -> bytes:
    out = bytearray()
    pending = bytes(data)
    if not pending:
        raise CorruptRecordError("empty gzip stream")
    try:
        while pending:
            decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
            # Ask for one byte past the limit so "exactly at the limit" is still accepted.
            out += decompressor.decompress(pending, limit - len(out) + 1)
            while decompressor.unconsumed_tail and len(out) <= limit:
                out += decompressor.decompress(decompressor.unconsumed_tail, limit - len(out) + 1)
            if len(out) > limit:
                raise _bomb(limit)
            if not decompressor.eof:
                raise CorruptRecordError("gzip stream truncated")
            pending = decompressor.unused_data
    except zlib.error as error:
        raise CorruptRecordError(f"gzip: {error}") from None
    return bytes(out)


def _decompress_snappy(data: Buffer, limit: int) -> bytes:
    view = memoryview(data)
    if view[: len(XERIAL_MAGIC)] != XERIAL_MAGIC:
        return _decompress_snappy_block(view, limit, limit)
    if len(view) < len(XERIAL_HEADER):
        raise CorruptRecordError("xerial snappy header truncated")
    # version and compat are not checked: some producers write them little-endian.
    out = bytearray()
    position = len(XERIAL_HEADER)
    while position < len(view):
        if len(view) - position < 4:
            raise CorruptRecordError("xerial snappy block length truncated")
        (block_length,) = _INT32.unpack_from(view, position)
        position += 4
        if block_length < 0 or block_length > len(view) - position:
            raise CorruptRecordError(f"xerial snappy block of {block_length} bytes overruns")
        block = view[position : position + block_length]
        out += _decompress_snappy_block(block, limit - len(out), limit)
        position += block_length
    return bytes(out)


def _decompress_snappy_block(block: memoryview, room: int, limit: int) -> bytes:
    declared, _ = read_unsigned_varint(block, 0)
    if declared > room:
        raise _bomb(limit)
    try:
        result = bytes(cramjam.snappy.decompress_raw(bytes(block)))
    except cramjam.DecompressionError as error:
        raise CorruptRecordError(f"snappy: {error}") from None
    if len(result) != declared:
        raise CorruptRecordError("snappy block length differs from its preamble")
    return result


def _decompress_lz4(data: Buffer, limit: int) -> bytes:
    out = bytearray()
    pending = bytes(data)
    if not pending:
        raise CorruptRecordError("empty lz4 stream")
    try:
        while pending:
            decompressor = lz4.frame.LZ4FrameDecompressor()
            out += decompressor.decompress(pending, max_length=limit - len(out) + 1)
            while not decompressor.eof and not decompressor.needs_input and len(out) <= limit:
                out += decompressor.decompress(b"", max_length=limit - len(out) + 1)
            if len(out) > limit:
                raise _bomb(limit)
            if not decompressor.eof:
                raise CorruptRecordError("lz4 frame truncated")
            pending = decompressor.unused_data
    except RuntimeError as error:  # lz4.frame reports every malformed frame as RuntimeError
        raise CorruptRecordError(f"lz4: {error}") from None
    return bytes(out)


def _decompress_zstd(data: Buffer, limit: int) -> bytes:
    view = memoryview(data)
    if not view:
        raise CorruptRecordError("empty zstd stream")
    out = bytearray()
    decompressor = zstandard.ZstdDecompressor()
    frame = decompressor.decompressobj()
    frame_open = False  # the current decompressor has taken bytes of a frame not yet ended
    try:
        # zstandard's decompressobj has no max_length, so feed it small slices: one RLE block
        # turns 4 input bytes into 128 KiB, so a slice yields at most _ZSTD_SLICE * 32 KiB.
        for start in range(0, len(view), _ZSTD_SLICE):
            pending = view[start : start + _ZSTD_SLICE].tobytes()
            while pending:
                out += frame.decompress(pending)
                frame_open = True
                if len(out) > limit:
                    raise _bomb(limit)
                pending = b""
                if frame.eof:  # a following frame starts in unused_data
                    pending = frame.unused_data
                    frame = decompressor.decompressobj()
                    frame_open = False
    except zstandard.ZstdError as error:
        raise CorruptRecordError(f"zstd: {error}") from None
    if frame_open:
        raise CorruptRecordError("zstd frame truncated")
    return bytes(out)
