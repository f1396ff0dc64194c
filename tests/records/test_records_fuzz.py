"""Decoders fuzzed: random bytes and mutated valid batches into RecordBatch, validate() and
iter_records(); only TidelogError subclasses may escape. Every split or truncation of a
valid produce payload is refused by split_batches."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelog.errors import CorruptRecordError, TidelogError
from tidelog.records.batch import CRC_START, Codec, RecordBatch, crc32c, split_batches
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.record import iter_records

VALID = {
    codec: bytes(
        build_batch(
            [
                NewRecord(b"value %d" % i, key=b"k%d" % i, headers=(("h", b"v"), ("n", None)))
                for i in range(4)
            ],
            codec=codec,
            now_ms=1_700_000_000_000,
        )
    )
    for codec in Codec
}


def decode_everything(data: bytes | bytearray) -> None:
    try:
        batch = RecordBatch(data)
        _ = repr(batch)
        batch.is_valid()
        try:
            batch.validate()
        except TidelogError:
            pass
        list(iter_records(batch, max_uncompressed_bytes=1 << 20))
    except TidelogError:
        pass


def fix_crc(data: bytearray) -> bytearray:
    # Recompute the CRC so a mutation reaches the record decoder instead of the CRC check.
    data[17:21] = crc32c(memoryview(data)[CRC_START:]).to_bytes(4, "big")
    return data


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=0, max_size=300))
def test_random_bytes(data: bytes) -> None:
    decode_everything(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=300))
def test_random_bytes_behind_a_plausible_header(tail: bytes) -> None:
    header = bytearray(VALID[Codec.NONE][:61])
    header[8:12] = (49 + len(tail)).to_bytes(4, "big")
    decode_everything(fix_crc(header + tail))


@settings(max_examples=400, deadline=None)
@given(
    codec=st.sampled_from(list(Codec)),
    flips=st.lists(
        st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1, max_size=4
    ),
    recompute_crc=st.booleans(),
)
def test_mutated_valid_batches(
    codec: Codec, flips: list[tuple[int, int]], recompute_crc: bool
) -> None:
    data = bytearray(VALID[codec])
    for position, value in flips:
        data[position % len(data)] = value
    if recompute_crc:
        fix_crc(data)
    decode_everything(data)


@settings(max_examples=200, deadline=None)
@given(
    codec=st.sampled_from(list(Codec)), cut=st.integers(min_value=61), extra=st.binary(max_size=8)
)
def test_resized_batches(codec: Codec, cut: int, extra: bytes) -> None:
    # Shrink or grow the records section and fix batchLength and CRC to match.
    data = bytearray(VALID[codec])
    data = data[: 61 + cut % (len(data) - 60)] + extra
    data[8:12] = (len(data) - 12).to_bytes(4, "big")
    decode_everything(fix_crc(data))


def test_mutated_batch_flagged_with_unknown_codec() -> None:
    data = bytearray(VALID[Codec.NONE])
    data[22] |= 0x07  # codec 7 does not exist
    fix_crc(data)
    batch = RecordBatch(data)
    for check in (batch.validate, lambda: batch.codec, lambda: list(iter_records(batch))):
        with pytest.raises(CorruptRecordError):
            check()
    assert "codec=7" in repr(batch)


def test_every_truncation_and_split_of_a_payload_is_refused() -> None:
    batches = [VALID[Codec.NONE], VALID[Codec.ZSTD], VALID[Codec.SNAPPY]]
    payload = b"".join(batches)
    boundaries = {0, len(payload)}
    position = 0
    for batch in batches:
        position += len(batch)
        boundaries.add(position)
    assert len(split_batches(payload)) == 3
    for cut in range(len(payload)):
        if cut in boundaries:
            continue
        with pytest.raises(CorruptRecordError):
            split_batches(payload[:cut])  # truncated tail
        with pytest.raises(CorruptRecordError):
            # A torn head may frame by chance; its CRC then refuses it, as the broker checks.
            for batch in split_batches(payload[cut:]):
                batch.validate()
    with pytest.raises(CorruptRecordError):
        split_batches(b"")
    for trailing in (b"\x00", b"\x00" * 11, b"\x00" * 60):
        with pytest.raises(CorruptRecordError):
            split_batches(payload + trailing)


def test_every_cut_of_the_records_section_is_refused_by_iter_records() -> None:
    for codec, valid in VALID.items():
        for cut in range(61, len(valid)):
            data = bytearray(valid[:cut])
            data[8:12] = (cut - 12).to_bytes(4, "big")
            batch = RecordBatch(data)
            with pytest.raises(CorruptRecordError):
                list(iter_records(batch))
            if codec != Codec.NONE:
                continue
            with pytest.raises(CorruptRecordError):
                batch.validate()
