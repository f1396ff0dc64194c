"""A bounded decoder for the OpenTelemetry metrics a client pushes (KIP-714 PushTelemetry).

The `metrics` bytes of a PushTelemetryRequest are an OTLP `MetricsData` protobuf message
(opentelemetry-proto, metrics/v1/metrics.proto), after decompression with the request's codec.
Only the fields the broker exposes are read; every other field is skipped by its wire type::

    MetricsData      1 resource_metrics   ResourceMetrics (repeated)
    ResourceMetrics  1 resource           Resource            2 scope_metrics  ScopeMetrics*
    Resource         1 attributes         KeyValue*
    ScopeMetrics     2 metrics            Metric*
    Metric           1 name string        5 gauge  Gauge     7 sum  Sum     9 histogram  Histogram
    Gauge, Sum       1 data_points        NumberDataPoint*    (Sum: 3 is_monotonic bool)
    Histogram        1 data_points        HistogramDataPoint*
    NumberDataPoint  7 attributes KeyValue*   4 as_double fixed64 (double)   6 as_int sfixed64
    HistogramDataPoint  9 attributes KeyValue*   4 count fixed64   5 sum fixed64 (double)
    KeyValue         1 key string         2 value AnyValue
    AnyValue         1 string  2 bool varint  3 int varint  4 double fixed64  (others kept as "")

Protobuf wire format: each field is a varint key (field_number << 3 | wire_type); wire type 0
is a varint (at most 10 bytes), 1 eight bytes, 2 a varint length then that many bytes, 5 four
bytes; 3 and 4 (groups) are refused. Every length is checked against the bytes that remain
before it is used, the nesting depth is fixed by the schema above, and the number of data
points and attributes is bounded, so any input costs at most O(len(data)) and raises only
`OtlpError`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import Enum

from tidelog.errors import TidelogError

MAX_DATA_POINTS = 10_000  # per push, across every metric
MAX_ATTRIBUTES = 64  # per data point (resource attributes included)
MAX_STRING_BYTES = 1024  # metric names, attribute keys and values

_DOUBLE = struct.Struct("<d")
_INT64 = struct.Struct("<q")
_UINT64 = struct.Struct("<Q")


class OtlpError(TidelogError):
    """The payload is not a MetricsData message Tidelog can read (Kafka: INVALID_RECORD)."""


class PointKind(Enum):
    GAUGE = "gauge"
    SUM = "sum"
    HISTOGRAM = "histogram"


@dataclass(frozen=True, slots=True)
class DataPoint:
    """One value of one metric: a gauge or sum value, or a histogram's count and sum."""

    metric: str
    kind: PointKind
    value: float  # gauge/sum value; histogram: the count
    attributes: tuple[tuple[str, str], ...]
    histogram_sum: float | None = None
    monotonic: bool = False


@dataclass(frozen=True, slots=True)
class MetricsData:
    resource_attributes: tuple[tuple[str, str], ...]
    points: tuple[DataPoint, ...]


