"""__consumer_offsets key/value schemas: Kafka's byte layouts, round trips, and fuzzing."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelog.coordinator.loader import encode_batch, iter_coordinator_records
from tidelog.coordinator.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    TopicMetadata,
    TopicPartitions,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_value,
)
from tidelog.errors import CorruptRecordError

TEXT = st.text(max_size=12)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
UUIDS = st.uuids()
TOPIC_PARTITIONS = st.builds(
    TopicPartitions, UUIDS, st.lists(st.integers(0, 2**31 - 1), max_size=5).map(tuple)
)


def _kafka_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_offset_commit_key_matches_kafka_layout() -> None:
    key = OffsetCommitKey("g", "orders", 7)
    expected = (
        struct.pack(">h", 1) + _kafka_string("g") + _kafka_string("orders") + b"\x00\x00\x00\x07"
    )
    assert encode_key(key) == expected
    assert decode_key(expected) == key


def test_offset_commit_value_v3_and_v1_layouts() -> None:
    value = OffsetCommitValue(offset=42, metadata="m", commit_timestamp=1000, leader_epoch=5)
    v3 = struct.pack(">hqi", 3, 42, 5) + _kafka_string("m") + struct.pack(">q", 1000)
    assert encode_value(value) == v3
    with_expiry = OffsetCommitValue(42, "m", 1000, expire_timestamp=9000)
    v1 = struct.pack(">hq", 1, 42) + _kafka_string("m") + struct.pack(">qq", 1000, 9000)
    assert encode_value(with_expiry) == v1
    assert decode_value(OffsetCommitKey("g", "t", 0), v1) == with_expiry


def test_offset_commit_value_v4_is_flexible() -> None:
    value = OffsetCommitValue(offset=1, metadata="", commit_timestamp=2, leader_epoch=3)
    data = encode_value(value, version=4)
    # version, offset, leader epoch, compact empty string (1), commit timestamp, no tagged fields
    assert data == struct.pack(">hqi", 4, 1, 3) + b"\x01" + struct.pack(">q", 2) + b"\x00"
    assert decode_value(OffsetCommitKey("g", "t", 0), data) == value


def test_group_metadata_value_v0_drops_newer_fields() -> None:
    member = MemberMetadata("m-1", "client", "/127.0.0.1", 300, 10, b"sub", b"asg", "static-1")
    value = GroupMetadataValue("consumer", 3, "range", "m-1", 77, (member,))
    decoded = decode_value(GroupMetadataKey("g"), encode_value(value, version=0))
    assert isinstance(decoded, GroupMetadataValue)
    assert decoded.current_state_timestamp == -1  # v2+ only
    assert decoded.members[0].group_instance_id is None  # v3+ only
    assert decoded.members[0].rebalance_timeout == 0  # v1+ only
    for version in range(5):
        again = decode_value(GroupMetadataKey("g"), encode_value(value, version=version))
        assert isinstance(again, GroupMetadataValue)
        assert again.members[0].assignment == b"asg"
    assert decode_value(GroupMetadataKey("g"), encode_value(value)) == value


RECORDS = st.one_of(
    st.builds(
        CoordinatorRecord,
        st.builds(OffsetCommitKey, TEXT, TEXT, INT32),
        st.one_of(st.none(), st.builds(OffsetCommitValue, INT64, TEXT, INT64, INT32)),
    ),
    st.builds(
        CoordinatorRecord,
        st.builds(GroupMetadataKey, TEXT),
        st.builds(
            GroupMetadataValue,
            TEXT,
            INT32,
            st.none() | TEXT,
            st.none() | TEXT,
            INT64,
            st.lists(
                st.builds(
                    MemberMetadata,
                    TEXT,
                    TEXT,
                    TEXT,
                    INT32,
                    INT32,
                    st.binary(max_size=8),
                    st.binary(max_size=8),
                    st.none() | TEXT,
                ),
                max_size=3,
            ).map(tuple),
        ),
    ),
    st.builds(
        CoordinatorRecord,
        st.builds(ConsumerGroupMetadataKey, TEXT),
        st.builds(ConsumerGroupMetadataValue, INT32),
    ),
    st.builds(
        CoordinatorRecord,
        st.builds(ConsumerGroupPartitionMetadataKey, TEXT),
        st.builds(
            ConsumerGroupPartitionMetadataValue,
            st.lists(st.builds(TopicMetadata, UUIDS, TEXT, INT32), max_size=3).map(tuple),
        ),
    ),
    st.builds(
        CoordinatorRecord,
        st.builds(ConsumerGroupMemberMetadataKey, TEXT, TEXT),
        st.builds(
            ConsumerGroupMemberMetadataValue,
            TEXT,
            TEXT,
            st.lists(TEXT, max_size=3).map(tuple),
            INT32,
            st.none() | TEXT,
            st.none() | TEXT,
            st.none() | TEXT,
            st.none() | TEXT,
        ),
    ),
    st.builds(
        CoordinatorRecord,
        st.builds(ConsumerGroupTargetAssignmentMetadataKey, TEXT),
        st.builds(ConsumerGroupTargetAssignmentMetadataValue, INT32),
    ),
    st.builds(
        CoordinatorRecord,
        st.builds(ConsumerGroupTargetAssignmentMemberKey, TEXT, TEXT),
        st.builds(
            ConsumerGroupTargetAssignmentMemberValue,
            st.lists(TOPIC_PARTITIONS, max_size=3).map(tuple),
        ),
    ),
    st.builds(
        CoordinatorRecord,
        st.builds(ConsumerGroupCurrentMemberAssignmentKey, TEXT, TEXT),
        st.builds(
            ConsumerGroupCurrentMemberAssignmentValue,
            INT32,
            INT32,
            st.integers(0, 2),
            st.lists(TOPIC_PARTITIONS, max_size=3).map(tuple),
            st.lists(TOPIC_PARTITIONS, max_size=3).map(tuple),
        ),
    ),
)


@given(RECORDS)
def test_every_record_round_trips(record: CoordinatorRecord) -> None:
    assert decode_record(record.key_bytes(), record.value_bytes()) == record


@given(RECORDS, st.data())
def test_every_truncation_is_a_typed_error(record: CoordinatorRecord, data: st.DataObject) -> None:
    key = record.key_bytes()
    cut = data.draw(st.integers(0, len(key) - 1))
    with pytest.raises(CorruptRecordError):
        decode_key(key[:cut])
    value = record.value_bytes()
    if value is not None:
        cut = data.draw(st.integers(0, len(value) - 1))
        with pytest.raises(CorruptRecordError):
            decode_value(record.key, value[:cut])


@given(st.binary(max_size=64), st.binary(max_size=64))
def test_random_bytes_raise_only_typed_errors(key: bytes, value: bytes) -> None:
    try:
        decode_record(key, value)
    except CorruptRecordError:
        pass


def test_tombstone_and_unknown_versions() -> None:
    key = ConsumerGroupMetadataKey("g")
    assert decode_record(encode_key(key), None) == CoordinatorRecord(key, None)
    with pytest.raises(CorruptRecordError, match="unknown key version"):
        decode_key(struct.pack(">h", 99))
    with pytest.raises(CorruptRecordError, match="unknown version"):
        decode_value(key, struct.pack(">h", 7))
    with pytest.raises(CorruptRecordError, match="trailing"):
        decode_key(encode_key(key) + b"x")
    uid = uuid.UUID(int=1)
    value = ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(uid, (0, 1)),))
    raw = encode_value(value)
    # version 0, compact array of 1 (2), uuid, compact int32 array of 2 (3), two int32, tags
    assert raw == b"\x00\x00\x02" + uid.bytes + b"\x03" + struct.pack(">ii", 0, 1) + b"\x00\x00"


@given(st.lists(RECORDS, min_size=1, max_size=5), st.lists(RECORDS, min_size=1, max_size=5))
def test_batches_round_trip_through_the_loader(
    first: list[CoordinatorRecord], second: list[CoordinatorRecord]
) -> None:
    data = bytes(encode_batch(first, 1000) + encode_batch(second, 2000))
    assert list(iter_coordinator_records(data)) == first + second
