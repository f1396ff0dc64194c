"""Codecs: both snappy framings, multi-member streams, truncation, and bounded decompression."""

from __future__ import annotations

import gzip
import struct
import tracemalloc

import cramjam
import lz4.frame
import pytest
import zstandard

from tidelog.errors import CorruptRecordError
from tidelog.records.batch import HEADER_SIZE, Codec, RecordBatch
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.codecs import (
    XERIAL_BLOCK_SIZE,
    XERIAL_HEADER,
    compress,
    compress_snappy_raw,
    decompress,
)
from tidelog.records.record import iter_records

COMPRESSED = [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]
TEXT = b"".join(b"line %d of some log text\n" % i for i in range(5000))  # ~130 KB


@pytest.mark.parametrize("codec", list(Codec))
def test_round_trip(codec: Codec) -> None:
    assert decompress(codec, compress(codec, TEXT)) == TEXT
    assert decompress(codec, compress(codec, b"")) == b""


def test_snappy_xerial_layout_and_raw_snappy() -> None:
    framed = compress(Codec.SNAPPY, TEXT)
    assert framed[:16] == XERIAL_HEADER
    first_block_length = struct.unpack_from(">i", framed, 16)[0]
    first_block = framed[20 : 20 + first_block_length]
    assert bytes(cramjam.snappy.decompress_raw(first_block)) == TEXT[:XERIAL_BLOCK_SIZE]
    # librdkafka writes raw snappy without the xerial framing.
    assert decompress(Codec.SNAPPY, compress_snappy_raw(TEXT)) == TEXT


def test_xerial_version_fields_are_not_checked() -> None:
    framed = bytearray(compress(Codec.SNAPPY, TEXT))
    framed[8:16] = struct.pack("<ii", 1, 1)  # written little-endian by some producers
    assert decompress(Codec.SNAPPY, framed) == TEXT


def test_concatenated_gzip_members_lz4_and_zstd_frames() -> None:
    assert decompress(Codec.GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"
    assert decompress(Codec.LZ4, lz4.frame.compress(b"ab") + lz4.frame.compress(b"cd")) == b"abcd"
    zstd = zstandard.ZstdCompressor()
    assert decompress(Codec.ZSTD, zstd.compress(b"ab") + zstd.compress(b"cd")) == b"abcd"


def test_lz4_java_style_frame_with_content_checksum() -> None:
    data = lz4.frame.compress(TEXT, content_checksum=True, block_checksum=True)
    assert decompress(Codec.LZ4, data) == TEXT


@pytest.mark.parametrize("codec", COMPRESSED)
def test_every_truncation_is_refused_or_short(codec: Codec) -> None:
    data = compress(codec, TEXT[:4000])
    for cut in range(len(data)):
        try:
            result = decompress(codec, data[:cut])
        except CorruptRecordError:
            continue
        # Only xerial snappy can end cleanly between blocks: a strict prefix of the text.
        assert codec == Codec.SNAPPY and len(result) < 4000


@pytest.mark.parametrize("codec", COMPRESSED)
def test_garbage_is_refused(codec: Codec) -> None:
    for garbage in (b"\x01", b"\xff" * 40, XERIAL_HEADER + b"\x00\x00\x00\x05abcde", b"\x82SNA"):
        with pytest.raises(CorruptRecordError):
            decompress(codec, garbage)


def test_snappy_declared_length_checked_before_decompressing() -> None:
    # A 4-byte raw block that claims 2 GB: refused from its preamble alone.
    with pytest.raises(CorruptRecordError, match="more than"):
        decompress(Codec.SNAPPY, b"\x80\x80\x80\x80\x08\x00")
    lying = bytearray(compress_snappy_raw(b"hello"))
    lying[0] = 9  # declares 9 bytes, holds 5
    with pytest.raises(CorruptRecordError):
        decompress(Codec.SNAPPY, lying)


BOMB_SIZE = 48 * 1024 * 1024
LIMIT = 1024 * 1024


@pytest.fixture(scope="module")
def bombs() -> dict[Codec, bytes]:
    zeros = bytes(BOMB_SIZE)
    return {codec: compress(codec, zeros) for codec in COMPRESSED}


@pytest.mark.parametrize("codec", COMPRESSED)
def test_bomb_is_rejected_without_allocating_it(codec: Codec, bombs: dict[Codec, bytes]) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="more than"):
            decompress(codec, bombs[codec], LIMIT)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The bomb is 48 MiB; decompression stops within a few MiB of the 1 MiB limit.
    assert peak < 8 * LIMIT + 2 * len(bombs[codec])


@pytest.mark.parametrize("codec", COMPRESSED)
def test_exactly_at_the_limit_is_accepted(codec: Codec) -> None:
    data = bytes(range(256)) * 256
    assert decompress(codec, compress(codec, data), len(data)) == data
    with pytest.raises(CorruptRecordError):
        decompress(codec, compress(codec, data), len(data) - 1)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_bomb_batch_rejected_by_iter_records(codec: Codec) -> None:
    # One record with a 16 MiB value: a valid batch, but past the reader's limit.
    buffer = build_batch([NewRecord(bytes(16 * 1024 * 1024))], codec=codec)
    batch = RecordBatch(buffer)
    batch.validate()
    assert len(buffer) < HEADER_SIZE + 1024 * 1024
    with pytest.raises(CorruptRecordError):
        list(iter_records(batch, max_uncompressed_bytes=LIMIT))
