"""The OTLP MetricsData decoder (KIP-714 pushes): what it reads, and that any input either
decodes or raises OtlpError (every truncation, random bytes, mutations)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelog.protocol.otlp import (
    MAX_ATTRIBUTES,
    MAX_DATA_POINTS,
    DataPoint,
    OtlpError,
    PointKind,
    decode_metrics_data,
)

from .otlp_encode import (
    field,
    gauge,
    histogram,
    histogram_point,
    key_value,
    metrics_data,
    monotonic_sum,
    number_point,
    varint,
)

SAMPLE = metrics_data(
    gauge("org.apache.kafka.producer.record.queue.time.avg", number_point(0.5, {"node.id": "1"})),
    monotonic_sum("org.apache.kafka.producer.connection.creation.total", number_point(3)),
    histogram("org.apache.kafka.client.request.latency", histogram_point(7, 12.5)),
    resource={"client_rack": "r1"},
)


def test_decodes_gauges_sums_histograms_and_attributes() -> None:
    decoded = decode_metrics_data(SAMPLE)
    assert decoded.resource_attributes == (("client_rack", "r1"),)
    assert decoded.points == (
        DataPoint("org.apache.kafka.producer.record.queue.time.avg", PointKind.GAUGE, 0.5,
                  (("node.id", "1"),)),
        DataPoint("org.apache.kafka.producer.connection.creation.total", PointKind.SUM, 3.0,
                  (), monotonic=True),
        DataPoint("org.apache.kafka.client.request.latency", PointKind.HISTOGRAM, 7.0, (),
                  histogram_sum=12.5),
    )


def test_attribute_value_types() -> None:
    point = b"".join(
        field(7, key_value(k, v))
        for k, v in (("s", "x"), ("b", True), ("i", -5), ("d", 1.5))
    )
    decoded = decode_metrics_data(metrics_data(gauge("m", point)))
    assert decoded.points[0].attributes == (("s", "x"), ("b", "true"), ("i", "-5"), ("d", "1.5"))


def test_empty_payload_has_no_points() -> None:
    assert decode_metrics_data(b"").points == ()


def test_every_truncation_decodes_or_raises_otlp_error() -> None:
    for end in range(len(SAMPLE)):
        try:
            decode_metrics_data(SAMPLE[:end])
        except OtlpError:
            pass


def test_limits() -> None:
    many = metrics_data(gauge("m", *[number_point(1.0)] * (MAX_DATA_POINTS + 1)))
    with pytest.raises(OtlpError, match="data points"):
        decode_metrics_data(many)
    wide = {f"k{i}": "v" for i in range(MAX_ATTRIBUTES + 1)}
    with pytest.raises(OtlpError, match="attributes"):
        decode_metrics_data(metrics_data(gauge("m", number_point(1.0, wide))))
    with pytest.raises(OtlpError, match="longer than 10 bytes"):
        decode_metrics_data(b"\x08" + b"\xff" * 11)
    with pytest.raises(OtlpError, match="length beyond"):
        decode_metrics_data(varint(1 << 3 | 2) + varint(1 << 40))
    with pytest.raises(OtlpError, match="wire type"):
        decode_metrics_data(varint(1 << 3 | 3))
    with pytest.raises(OtlpError, match="not UTF-8"):
        decode_metrics_data(metrics_data(field(1, b"\xff\xfe")))


@given(st.binary(max_size=512))
def test_random_bytes_decode_or_raise_otlp_error(data: bytes) -> None:
    try:
        decode_metrics_data(data)
    except OtlpError:
        pass


@given(st.lists(st.tuples(st.integers(0, len(SAMPLE) - 1), st.integers(0, 255)), max_size=8))
def test_mutations_decode_or_raise_otlp_error(changes: list[tuple[int, int]]) -> None:
    data = bytearray(SAMPLE)
    for position, value in changes:
        data[position] = value
    try:
        decode_metrics_data(bytes(data))
    except OtlpError:
        pass
