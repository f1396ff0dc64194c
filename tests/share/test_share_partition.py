"""The pure share partition and share-group coordinator, and `__share_group_state` records."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelog.coordinator.share_group import (
    ShareGroupCoordinator,
    ShareHeartbeatRequest,
    simple_assign,
)
from tidelog.coordinator.share_partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    LogBatch,
    RecordState,
    SharePartition,
    ShareSettings,
)
from tidelog.coordinator.share_records import (
    UPDATE_TYPE,
    PersistedStateBatch,
    SharePartitionKey,
    ShareSnapshotValue,
    ShareStateRecord,
    ShareUpdateValue,
    decode_share_record,
)
from tidelog.errors import CorruptRecordError, ErrorCode

SETTINGS = ShareSettings(record_lock_duration_ms=1000, delivery_count_limit=3,
                         max_record_locks=50)
LOG = [LogBatch(0, 9), LogBatch(10, 19), LogBatch(20, 29)]


def ack(first: int, last: int, kind: AcknowledgeType) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, (int(kind),))


def snapshot(partition: SharePartition) -> tuple[object, ...]:
    return (partition.start_offset, partition.end_offset,
            tuple((o, r.state, r.delivery_count, r.member_id, r.deadline_ms)
                  for o, r in sorted(partition.records.items())))


def test_acquire_whole_batches_up_to_max_records() -> None:
    partition = SharePartition(0, SETTINGS)
    ranges, used = partition.acquire("a", LOG, 15, now_ms=0)
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in ranges] == [(0, 19, 1)]
    assert used == [0, 1]  # batch alignment exceeds max_records (15), as in Kafka
    assert partition.end_offset == 20 and partition.acquired_count() == 20
    again, _ = partition.acquire("b", LOG, 100, now_ms=0)  # only what is still available
    assert [(r.first_offset, r.last_offset) for r in again] == [(20, 29)]


def test_accept_advances_the_start_offset_and_release_redelivers() -> None:
    partition = SharePartition(0, SETTINGS)
    partition.acquire("a", LOG[:1], 100, now_ms=0)
    assert partition.acknowledge("a", [ack(0, 4, AcknowledgeType.ACCEPT),
                                       ack(5, 9, AcknowledgeType.RELEASE)], 1) is ErrorCode.NONE
    assert partition.start_offset == 5
    ranges, _ = partition.acquire("b", LOG[:1], 100, now_ms=2)
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in ranges] == [(5, 9, 2)]
    assert partition.counters.redeliveries == 5


def test_reject_and_gap_archive() -> None:
    partition = SharePartition(0, SETTINGS)
    partition.acquire("a", LOG[:1], 100, now_ms=0)
    types = (3, 0, 1, 1, 1, 1, 1, 1, 1, 1)  # one type per offset
    assert partition.acknowledge("a", [AcknowledgementBatch(0, 9, types)], 1) is ErrorCode.NONE
    assert partition.start_offset == 10 and not partition.records
    assert partition.counters.rejected == 1 and partition.counters.archived == 2


def test_lock_expiry_returns_records_and_the_limit_archives_them() -> None:
    partition = SharePartition(0, SETTINGS)
    now = 0
    for delivery in range(1, 4):
        ranges, _ = partition.acquire(f"m{delivery}", LOG[:1], 100, now_ms=now)
        assert ranges[0].delivery_count == delivery
        assert partition.next_deadline_ms() == now + 1000
        now += 1000
        assert partition.expire(now) == 10
    # Third delivery expired at the limit (3): archived, the start offset moved past them.
    assert partition.start_offset == 10 and not partition.records
    assert partition.acquire("m4", LOG[:1], 100, now_ms=now)[0] == []


def test_renew_extends_the_lock() -> None:
    partition = SharePartition(0, SETTINGS)
    partition.acquire("a", LOG[:1], 100, now_ms=0)
    assert partition.acknowledge("a", [ack(0, 9, AcknowledgeType.RENEW)], 900,
                                 renew_allowed=True) is ErrorCode.NONE
    assert partition.expire(1500) == 0 and partition.expire(1900) == 10


def test_max_record_locks_bounds_new_acquisitions() -> None:
    partition = SharePartition(0, ShareSettings(1000, 3, max_record_locks=15))
    ranges, _ = partition.acquire("a", LOG, 100, now_ms=0)
    # A batch starting with room left is acquired whole (as Kafka): 20 in flight, not 30.
    assert [(r.first_offset, r.last_offset) for r in ranges] == [(0, 19)]
    assert not partition.can_acquire(30)
    partition.acknowledge("a", [ack(0, 4, AcknowledgeType.ACCEPT)], 1)
    assert not partition.can_acquire(30)  # 15 in flight: still at the bound
    partition.acknowledge("a", [ack(5, 5, AcknowledgeType.ACCEPT)], 1)
    assert partition.can_acquire(30)


@pytest.mark.parametrize(
    ("batches", "error"),
    [
        ([ack(0, 3, AcknowledgeType.ACCEPT), ack(3, 5, AcknowledgeType.ACCEPT)],
         ErrorCode.INVALID_REQUEST),  # overlapping ranges
        ([ack(5, 3, AcknowledgeType.ACCEPT)], ErrorCode.INVALID_REQUEST),
        ([AcknowledgementBatch(0, 3, (1, 1))], ErrorCode.INVALID_REQUEST),  # 2 types for 4
        ([AcknowledgementBatch(0, 0, (9,))], ErrorCode.INVALID_REQUEST),  # unknown type
        ([ack(0, 0, AcknowledgeType.RENEW)], ErrorCode.INVALID_REQUEST),  # renew not allowed
        ([ack(0, 20, AcknowledgeType.ACCEPT)], ErrorCode.INVALID_REQUEST),  # never acquired
        ([ack(40, 45, AcknowledgeType.ACCEPT)], ErrorCode.INVALID_REQUEST),
        ([ack(10, 12, AcknowledgeType.ACCEPT)], ErrorCode.INVALID_RECORD_STATE),  # b's records
    ],
)
def test_bad_acknowledgements_change_nothing(
    batches: list[AcknowledgementBatch], error: ErrorCode
) -> None:
    partition = SharePartition(0, SETTINGS)
    partition.acquire("a", LOG[:1], 100, now_ms=0)
    partition.acquire("b", LOG[1:2], 100, now_ms=0)
    before = snapshot(partition)
    assert partition.acknowledge("a", batches, 1) is error
    assert snapshot(partition) == before


def test_accepted_twice_is_invalid_record_state_until_the_start_offset_passed() -> None:
    partition = SharePartition(0, SETTINGS)
    partition.acquire("a", LOG[:2], 100, now_ms=0)
    assert partition.acknowledge("a", [ack(5, 6, AcknowledgeType.ACCEPT)], 1) is ErrorCode.NONE
    assert partition.acknowledge("a", [ack(5, 6, AcknowledgeType.ACCEPT)], 1) is (
        ErrorCode.INVALID_RECORD_STATE
    )
    assert partition.acknowledge("a", [ack(0, 4, AcknowledgeType.ACCEPT)], 1) is ErrorCode.NONE
    assert partition.start_offset == 7
    # Below the SPSO: done already, skipped (Kafka answers NONE); the rest applies.
    assert partition.acknowledge("a", [AcknowledgementBatch(5, 8, (1, 1, 1, 2))], 1) is (
        ErrorCode.NONE)
    assert partition.start_offset == 8 and partition.records[8].state is RecordState.AVAILABLE


def test_control_batches_and_log_gaps_are_never_delivered() -> None:
    partition = SharePartition(0, SETTINGS)
    ranges, used = partition.acquire(
        "a", [LogBatch(0, 3), LogBatch(4, 4, is_control=True), LogBatch(8, 9)], 100, now_ms=0)
    assert [(r.first_offset, r.last_offset) for r in ranges] == [(0, 3), (8, 9)]
    assert used == [0, 2]
    assert all(partition.records[o].state is RecordState.ARCHIVED for o in (4, 5, 6, 7))


def test_release_member_and_restore_from_persisted_state() -> None:
    partition = SharePartition(0, SETTINGS)
    partition.acquire("a", LOG, 100, now_ms=0)
    partition.acknowledge("a", [ack(0, 4, AcknowledgeType.ACCEPT),
                                ack(10, 11, AcknowledgeType.REJECT)], 1)
    persisted = partition.state_batches()
    restored = SharePartition(0, SETTINGS)
    restored.restore(partition.start_offset, persisted)
    # Acquired records come back AVAILABLE with their delivery count kept.
    assert restored.start_offset == 5 and restored.end_offset == 30
    assert restored.records[5].state is RecordState.AVAILABLE
    assert restored.records[5].delivery_count == 1
    assert restored.records[10].state is RecordState.ARCHIVED
    assert partition.release_member("a") == 23
    assert partition.acquired_count() == 0


@given(st.lists(st.tuples(st.sampled_from(["acquire", "ack", "expire"]),
                          st.integers(0, 29), st.integers(0, 5), st.integers(0, 4)),
                max_size=40))
def test_random_operations_keep_the_invariants(ops: list[tuple[str, int, int, int]]) -> None:
    partition = SharePartition(0, SETTINGS)
    now = 0
    counts: dict[int, int] = {}
    for op, offset, span, kind in ops:
        now += 300
        if op == "acquire":
            for r in partition.acquire(f"m{kind % 2}", LOG, 10, now_ms=now)[0]:
                for o in range(r.first_offset, r.last_offset + 1):
                    assert r.delivery_count == counts.get(o, 0) + 1  # never goes back
                    counts[o] = r.delivery_count
        elif op == "ack":
            partition.acknowledge(f"m{kind % 2}", [AcknowledgementBatch(
                offset, offset + span, (kind % 4,))], now)
        else:
            partition.expire(now)
        assert set(partition.records) == set(range(partition.start_offset, partition.end_offset))
        assert all(r.delivery_count <= SETTINGS.delivery_count_limit
                   for r in partition.records.values())
        restored = SharePartition(0, SETTINGS)
        restored.restore(partition.start_offset, partition.state_batches())
        # Records at the delivery-count limit come back archived: the start may move on.
        assert restored.start_offset >= partition.start_offset
        for offset, record in restored.records.items():
            assert record.delivery_count == partition.records[offset].delivery_count


def test_share_state_records_round_trip_and_reject_bad_bytes() -> None:
    key = SharePartitionKey("g", uuid.UUID(int=7), 3)
    batches = (PersistedStateBatch(5, 9, 2, 1), PersistedStateBatch(10, 10, 0, 3))
    for record in (
        ShareStateRecord(key, ShareSnapshotValue(1, 0, 0, 5, 10, 11, batches)),
        ShareStateRecord(key, ShareUpdateValue(1, 0, 5, batches), UPDATE_TYPE),
        ShareStateRecord(key, None),
    ):
        value = record.value_bytes()
        assert decode_share_record(record.key_bytes(), value) == record
        if value is not None:
            for cut in range(len(value)):
                with pytest.raises(CorruptRecordError):
                    decode_share_record(record.key_bytes(), value[:cut])
    with pytest.raises(CorruptRecordError):
        decode_share_record(b"\x00\x07" + key_tail(key), None)


def key_tail(key: SharePartitionKey) -> bytes:
    return ShareStateRecord(key, None).key_bytes()[2:]


def heartbeat(coordinator: ShareGroupCoordinator, member: str, epoch: int,
              topics: tuple[str, ...] | None = ("t",), now: int = 0):  # type: ignore[no-untyped-def]
    return coordinator.heartbeat(
        ShareHeartbeatRequest("g", member, epoch, None, topics, "client", "/127.0.0.1"),
        {"t": 2}, now)


def test_share_group_heartbeats_epochs_and_assignment() -> None:
    coordinator = ShareGroupCoordinator(session_timeout_ms=1000)
    first = heartbeat(coordinator, "a", 0).response
    assert first.error is ErrorCode.NONE and first.member_epoch == 1
    assert first.assignment == (("t", (0, 1)),)
    second = heartbeat(coordinator, "b", 0).response
    assert second.member_epoch == 2 and second.assignment == (("t", (1,)),)
    # a catches up at its next heartbeat: new epoch and its share of the partitions.
    caught_up = heartbeat(coordinator, "a", 1, None).response
    assert caught_up.member_epoch == 2 and caught_up.assignment == (("t", (0,)),)
    assert heartbeat(coordinator, "a", 1, None).response.error is ErrorCode.FENCED_MEMBER_EPOCH
    assert heartbeat(coordinator, "zz", 3, None).response.error is ErrorCode.UNKNOWN_MEMBER_ID
    assert heartbeat(coordinator, "", 0).response.error is ErrorCode.INVALID_REQUEST
    assert heartbeat(coordinator, "c", 0, None).response.error is ErrorCode.INVALID_REQUEST
    assert heartbeat(coordinator, "b", -1, None).response.member_epoch == -1
    gone = coordinator.expire(5000, {"t": 2})
    assert [(g, m) for g, m, _ in gone] == [("g", "a")]
    assert coordinator.delete("g")[0] is ErrorCode.NONE
    assert coordinator.delete("g")[0] is ErrorCode.GROUP_ID_NOT_FOUND


def test_replaying_the_records_rebuilds_the_group() -> None:
    live = ShareGroupCoordinator()
    records = []
    for member, epoch in (("a", 0), ("b", 0), ("c", 0), ("a", 1), ("b", -1)):
        records += heartbeat(live, member, epoch, None if epoch else ("t",)).records
    replayed = ShareGroupCoordinator()
    for record in records:
        replayed.replay(record)
    assert replayed.groups == live.groups


@given(st.integers(1, 8), st.integers(1, 8))
def test_simple_assignor_covers_every_partition(members: int, partitions: int) -> None:
    given_to = simple_assign({f"m{i}": ("t",) for i in range(members)}, {"t": partitions})
    owned = [p for assignment in given_to.values() for _, ps in assignment for p in ps]
    assert set(owned) == set(range(partitions))
    if members >= partitions:
        assert all(len(a) == 1 and len(a[0][1]) == 1 for a in given_to.values())
    else:
        assert len(owned) == partitions


def test_dead_letter_records_wait_in_archiving_until_copied() -> None:
    settings = ShareSettings(1000, delivery_count_limit=2, max_record_locks=50,
                             dead_letter=True)
    partition = SharePartition(0, settings)
    partition.acquire("a", LOG[:1], 100, now_ms=0)
    partition.acknowledge("a", [ack(0, 1, AcknowledgeType.REJECT),
                                ack(2, 9, AcknowledgeType.RELEASE)], 1)
    assert partition.dead_letters == {0: "CLIENT_REJECTED", 1: "CLIENT_REJECTED"}
    assert partition.start_offset == 0  # waits for the copies
    partition.acquire("a", LOG[:1], 100, now_ms=2)
    partition.expire(5000)  # second delivery expired at the limit (2)
    assert partition.dead_letters[2] == "MAX_DELIVERY_ATTEMPTS_REACHED"
    assert partition.records[2].state is RecordState.ARCHIVING
    # Persisted ARCHIVING comes back ARCHIVING, to be copied (or found copied) again.
    restored = SharePartition(0, settings)
    restored.restore(0, partition.state_batches())
    assert restored.dead_letters == partition.dead_letters
    partition.dead_lettered(range(10))
    assert partition.start_offset == 10 and not partition.dead_letters
