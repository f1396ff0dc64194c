from __future__ import annotations

import struct
from typing import Any

import pytest
from kafka.protocol.broker_version_data import (
    BrokerVersionData,
    infer_broker_version_from_api_versions,
)
from kafka.protocol.metadata.api_versions import ApiVersionsResponse as KafkaPythonResponse
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

from tidelog.errors import ErrorCode
from tidelog.protocol.codec import RequestHeader, encode_response
from tidelog.protocol.versions import (
    API_NAMES,
    SUPPORTED_VERSIONS,
    api_versions_response,
    encode_unsupported_api_versions,
)

# COMPATIBILITY.md: the minimum ranges that cover all four clients.
COMPATIBILITY_MINIMUM = {
    18: (0, 4),
    3: (0, 13),
    0: (3, 10),
    1: (4, 16),
    2: (1, 7),
    10: (0, 6),
    11: (0, 7),
    14: (0, 5),
    12: (0, 4),
    13: (0, 4),
    8: (2, 9),
    9: (1, 9),
    22: (0, 4),
    19: (2, 7),
    20: (1, 6),
}


def test_every_advertised_version_is_readable_and_writable_by_kio() -> None:
    for api_key, (low, high) in SUPPORTED_VERSIONS.items():
        assert low <= high
        assert api_key in API_NAMES
        for version in range(low, high + 1):
            assert load_request_schema(api_key, version) is not None
            assert load_response_schema(api_key, version) is not None


def test_covers_the_ranges_real_clients_need() -> None:
    for api_key, (low, high) in COMPATIBILITY_MINIMUM.items():
        advertised_low, advertised_high = SUPPORTED_VERSIONS[api_key]
        assert advertised_low <= low and high <= advertised_high, API_NAMES[api_key]


KAFKA_4_3_1 = {  # ApiVersions v3 of Apache Kafka 4.3.1 (KRaft broker), as measured
    0: (0, 13), 1: (4, 18), 2: (1, 11), 3: (0, 13), 8: (2, 10), 9: (1, 10), 10: (0, 6),
    11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1),
    18: (0, 4), 19: (2, 7), 20: (1, 6), 21: (0, 2), 22: (0, 5), 23: (2, 4), 24: (0, 5),
    25: (0, 4), 26: (0, 5), 27: (1, 2), 28: (0, 5), 29: (1, 3), 30: (1, 3), 31: (1, 3),
    32: (1, 4), 33: (0, 2), 34: (1, 2), 35: (1, 5), 36: (0, 2), 37: (0, 3), 38: (1, 3),
    39: (1, 2), 40: (1, 2), 41: (1, 3), 42: (0, 2), 43: (0, 2), 44: (0, 1), 45: (0, 1),
    46: (0, 0), 47: (0, 0), 48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0), 55: (0, 2),
    57: (0, 2), 60: (0, 2), 61: (0, 0), 64: (0, 0), 65: (0, 0), 66: (0, 2), 68: (0, 1),
    69: (0, 1), 74: (0, 1), 75: (0, 0), 76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2),
    80: (0, 1), 81: (0, 0), 83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0), 87: (0, 1),
    88: (0, 0), 89: (0, 0), 90: (0, 1), 91: (0, 0), 92: (0, 0),
}


# Kafka advertises the KIP-714 APIs only when a metrics reporter that receives client
# telemetry is configured (a plugin; the measured broker had none). Their ranges then:
KAFKA_4_3_1_WITH_TELEMETRY_RECEIVER = KAFKA_4_3_1 | {71: (0, 0), 72: (0, 0)}


def test_every_range_is_within_kafka_4_3_1s() -> None:
    for api_key, (low, high) in SUPPORTED_VERSIONS.items():
        kafka_low, kafka_high = KAFKA_4_3_1_WITH_TELEMETRY_RECEIVER[api_key]
        # Produce: Kafka 4 still lists v0-2 (KAFKA-18659) it no longer accepts.
        assert kafka_low <= low <= high <= kafka_high, API_NAMES[api_key]


def test_kafka_python_infers_kafka_4() -> None:
    assert infer_broker_version_from_api_versions(dict(SUPPORTED_VERSIONS)) >= (4, 0)
    negotiated = BrokerVersionData(api_versions=dict(SUPPORTED_VERSIONS))
    assert negotiated.broker_version >= (4, 0)


@pytest.mark.parametrize("version", range(5))
def test_api_versions_response_every_version(version: int) -> None:
    body = api_versions_response(version, SUPPORTED_VERSIONS)
    frame = encode_response(RequestHeader(18, version, 42, "c", version >= 3), body)
    (size, correlation_id) = struct.unpack_from(">ii", frame)
    assert size == len(frame) - 4
    assert correlation_id == 42
    # Header v0 even for flexible v3/v4: the body starts right after the correlation id.
    decoded: Any
    decoded, used = entity_reader(load_response_schema(18, version))(frame, 8)
    assert used == len(frame) - 8
    assert decoded == body
    listed = {item.api_key: (item.min_version, item.max_version) for item in decoded.api_keys}
    assert listed == dict(SUPPORTED_VERSIONS)
    # kafka-python's own decoder agrees.
    parsed = KafkaPythonResponse.decode(frame, version=version, header=True, framed=True)
    assert parsed._header.correlation_id == 42
    assert parsed.error_code == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in parsed.api_keys} == listed


def test_api_versions_response_with_error_code() -> None:
    body = api_versions_response(3, {18: (0, 4)}, error_code=ErrorCode.UNSUPPORTED_VERSION)
    assert body.error_code.value == 35


def test_unsupported_api_versions_fallback_field_by_field() -> None:
    supported = {18: (0, 4), 3: (0, 13), 0: (3, 10)}
    frame = encode_unsupported_api_versions(1234567, supported)
    size, correlation_id, error_code, count = struct.unpack_from(">iihi", frame, 0)
    assert size == len(frame) - 4 == 4 + 2 + 4 + 3 * 6
    assert correlation_id == 1234567
    assert error_code == ErrorCode.UNSUPPORTED_VERSION
    assert error_code == 35
    assert count == 3
    entries = [struct.unpack_from(">hhh", frame, 14 + 6 * index) for index in range(count)]
    assert entries == [(0, 3, 10), (3, 0, 13), (18, 0, 4)]
    # It is exactly the v0 response, and clients parse it as such.
    decoded: Any
    decoded, used = entity_reader(load_response_schema(18, 0))(frame, 8)
    assert used == len(frame) - 8
    assert decoded.error_code.value == 35
    parsed = KafkaPythonResponse.decode(frame, version=4, header=True, framed=True)
    assert parsed.error_code == 35
    assert len(parsed.api_keys) == 3


def test_fallback_lists_the_full_table() -> None:
    frame = encode_unsupported_api_versions(-5, SUPPORTED_VERSIONS)
    (count,) = struct.unpack_from(">i", frame, 10)
    assert count == len(SUPPORTED_VERSIONS)
    assert len(frame) == 14 + 6 * count