def _varint(data: memoryview, position: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= end:
            raise OtlpError("truncated varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7
        if shift >= 70:
            raise OtlpError("varint longer than 10 bytes")


def _fields(data: memoryview, start: int, end: int) -> list[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value) of each field of one message: a varint or fixed
    value as an int, a length-delimited one as a view."""
    fields: list[tuple[int, int, int | memoryview]] = []
    position = start
    while position < end:
        key, position = _varint(data, position, end)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise OtlpError("field number 0")
        value: int | memoryview
        if wire_type == 0:
            value, position = _varint(data, position, end)
        elif wire_type == 1:
            if end - position < 8:
                raise OtlpError("truncated fixed64")
            value = _UINT64.unpack_from(data, position)[0]
            position += 8
        elif wire_type == 2:
            length, position = _varint(data, position, end)
            if length > end - position:
                raise OtlpError("length beyond the message")
            value = data[position : position + length]
            position += length
        elif wire_type == 5:
            if end - position < 4:
                raise OtlpError("truncated fixed32")
            value = int.from_bytes(data[position : position + 4], "little")
            position += 4
        else:
            raise OtlpError(f"unsupported wire type {wire_type}")
        fields.append((number, wire_type, value))
    return fields


def _message(value: int | memoryview, what: str) -> list[tuple[int, int, int | memoryview]]:
    if not isinstance(value, memoryview):
        raise OtlpError(f"{what} is not a message")
    return _fields(value, 0, len(value))


def _text(value: int | memoryview, what: str) -> str:
    if not isinstance(value, memoryview):
        raise OtlpError(f"{what} is not a string")
    if len(value) > MAX_STRING_BYTES:
        raise OtlpError(f"{what} longer than {MAX_STRING_BYTES} bytes")
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        raise OtlpError(f"{what} is not UTF-8") from None


def _double(bits: int) -> float:
    return float(_DOUBLE.unpack(_UINT64.pack(bits))[0])


def _any_value(value: int | memoryview) -> str:
    for number, wire_type, item in _message(value, "AnyValue"):
        if number == 1 and wire_type == 2:
            return _text(item, "string_value")
        if number == 2 and wire_type == 0:
            return "true" if item else "false"
        if number == 3 and wire_type == 0:
            assert isinstance(item, int)
            return str(item - (1 << 64) if item >= 1 << 63 else item)
        if number == 4 and wire_type == 1:
            assert isinstance(item, int)
            return repr(_double(item))
    return ""


def _key_value(value: int | memoryview) -> tuple[str, str]:
    key, text = "", ""
    for number, _wire_type, item in _message(value, "KeyValue"):
        if number == 1:
            key = _text(item, "attribute key")
        elif number == 2:
            text = _any_value(item)
    return key, text


class _Budget:
    def __init__(self) -> None:
        self.points = 0

    def take(self) -> None:
        self.points += 1
        if self.points > MAX_DATA_POINTS:
            raise OtlpError(f"more than {MAX_DATA_POINTS} data points")


def _attributes(attributes: list[tuple[str, str]], value: int | memoryview) -> None:
    attributes.append(_key_value(value))
    if len(attributes) > MAX_ATTRIBUTES:
        raise OtlpError(f"more than {MAX_ATTRIBUTES} attributes")


def _number_point(
    name: str, kind: PointKind, monotonic: bool, value: int | memoryview
) -> DataPoint:
    attributes: list[tuple[str, str]] = []
    number_value = 0.0
    for number, wire_type, item in _message(value, "NumberDataPoint"):
        if number == 7:
            _attributes(attributes, item)
        elif number == 4 and wire_type == 1:
            assert isinstance(item, int)
            number_value = _double(item)
        elif number == 6 and wire_type == 1:
            assert isinstance(item, int)
            number_value = float(_INT64.unpack(_UINT64.pack(item))[0])
    return DataPoint(name, kind, number_value, tuple(attributes), monotonic=monotonic)


def _histogram_point(name: str, value: int | memoryview) -> DataPoint:
    attributes: list[tuple[str, str]] = []
    count, total = 0.0, 0.0
    for number, wire_type, item in _message(value, "HistogramDataPoint"):
        if number == 9:
            _attributes(attributes, item)
        elif number == 4 and wire_type == 1:
            assert isinstance(item, int)
            count = float(item)
        elif number == 5 and wire_type == 1:
            assert isinstance(item, int)
            total = _double(item)
    return DataPoint(name, PointKind.HISTOGRAM, count, tuple(attributes), histogram_sum=total)


def _metric(value: int | memoryview, budget: _Budget, points: list[DataPoint]) -> None:
    fields = _message(value, "Metric")
    name = ""
    for number, _wire_type, item in fields:
        if number == 1:
            name = _text(item, "metric name")
    for number, _wire_type, item in fields:
        if number in (5, 7):  # gauge, sum
            kind = PointKind.GAUGE if number == 5 else PointKind.SUM
            inner = _message(item, kind.value)
            monotonic = any(n == 3 and w == 0 and bool(v) for n, w, v in inner)
            for inner_number, _w, point in inner:
                if inner_number == 1:
                    budget.take()
                    points.append(_number_point(name, kind, monotonic, point))
        elif number == 9:
            for inner_number, _w, point in _message(item, "histogram"):
                if inner_number == 1:
                    budget.take()
                    points.append(_histogram_point(name, point))
    if not name and fields:
        raise OtlpError("a metric without a name")


def decode_metrics_data(data: bytes | bytearray | memoryview) -> MetricsData:
    """Decode a MetricsData message (already decompressed). Raises OtlpError only."""
    view = memoryview(data).cast("B") if not isinstance(data, memoryview) else data.cast("B")
    budget = _Budget()
    resource_attributes: list[tuple[str, str]] = []
    points: list[DataPoint] = []
    for number, _wire_type, resource_metrics in _fields(view, 0, len(view)):
        if number != 1:
            continue
        for inner_number, _w, item in _message(resource_metrics, "ResourceMetrics"):
            if inner_number == 1:
                for attr_number, _aw, attribute in _message(item, "Resource"):
                    if attr_number == 1:
                        _attributes(resource_attributes, attribute)
            elif inner_number == 2:
                for scope_number, _sw, metric in _message(item, "ScopeMetrics"):
                    if scope_number == 2:
                        _metric(metric, budget, points)
    return MetricsData(tuple(resource_attributes), tuple(points))
