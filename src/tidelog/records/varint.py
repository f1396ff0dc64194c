"""Kafka's zigzag varints (protobuf style), as used inside v2 records.

Layout: a signed value v is zigzag-mapped to an unsigned one, ``(v << 1) ^ (v >> 63)``, so small
magnitudes of either sign stay short; the result is written 7 bits at a time, least significant
group first, with the high bit of each byte set when more bytes follow. Kafka writes int32
fields (record length, offsetDelta, key/value/header lengths, header count) in at most 5 bytes
and the int64 timestampDelta in at most 10; one reader accepts up to 10 bytes for either, and
callers bound the decoded values against the bytes that remain.
"""

from __future__ import annotations

from tidelog.errors import CorruptRecordError

MAX_VARINT_BYTES = 10
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1

# Zigzag-encoded single bytes for -64..63 (lengths, deltas and counts are mostly here).
_SMALL = {value: bytes(((value << 1) ^ (value >> 63),)) for value in range(-64, 64)}


def read_varint(data: bytes, position: int) -> tuple[int, int]:
    """Decode the zigzag varint at `position`; returns (value, position after it).

    Raises CorruptRecordError when the bytes end first or the varint runs past 10 bytes.
    """
    try:
        byte = data[position]
        if byte < 0x80:  # the common case: one byte, no loop
            return (byte >> 1) ^ -(byte & 1), position + 1
        result = byte & 0x7F
        shift = 7
        position += 1
        while True:
            byte = data[position]
            position += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return (result >> 1) ^ -(result & 1), position
            shift += 7
            if shift >= 7 * MAX_VARINT_BYTES:
                raise CorruptRecordError("varint longer than 10 bytes")
    except IndexError:
        raise CorruptRecordError("varint runs past the end of the records") from None


def encode_varint(value: int) -> bytes:
    """Zigzag-encode a signed 64-bit value."""
    small = _SMALL.get(value)
    if small is not None:
        return small
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"{value} does not fit a signed 64-bit varint")
    unsigned = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while unsigned >= 0x80:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)
    return bytes(out)


def size_of_varint(value: int) -> int:
    """Bytes `encode_varint(value)` takes."""
    unsigned = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    return max(1, (unsigned.bit_length() + 6) // 7)


def read_unsigned_varint(data: bytes | bytearray | memoryview, position: int) -> tuple[int, int]:
    """Decode a plain (not zigzag) unsigned varint of at most 5 bytes, e.g. snappy's length
    preamble; returns (value, position after it)."""
    result = 0
    shift = 0
    end = min(len(data), position + 5)
    while position < end:
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7
    raise CorruptRecordError("unsigned varint truncated or longer than 5 bytes")
