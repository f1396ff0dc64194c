"""KIP-848 details: regex subscriptions, OffsetCommit/OffsetFetch member checks, ListGroups."""

from __future__ import annotations

import uuid

from tidelog.coordinator.consumer_group import ConsumerGroup, from_topic_partitions
from tidelog.coordinator.messages import (
    CommitPartition,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    GroupConfig,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from tidelog.errors import ErrorCode

from .harness import Harness, persisted_view

CONFIG = GroupConfig(consumer_session_timeout_ms=45_000, consumer_heartbeat_interval_ms=5000)
ORDERS_A, ORDERS_B, ORDERS_C, OTHER = (uuid.UUID(int=n) for n in (1, 2, 3, 4))


def regex_beat(
    h: Harness,
    now: int,
    member_id: str,
    epoch: int,
    regex: str | None = None,
    names: tuple[str, ...] | None = None,
) -> ConsumerGroupHeartbeatResponse:
    request = ConsumerGroupHeartbeatRequest(
        "rg",
        member_id,
        epoch,
        rebalance_timeout_ms=60_000,
        subscribed_topic_names=names,
        subscribed_topic_regex=regex,
    )
    response: ConsumerGroupHeartbeatResponse = h.run(
        h.shard.consumer_group_heartbeat(request, h.topics, now)
    )
    return response


def owned(response: ConsumerGroupHeartbeatResponse) -> dict[uuid.UUID, set[int]]:
    assert response.assignment is not None
    return {t: set(p) for t, p in from_topic_partitions(response.assignment).items()}


def test_regex_subscription_picks_up_a_topic_created_later() -> None:
    h = Harness(CONFIG, {"orders-a": (ORDERS_A, 2), "orders-b": (ORDERS_B, 1), "x": (OTHER, 3)})
    first = regex_beat(h, 0, "m", 0, regex="^orders-.*")
    assert first.error is ErrorCode.NONE
    assert owned(first) == {ORDERS_A: {0, 1}, ORDERS_B: {0}}
    found = h.shard.groups["rg"]
    assert isinstance(found, ConsumerGroup)
    assert found.subscribed_topic_names() == {"orders-a", "orders-b"}
    epoch = first.member_epoch
    assert regex_beat(h, 10, "m", epoch).assignment is None  # nothing new

    h.topics = {**h.topics, "orders-c": (ORDERS_C, 2)}  # created after subscribing
    later = regex_beat(h, 20, "m", epoch)
    assert later.member_epoch == epoch + 1
    assert owned(later) == {ORDERS_A: {0, 1}, ORDERS_B: {0}, ORDERS_C: {0, 1}}
    described = h.shard.describe_consumer_group("rg").members[0]
    assert described.subscribed_topic_regex == "^orders-.*"
    assert described.subscribed_topic_names == ()
    # Offsets of a topic the regex covers are protected like named subscriptions.
    commit = OffsetCommitRequest("rg", (CommitPartition("orders-c", 0, 5),), epoch + 1, "m")
    assert h.run(h.shard.offset_commit(commit, 30)).partitions[0][2] is ErrorCode.NONE
    deleted = h.run(h.shard.offset_delete("rg", (("orders-c", 0),)))
    assert deleted.partitions == (("orders-c", 0, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC),)
    assert persisted_view(h.reloaded()) == persisted_view(h.shard)
    assert h.reloaded().groups["rg"].subscribed_topic_names() == {  # type: ignore[union-attr]
        "orders-a",
        "orders-b",
        "orders-c",
    }


def test_regex_is_a_full_match_and_combines_with_names() -> None:
    h = Harness(CONFIG, {"orders-a": (ORDERS_A, 1), "xorders-b": (ORDERS_B, 1), "x": (OTHER, 1)})
    response = regex_beat(h, 0, "m", 0, regex="orders-.", names=("x",))
    assert owned(response) == {ORDERS_A: {0}, OTHER: {0}}  # "xorders-b" is not a full match
    # An empty regex clears it: the group epoch moves and orders-a is revoked.
    cleared = regex_beat(h, 10, "m", response.member_epoch, regex="")
    assert owned(cleared) == {OTHER: {0}}
    found = h.shard.groups["rg"]
    assert isinstance(found, ConsumerGroup) and found.members["m"].subscribed_topic_regex is None
    assert persisted_view(h.reloaded()) == persisted_view(h.shard)


def test_two_members_share_regex_topics() -> None:
    h = Harness(CONFIG, {"orders-a": (ORDERS_A, 4)})
    a = regex_beat(h, 0, "a", 0, regex="orders-.*")
    b = regex_beat(h, 1, "b", 0, names=("orders-a",))
    assert b.error is ErrorCode.NONE
    revoking = regex_beat(h, 2, "a", a.member_epoch)
    assert len(owned(revoking)[ORDERS_A]) == 2  # a gives half to b, revoke first


def test_invalid_regex_and_missing_subscription_are_refused_without_records() -> None:
    h = Harness(CONFIG, {"orders-a": (ORDERS_A, 1)})
    bad = regex_beat(h, 0, "m", 0, regex="orders-(")
    assert bad.error is ErrorCode.INVALID_REGULAR_EXPRESSION
    assert bad.error_message is not None and "orders-(" in bad.error_message
    none = regex_beat(h, 0, "m", 0)
    assert none.error is ErrorCode.INVALID_REQUEST
    assert h.log == [] and "rg" not in h.shard.groups


def test_offset_commit_and_fetch_member_checks_follow_kafka() -> None:
    h = Harness(CONFIG, {"orders-a": (ORDERS_A, 1)})
    joined = regex_beat(h, 0, "m", 0, names=("orders-a",))
    epoch = joined.member_epoch

    def commit(member: str, member_epoch: int) -> ErrorCode:
        request = OffsetCommitRequest(
            "rg", (CommitPartition("orders-a", 0, 1),), member_epoch, member
        )
        return h.run(h.shard.offset_commit(request, 5)).partitions[0][2]  # type: ignore[no-any-return]

    assert commit("m", epoch) is ErrorCode.NONE
    assert commit("m", epoch - 1) is ErrorCode.STALE_MEMBER_EPOCH
    assert commit("m", epoch + 1) is ErrorCode.STALE_MEMBER_EPOCH
    assert commit("gone", epoch) is ErrorCode.UNKNOWN_MEMBER_ID
    assert commit("", -1) is ErrorCode.UNKNOWN_MEMBER_ID  # the group has members

    def fetch(member: str | None, member_epoch: int) -> ErrorCode:
        request = OffsetFetchRequest("rg", None, member, member_epoch)
        return h.shard.offset_fetch(request).error

    assert fetch(None, -1) is ErrorCode.NONE  # admin clients
    assert fetch("m", epoch) is ErrorCode.NONE
    assert fetch("m", epoch - 1) is ErrorCode.STALE_MEMBER_EPOCH
    assert fetch("m", -1) is ErrorCode.STALE_MEMBER_EPOCH
    assert fetch("gone", epoch) is ErrorCode.UNKNOWN_MEMBER_ID


def test_list_groups_filters_by_type_and_state() -> None:
    h = Harness(CONFIG, {"orders-a": (ORDERS_A, 1)})
    regex_beat(h, 0, "m", 0, names=("orders-a",))
    admin = OffsetCommitRequest("classic-g", (CommitPartition("orders-a", 0, 1),))
    h.run(h.shard.offset_commit(admin, 1))
    every = [(g.group_id, g.group_type, g.protocol_type) for g in h.shard.list_groups()]
    assert every == [("classic-g", "classic", ""), ("rg", "consumer", "consumer")]
    assert [g.group_id for g in h.shard.list_groups(types=["Consumer"])] == ["rg"]
    assert [g.group_id for g in h.shard.list_groups(types=["classic"])] == ["classic-g"]
    assert [g.group_id for g in h.shard.list_groups(states=["empty"], types=["classic"])] == [
        "classic-g"
    ]
    assert h.shard.list_groups(states=["stable"], types=["classic"]) == []
