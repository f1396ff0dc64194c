"""A minimal OTLP MetricsData protobuf encoder for tests (the wire format, by hand: the
broker's decoder is what is tested, so this must not share its code)."""

from __future__ import annotations

import struct


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def fixed64(number: int, raw: bytes) -> bytes:
    return varint(number << 3 | 1) + raw


def key_value(key: str, value: str | int | bool | float) -> bytes:
    if isinstance(value, bool):
        any_value = varint(2 << 3) + varint(int(value))
    elif isinstance(value, int):
        any_value = varint(3 << 3) + varint(value)
    elif isinstance(value, float):
        any_value = fixed64(4, struct.pack("<d", value))
    else:
        any_value = field(1, value.encode())
    return field(1, key.encode()) + field(2, any_value)


def number_point(value: float | int, attributes: dict[str, str] | None = None) -> bytes:
    body = b"".join(field(7, key_value(k, v)) for k, v in (attributes or {}).items())
    body += fixed64(3, struct.pack("<Q", 1_700_000_000_000_000_000))
    if isinstance(value, int):
        return body + fixed64(6, struct.pack("<q", value))
    return body + fixed64(4, struct.pack("<d", value))


def histogram_point(count: int, total: float, attributes: dict[str, str] | None = None) -> bytes:
    body = b"".join(field(9, key_value(k, v)) for k, v in (attributes or {}).items())
    body += fixed64(4, struct.pack("<Q", count)) + fixed64(5, struct.pack("<d", total))
    body += field(6, struct.pack("<QQ", count, 0))  # packed bucket counts (skipped)
    return body


def gauge(name: str, *points: bytes) -> bytes:
    return field(1, name.encode()) + field(5, b"".join(field(1, p) for p in points))


def monotonic_sum(name: str, *points: bytes) -> bytes:
    data = b"".join(field(1, p) for p in points) + varint(2 << 3) + varint(1)
    data += varint(3 << 3) + varint(1)
    return field(1, name.encode()) + field(7, data)


def histogram(name: str, *points: bytes) -> bytes:
    return field(1, name.encode()) + field(9, b"".join(field(1, p) for p in points))


def metrics_data(*metrics: bytes, resource: dict[str, str] | None = None) -> bytes:
    resource_body = b"".join(field(1, key_value(k, v)) for k, v in (resource or {}).items())
    scope = field(1, field(1, b"test-scope")) + b"".join(field(2, m) for m in metrics)
    resource_metrics = field(1, resource_body) + field(2, scope)
    return field(1, resource_metrics)
