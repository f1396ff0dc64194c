from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog.errors import ProtocolDecodeError
from tidelog.protocol.frame import FrameDecoder, FrameTooLarge, NegativeFrameSize


def framed(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(payload)) + payload for payload in payloads)


PAYLOADS = [b"", b"a", b"hello kafka", bytes(range(256)) * 5, b"\x00\x00\x00\x05"]


def test_whole_buffer_gives_every_frame() -> None:
    decoder = FrameDecoder(max_frame_bytes=4096)
    assert decoder.feed(framed(PAYLOADS)) == PAYLOADS
    assert decoder.buffered_bytes == 0


def test_byte_by_byte() -> None:
    decoder = FrameDecoder(max_frame_bytes=4096)
    stream = framed(PAYLOADS)
    frames: list[bytes] = []
    for index in range(len(stream)):
        frames += decoder.feed(stream[index : index + 1])
    assert frames == PAYLOADS
    assert decoder.buffered_bytes == 0


def test_trailing_partial_frame_is_kept() -> None:
    decoder = FrameDecoder(max_frame_bytes=4096)
    stream = framed([b"first", b"second"])
    assert decoder.feed(stream[:-1]) == [b"first"]
    assert decoder.buffered_bytes == 4 + len(b"second") - 1
    assert decoder.feed(stream[-1:]) == [b"second"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=300), max_size=8),
    st.lists(st.integers(0, 3000), max_size=12),
    st.sampled_from([bytes, bytearray, memoryview]),
)
def test_random_splits(payloads: list[bytes], cuts: list[int], kind: type) -> None:
    stream = framed(payloads)
    points = sorted({min(cut, len(stream)) for cut in cuts})
    decoder = FrameDecoder(max_frame_bytes=300)
    frames: list[bytes] = []
    start = 0
    for point in [*points, len(stream)]:
        frames += decoder.feed(kind(stream[start:point]))
        start = point
    assert frames == payloads
    assert all(type(frame) is bytes for frame in frames)
    assert decoder.buffered_bytes == 0


def test_frame_of_exactly_the_limit_is_accepted() -> None:
    decoder = FrameDecoder(max_frame_bytes=10)
    assert decoder.feed(framed([b"x" * 10])) == [b"x" * 10]


def test_too_large_is_refused_from_the_size_alone() -> None:
    decoder = FrameDecoder(max_frame_bytes=100 * 1024 * 1024)
    with pytest.raises(FrameTooLarge) as caught:
        decoder.feed(struct.pack(">i", 2**31 - 1))
    assert isinstance(caught.value, ProtocolDecodeError)
    assert caught.value.declared_size == 2**31 - 1
    assert decoder.buffered_bytes == 0
    # The stream cannot be split any more: the decoder stays failed.
    with pytest.raises(FrameTooLarge):
        decoder.feed(b"more")


def test_too_large_after_a_good_frame_in_the_same_chunk() -> None:
    decoder = FrameDecoder(max_frame_bytes=8)
    with pytest.raises(FrameTooLarge):
        decoder.feed(framed([b"ok"]) + struct.pack(">i", 9) + b"123456789")


def test_size_split_across_feeds_is_checked_when_complete() -> None:
    decoder = FrameDecoder(max_frame_bytes=8)
    assert decoder.feed(b"\x00\x00") == []
    with pytest.raises(FrameTooLarge):
        decoder.feed(b"\x01\x00")


def test_negative_size() -> None:
    decoder = FrameDecoder(max_frame_bytes=1024)
    with pytest.raises(NegativeFrameSize):
        decoder.feed(struct.pack(">i", -1) + b"abc")


def test_large_frame_in_chunks() -> None:
    payload = bytes(range(256)) * 8192  # 2 MiB
    stream = framed([payload, b"tail"])
    decoder = FrameDecoder(max_frame_bytes=len(payload))
    frames: list[bytes] = []
    for start in range(0, len(stream), 65536):
        frames += decoder.feed(memoryview(stream)[start : start + 65536])
    assert frames == [payload, b"tail"]
