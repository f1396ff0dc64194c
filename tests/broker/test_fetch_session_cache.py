"""The fetch session cache and request classification (KIP-227), pure: time is passed in."""

from __future__ import annotations

import random
import uuid

from tidelog.broker.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    MAX_EPOCH,
    CachedPartition,
    FetchSessionCache,
    new_context,
    next_epoch,
)
from tidelog.errors import ErrorCode
from tidelog.protocol.wire import FetchPartitionData, FetchTopicData

TOPIC_ID = uuid.UUID(int=7)


def parts(count: int, offset: int = 0) -> list[CachedPartition]:
    return [CachedPartition("t", TOPIC_ID, index, offset, 1 << 20, -1) for index in range(count)]


def cache(slots: int, eviction_ms: int = 1000) -> FetchSessionCache:
    return FetchSessionCache(slots, eviction_ms, random.Random(5))


def test_epochs_follow_kafkas_fetch_metadata() -> None:
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(41) == 42
    assert next_epoch(MAX_EPOCH) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_request_metadata_table() -> None:
    sessions = cache(10)
    assert new_context(sessions, 0, FINAL_EPOCH, False, parts(2), [], 0).kind == "sessionless"
    assert new_context(sessions, 0, INITIAL_EPOCH, False, parts(2), [], 0).kind == "full"
    assert new_context(sessions, 99, 1, False, [], [], 0).error == (
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    )
    session = sessions.maybe_create(0, False, False, parts(2))
    assert session is not None and session.epoch == 1
    assert new_context(sessions, session.session_id, 2, False, [], [], 0).error == (
        ErrorCode.INVALID_FETCH_SESSION_EPOCH
    )
    assert new_context(sessions, session.session_id, 1, True, [], [], 0).error == (
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    )
    context = new_context(sessions, session.session_id, 1, False, parts(3, offset=5), [], 0)
    assert context.kind == "incremental" and session.epoch == 2
    assert [p.fetch_offset for p in session.partitions.values()] == [5, 5, 5]
    # Forgetting every partition ends the session; the answer is sessionless.
    forget = [("t", 0), ("t", 1), ("t", 2)]
    assert new_context(sessions, session.session_id, 2, False, [], forget, 0).kind == (
        "sessionless"
    )
    assert sessions.get(session.session_id) is None
    # A full request closes the session it names.
    other = sessions.maybe_create(0, False, False, parts(1))
    assert other is not None
    assert new_context(sessions, other.session_id, INITIAL_EPOCH, False, [], [], 0).kind == "full"
    assert sessions.get(other.session_id) is None


def test_incremental_answers_only_news_and_rotates_partitions_with_records() -> None:
    sessions = cache(10)
    session = sessions.maybe_create(0, False, False, parts(3))
    assert session is not None

    def answer(hw: list[int], records: set[int], error: int | None = None) -> list[int]:
        data = [
            FetchPartitionData(
                index,
                error if error is not None and index == 2 else 0,
                hw[index],
                hw[index],
                0,
                [object()] if index in records else [],  # type: ignore[list-item]
            )
            for index in range(3)
        ]
        topics = session.respond([FetchTopicData("t", TOPIC_ID, data)], incremental=True)
        return [p.partition_index for topic in topics for p in topic.partitions]

    assert answer([0, 0, 0], set()) == [0, 1, 2]  # first answer: everything is news
    assert answer([0, 0, 0], set()) == []
    assert answer([0, 4, 0], {1}) == [1]
    assert list(session.partitions) == [("t", 0), ("t", 2), ("t", 1)]  # 1 read last next time
    assert answer([0, 4, 0], set(), error=ErrorCode.NOT_LEADER_OR_FOLLOWER) == [2]
    assert answer([0, 4, 0], set()) == [2]  # the error is gone: told again


def test_full_cache_refuses_young_sessions_then_evicts_stale_or_smaller_ones() -> None:
    sessions = cache(1, eviction_ms=1000)
    first = sessions.maybe_create(0, False, False, parts(2))
    assert first is not None
    # Young: nobody evicts it, whatever its size.
    assert sessions.maybe_create(10, False, False, parts(50)) is None
    # Older than the eviction time at its last touch: a bigger newcomer wins, an equal one not.
    sessions.touch(first, 1500)
    assert sessions.maybe_create(1600, False, False, parts(2)) is None
    bigger = sessions.maybe_create(1600, False, False, parts(3))
    assert bigger is not None and sessions.get(first.session_id) is None
    assert sessions.evictions == 1
    # Unused for longer than the eviction time: stale, evicted by anyone.
    small = sessions.maybe_create(1600 + 1001, False, False, parts(1))
    assert small is not None and sessions.get(bigger.session_id) is None
    assert sessions.stats().evictions == 2 and sessions.stats().partitions == 1


def test_followers_are_privileged() -> None:
    sessions = cache(1)
    consumer = sessions.maybe_create(0, False, False, parts(100))
    assert consumer is not None
    follower = sessions.maybe_create(1, True, False, parts(1))  # evicts a young consumer
    assert follower is not None and sessions.get(consumer.session_id) is None
    assert sessions.maybe_create(2, False, False, parts(500)) is None
    assert sessions.maybe_create(3, True, False, parts(1)) is None  # young follower stays


def test_a_session_holds_a_bounded_number_of_partitions() -> None:
    sessions = FetchSessionCache(10, 1000, random.Random(5), max_partitions=3)
    assert sessions.maybe_create(0, False, False, parts(4)) is None
    session = sessions.maybe_create(0, False, False, parts(3))
    assert session is not None
    grown = [CachedPartition("u", TOPIC_ID, 0, 0, 1 << 20, -1)]
    context = new_context(sessions, session.session_id, 1, False, grown, [], 0)
    assert context.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert sessions.get(session.session_id) is None


def test_zero_slots_means_no_sessions() -> None:
    assert cache(0).maybe_create(0, True, False, parts(1)) is None
