"""The guard in front of kio's native reader.

The crash inputs below were found by fuzzing kio 0.6.5 directly (each in its own process):
every one made the reader abort the process with "memory allocation of N bytes failed",
because it reserves 8 bytes per declared array element before reading any.
"""

from __future__ import annotations

import dataclasses
import random
import struct
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.index import api_key_map, schema_name_map

from tidelog.errors import ProtocolDecodeError
from tidelog.protocol.codec import decode_request
from tidelog.protocol.guard import (
    MalformedRequestError,
    UnguardedFieldError,
    check_request,
    request_plan,
)

from .samples import encode_body, fill, request_frame

ALL_KIO = {
    api_key: (min(schema_name_map[name]), max(schema_name_map[name]))
    for api_key, name in api_key_map.items()
}

# (api_key, api_version, body) -> bytes kio 0.6.5 tried to allocate before aborting.
KIO_ABORTS = [
    (3, 9, "ffffffff0f", 34_359_738_352),  # Metadata v9: compact topics count 2**32 - 2
    (3, 12, "8080808010", 34_359_738_360),  # Metadata v12: compact count 2**32
    (3, 9, "ffffffff7f", 274_877_906_928),  # largest uvarint kio accepts: 2**35 - 1
    (27, 1, "d3d3eefc61", 210_400_792_208),  # WriteTxnMarkers v1, 5-byte body
    (10, 5, "c4feb6bca357c154", 187_426_200_552),  # FindCoordinator v5
    (41, 3, "fea0b899317b", 105_653_502_952),  # DescribeDelegationToken v3
    (
        2,
        7,
        "49fd8e0512d1b6829744d32739343c49c71015dde2387611057dc121c15adfdf",
        146_415_082_112,
    ),  # ListOffsets v7: topics count from bytes 5..9
]
# Legacy int32 counts top out at 16 GiB of reservation: survivable with overcommit on this
# 23 GiB machine, an abort on a smaller one. Same guard rule.
LEGACY_HUGE = [(3, 0, "7fffffff"), (0, 3, "ffff0001000003e8" + "7fffffff")]


def _frame(api_key: int, api_version: int, body_hex: str) -> bytes:
    flexible = load_request_schema(api_key, api_version).__flexible__
    header = struct.pack(">hhih", api_key, api_version, 1, -1) + (b"\0" if flexible else b"")
    return header + bytes.fromhex(body_hex)


def test_every_kio_request_schema_compiles() -> None:
    compiled = 0
    for api_key, name in api_key_map.items():
        for version in schema_name_map[name]:
            plan = request_plan(load_request_schema(api_key, version))
            assert plan.min_size >= 0
            compiled += 1
    assert compiled > 250


@pytest.mark.parametrize(("api_key", "api_version", "body", "allocation"), KIO_ABORTS)
def test_kio_abort_inputs_are_refused(
    api_key: int, api_version: int, body: str, allocation: int
) -> None:
    assert allocation > 2**34  # the reason: no machine here can reserve that much
    frame = _frame(api_key, api_version, body)
    with pytest.raises(MalformedRequestError, match="cannot fit"):
        decode_request(frame, ALL_KIO)


@pytest.mark.parametrize(("api_key", "api_version", "body"), LEGACY_HUGE)
def test_huge_legacy_counts_are_refused(api_key: int, api_version: int, body: str) -> None:
    with pytest.raises(MalformedRequestError, match="cannot fit"):
        decode_request(_frame(api_key, api_version, body), ALL_KIO)


def test_count_times_smallest_item_must_fit() -> None:
    # Metadata v0: 3 topics need at least 3 * 2 bytes (empty names); 5 bytes are there.
    schema = load_request_schema(3, 0)
    body = struct.pack(">i", 3) + b"\x00\x00\x00\x00\x00"
    with pytest.raises(MalformedRequestError, match="cannot fit"):
        check_request(schema, body, 0)
    good = struct.pack(">i", 3) + b"\x00\x00" * 3
    check_request(schema, good, 0)


