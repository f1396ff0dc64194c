from __future__ import annotations

import struct
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.schema.metadata.v12.response import MetadataResponse as MetadataResponseV12
from kio.serial import entity_reader

from tidelog.errors import ProtocolDecodeError
from tidelog.protocol.codec import (
    RequestHeader,
    UnsupportedVersionError,
    decode_request,
    encode_response,
    prepare,
)
from tidelog.protocol.versions import SUPPORTED_VERSIONS

from .samples import SUPPORTED_PAIRS, fill, request_frame, sample_frame


@pytest.mark.parametrize(("api_key", "version"), SUPPORTED_PAIRS)
def test_round_trip_every_supported_request(api_key: int, version: int) -> None:
    for seed in range(4):
        entity, frame = sample_frame(api_key, version, seed)
        for buffer in (frame, memoryview(frame)):
            request = decode_request(buffer)
            assert request.body == entity
            assert request.header.api_key == api_key
            assert request.header.api_version == version
            assert request.header.correlation_id == seed
            assert request.header.client_id == "tidelog-test"
            assert request.header.flexible == type(entity).__flexible__
        # Any missing byte, anywhere in the frame, is a typed error.
        for cut in range(len(frame)):
            with pytest.raises(ProtocolDecodeError):
                decode_request(frame[:cut])
        # Trailing bytes are ignored, as Kafka's parser ignores them.
        for trailing in (b"\x00", b"\xff" * 5):
            assert decode_request(frame + trailing).body == entity


def test_librdkafka_all_topics_metadata_with_trailing_bytes() -> None:
    # Captured from confluent-kafka 2.16.1 (librdkafka 2.16.0) list_topics(): 3 bytes follow
    # the MetadataRequest v13 body; Kafka accepts it, so must we.
    frame = bytes.fromhex("0003000d00000003000772646b61666b610000000000010000")
    request = decode_request(frame)
    assert request.body.topics is None
    assert request.header.correlation_id == 3


def test_null_client_id_and_header_tagged_fields() -> None:
    import random

    from kio.index import load_request_schema

    body = fill(load_request_schema(3, 12), random.Random(1))
    frame = request_frame(3, 12, body, client_id=None)
    assert decode_request(frame).header.client_id is None
    # Header v2 with one unknown tagged field (tag 5, 2 bytes) is skipped.
    tagged = frame[:10] + b"\x01\x05\x02ab" + frame[11:]
    assert decode_request(tagged).body == body


def test_negative_client_id_length_is_refused() -> None:
    frame = struct.pack(">hhih", 3, 0, 1, -2) + struct.pack(">i", 0)
    with pytest.raises(ProtocolDecodeError):
        decode_request(frame)


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(18, 5), (18, -1), (3, 14), (0, 2), (1, 3), (999, 0), (-1, 0), (17, 2), (27, 0)],
)
def test_unsupported_versions_are_distinguishable(api_key: int, version: int) -> None:
    # Only the fixed header is needed: the body is never looked at.
    frame = struct.pack(">hhih", api_key, version, 77, -1) + b"\xff\xff"
    with pytest.raises(UnsupportedVersionError) as caught:
        decode_request(frame)
    assert isinstance(caught.value, ProtocolDecodeError)
    assert (caught.value.api_key, caught.value.api_version) == (api_key, version)
    assert caught.value.correlation_id == 77


def test_supported_table_can_be_narrowed_by_the_broker() -> None:
    _, frame = sample_frame(3, 9, 0)
    assert decode_request(frame, {3: (0, 9)}).header.api_version == 9
    with pytest.raises(UnsupportedVersionError):
        decode_request(frame, {3: (0, 8)})
    with pytest.raises(UnsupportedVersionError):
        decode_request(frame, {18: (0, 4)})


def test_short_frames() -> None:
    for length in range(10):
        with pytest.raises(ProtocolDecodeError):
            decode_request(b"\x00" * length if length < 8 else b"\x00\x03" + b"\x00" * length)


def _metadata_response(version: int) -> Any:
    import random

    return fill(load_response_schema(3, version), random.Random(version))


@pytest.mark.parametrize("version", [0, 8, 9, 12, 13])
def test_encode_response_header_version(version: int) -> None:
    body = _metadata_response(version)
    flexible = version >= 9
    header = RequestHeader(3, version, 4242, "client", flexible)
    frame = encode_response(header, body)
    size, correlation_id = struct.unpack_from(">ii", frame)
    assert size == len(frame) - 4
    assert correlation_id == 4242
    position = 8
    if flexible:
        assert frame[8] == 0  # response header v1: empty tagged fields
        position = 9
    decoded, used = entity_reader(type(body))(frame, position)
    assert position + used == len(frame)
    assert decoded == body


def test_response_header_follows_the_body_class() -> None:
    body = _metadata_response(12)
    assert isinstance(body, MetadataResponseV12)
    # Even if the caller's header claims non-flexible, a flexible body gets header v1.
    frame = encode_response(RequestHeader(3, 12, 1, None, False), body)
    assert frame[8] == 0
    decoded, used = entity_reader(MetadataResponseV12)(frame, 9)
    assert (decoded, 9 + used) == (body, len(frame))


def test_every_supported_response_encodes() -> None:
    import random

    for api_key, (low, high) in SUPPORTED_VERSIONS.items():
        for version in range(low, high + 1):
            schema = load_response_schema(api_key, version)
            body = fill(schema, random.Random(version))
            flexible = bool(schema.__flexible__)
            frame = encode_response(RequestHeader(api_key, version, 9, None, flexible), body)
            position = 9 if flexible and api_key != 18 else 8
            decoded, used = entity_reader(schema)(frame, position)
            assert (decoded, position + used) == (body, len(frame))


def test_prepare_compiles_the_whole_table() -> None:
    from tidelog.protocol.codec import request_schema
    from tidelog.protocol.guard import request_plan

    prepare()
    assert request_schema.cache_info().currsize >= len(SUPPORTED_PAIRS)
    assert request_plan.cache_info().currsize >= len(SUPPORTED_PAIRS)
    with pytest.raises(Exception, match="API key"):
        prepare({12345: (0, 0)})