def test_nulls_only_where_the_schema_allows() -> None:
    produce_v3 = load_request_schema(0, 3)
    # transactional_id is nullable (-1 ok); topic_data is not.
    with pytest.raises(MalformedRequestError, match="null"):
        check_request(produce_v3, struct.pack(">hhii", -1, 1, 1000, -1), 0)
    check_request(produce_v3, struct.pack(">hhii", -1, 1, 1000, 0), 0)
    with pytest.raises(MalformedRequestError, match="negative"):
        check_request(produce_v3, struct.pack(">hhii", -2, 1, 1000, 0), 0)
    # ApiVersions v3: compact non-nullable strings may not be null (length byte 0).
    api_versions_v3 = load_request_schema(18, 3)
    with pytest.raises(MalformedRequestError, match="null"):
        check_request(api_versions_v3, b"\x00\x01\x00", 0)
    check_request(api_versions_v3, b"\x01\x01\x00", 0)
    # Metadata v1: topics is nullable (all topics).
    check_request(load_request_schema(3, 1), struct.pack(">i", -1), 0)


def _fetch_v12_with_cluster_id() -> tuple[Any, bytes]:
    schema = load_request_schema(1, 12)
    entity = dataclasses.replace(fill(schema, random.Random(3)), cluster_id="abc")
    return entity, request_frame(1, 12, entity)


def test_tagged_field_is_checked_inside_its_size() -> None:
    entity, frame = _fetch_v12_with_cluster_id()
    assert frame.endswith(b"\x01\x00\x04\x04abc")  # 1 tag: tag 0, 4 bytes, "abc"
    assert decode_request(frame).body == entity
    # The string claims 4 bytes ("abc" + 1 more) but the tag only holds 4 in all.
    wrong = frame[:-5] + b"\x04\x05abc"
    with pytest.raises(MalformedRequestError):
        decode_request(wrong)
    # A tag whose declared size overruns the frame.
    with pytest.raises(MalformedRequestError):
        decode_request(frame[:-5] + b"\x09\x04abc")
    # An unknown tag is skipped by the guard; kio refuses it, still as a typed error.
    unknown = frame[:-7] + b"\x02\x00\x04\x04abc\x07\x01z"
    check_request(type(entity), unknown, len(frame) - len(encode_body(entity)))
    with pytest.raises(ProtocolDecodeError):
        decode_request(unknown)


def test_nullable_struct_marker() -> None:
    schema = load_request_schema(75, 0)  # DescribeTopicPartitions: nullable cursor
    prefix = b"\x01" + struct.pack(">i", 5)  # no topics, response_partition_limit
    cursor = b"\x03ab" + struct.pack(">i", 3) + b"\x00"
    check_request(schema, prefix + b"\xff" + b"\x00", 0)
    check_request(schema, prefix + b"\x01" + cursor + b"\x00", 0)
    with pytest.raises(MalformedRequestError, match="marker"):
        check_request(schema, prefix + b"\x00" + cursor + b"\x00", 0)


def test_records_stay_opaque() -> None:
    # A 1 MiB records field of garbage passes: the guard checks only its length.
    schema = load_request_schema(0, 9)
    topic = sys_module(schema).TopicProduceData
    partition = sys_module(schema).PartitionProduceData
    entity = fill(schema, random.Random(0))
    entity = dataclasses.replace(
        entity,
        topic_data=(
            topic(
                name="t",
                partition_data=tuple(
                    partition(index=index, records=b"\xee" * (1 << 20)) for index in range(2)
                ),
            ),
        ),
    )
    frame = request_frame(0, 9, entity)
    assert decode_request(frame).body == entity
    operations = request_plan(partition).operations
    assert len(operations) == 2  # index (fixed 4 bytes) and records (one length)


def sys_module(schema: Any) -> Any:
    import sys

    return sys.modules[schema.__module__]


def test_unknown_field_type_fails_at_compile_time() -> None:
    strange: Any = dataclasses.make_dataclass(
        "Strange", [("value", int, dataclasses.field(metadata={"kafka_type": "varint96"}))]
    )
    strange.__flexible__ = False

    with pytest.raises(UnguardedFieldError, match="varint96"):
        request_plan(strange)


def test_trailing_and_overlong_varints() -> None:
    schema = load_request_schema(18, 3)
    assert check_request(schema, b"\x01\x01\x00\x00", 0) == 3  # trailing byte allowed
    with pytest.raises(MalformedRequestError, match="longer than 5"):
        check_request(schema, b"\xff\xff\xff\xff\xff\x01", 0)
