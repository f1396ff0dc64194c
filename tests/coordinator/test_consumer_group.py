"""KIP-848 consumer groups: epochs, revoke-then-assign, fencing, expiry, replay == live."""

from __future__ import annotations

import uuid
from dataclasses import replace

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tidelog.coordinator.consumer_group import ConsumerGroup, MemberState, from_topic_partitions
from tidelog.coordinator.messages import (
    SESSION_TIMER,
    CommitPartition,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    GroupConfig,
    OffsetCommitRequest,
    Result,
)
from tidelog.coordinator.records import TopicPartitions
from tidelog.errors import ErrorCode

from .harness import TOPIC_ID, Harness, persisted_view

CONFIG = GroupConfig(consumer_session_timeout_ms=45_000, consumer_heartbeat_interval_ms=5000)


def beat(
    h: Harness,
    now: int,
    member_id: str,
    epoch: int,
    owned: tuple[TopicPartitions, ...] | None = None,
    topics: tuple[str, ...] | None = None,
    assignor: str | None = None,
) -> ConsumerGroupHeartbeatResponse:
    request = ConsumerGroupHeartbeatRequest(
        "cg",
        member_id,
        epoch,
        rebalance_timeout_ms=60_000,
        subscribed_topic_names=topics if topics is not None else (("t",) if epoch == 0 else None),
        server_assignor=assignor,
        owned=owned,
        client_id="client",
    )
    response: ConsumerGroupHeartbeatResponse = h.run(
        h.shard.consumer_group_heartbeat(request, h.topics, now)
    )
    return response


def partitions(response: ConsumerGroupHeartbeatResponse) -> set[int]:
    assert response.assignment is not None
    return set(from_topic_partitions(response.assignment).get(TOPIC_ID, frozenset()))


def group(h: Harness) -> ConsumerGroup:
    found = h.shard.groups["cg"]
    assert isinstance(found, ConsumerGroup)
    return found


def test_join_revoke_then_assign() -> None:
    h = Harness(CONFIG)
    first = beat(h, 0, "a", 0)
    assert (first.error, first.member_epoch, partitions(first)) == (
        ErrorCode.NONE,
        1,
        set(range(6)),
    )
    assert first.heartbeat_interval_ms == 5000
    second = beat(h, 100, "b", 0)
    assert second.member_epoch == 2 and partitions(second) == set()  # "a" still owns them
    revoke = beat(h, 200, "a", 1)
    assert revoke.member_epoch == 1 and len(partitions(revoke)) == 3  # revoke first, same epoch
    assert group(h).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    kept = revoke.assignment
    assert beat(h, 300, "b", 2).assignment is None  # nothing released yet
    advanced = beat(h, 400, "a", 1, owned=kept)
    assert advanced.member_epoch == 2
    got = beat(h, 500, "b", 2)
    assert partitions(got) == set(range(6)) - partitions(revoke)
    assert h.shard.describe_consumer_group("cg").state == "Stable"
    assert persisted_view(h.reloaded()) == persisted_view(h.shard)


def test_fencing_errors_and_commits() -> None:
    h = Harness(CONFIG)
    beat(h, 0, "a", 0)
    assert beat(h, 1, "a", 7).error is ErrorCode.FENCED_MEMBER_EPOCH
    assert beat(h, 1, "nobody", 3).error is ErrorCode.UNKNOWN_MEMBER_ID
    assert beat(h, 1, "a", 1, assignor="nope").error is ErrorCode.UNSUPPORTED_ASSIGNOR

    def commit(member: str, epoch: int, version: int = 9) -> ErrorCode:
        request = OffsetCommitRequest(
            "cg", (CommitPartition("t", 0, 3),), epoch, member, api_version=version
        )
        return h.run(h.shard.offset_commit(request, 2)).partitions[0][2]  # type: ignore[no-any-return]

    assert commit("a", 1) is ErrorCode.NONE
    # Kafka's ConsumerGroup.validateMemberEpoch: any other epoch, newer or older, is stale.
    assert commit("a", 2) is ErrorCode.STALE_MEMBER_EPOCH
    assert commit("a", 0) is ErrorCode.STALE_MEMBER_EPOCH
    assert commit("x", 1) is ErrorCode.UNKNOWN_MEMBER_ID
    assert commit("a", 1, version=8) is ErrorCode.UNSUPPORTED_VERSION


def test_session_expiry_moves_partitions_and_leave_empties_group() -> None:
    h = Harness(CONFIG)
    beat(h, 0, "a", 0)
    beat(h, 0, "b", 0)
    beat(h, 0, "a", 1, owned=beat(h, 0, "a", 1).assignment)
    beat(h, 0, "b", 2)
    for now in range(5000, 45_000, 5000):
        beat(h, now, "a", 2)
    h.advance(44_999)
    assert set(group(h).members) == {"a", "b"}
    h.advance(45_000)  # "b" went silent
    assert set(group(h).members) == {"a"}
    response = beat(h, 45_001, "a", 2)
    assert response.member_epoch == 3 and partitions(response) == set(range(6))
    left = beat(h, 45_002, "a", -1)
    assert (left.error, left.member_epoch) == (ErrorCode.NONE, -1)
    assert h.shard.describe_consumer_group("cg").state == "Empty"
    assert (SESSION_TIMER, "cg", "a") not in h.timers
    deleted = h.run(h.shard.delete_groups(["cg"]))
    assert deleted == [("cg", ErrorCode.NONE)]
    assert "cg" not in h.shard.groups and "cg" not in h.reloaded().groups


def test_new_partitions_trigger_a_new_target_assignment() -> None:
    h = Harness(CONFIG)
    beat(h, 0, "a", 0)
    h.topics = {"t": (TOPIC_ID, 8)}
    response = beat(h, 10, "a", 1)
    assert response.member_epoch == 2 and partitions(response) == set(range(8))


def test_range_assignor_chosen_by_members() -> None:
    h = Harness(CONFIG)
    beat(h, 0, "a", 0, assignor="range")
    beat(h, 0, "b", 0, assignor="range")
    described = h.shard.describe_consumer_group("cg")
    assert described.assignor_name == "range"
    target = {m.member_id: m.target for m in described.members}
    assert target["a"] == (TopicPartitions(TOPIC_ID, (0, 1, 2)),)


class ConsumerGroupMachine(RuleBasedStateMachine):
    """Random joins, leaves, heartbeats and silences: ownership stays exclusive, replay agrees."""

    def __init__(self) -> None:
        super().__init__()
        self.h = Harness(CONFIG, {"t": (TOPIC_ID, 7), "u": (uuid.UUID(int=7), 3)})
        self.now = 0
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, tuple[TopicPartitions, ...]] = {}
        self.member_ids: dict[str, str] = {}
        self.incarnation = 0

    def _beat(
        self,
        name: str,
        epoch: int,
        topics: tuple[str, ...] | None = None,
        regex: str | None = None,
    ) -> None:
        """Heartbeat as client `name`; "d" is static and rejoins under a fresh member id."""
        self.now += 10
        if epoch == 0:
            self.incarnation += 1
            self.member_ids[name] = f"d{self.incarnation}" if name == "d" else name
        request = ConsumerGroupHeartbeatRequest(
            "cg",
            self.member_ids[name],
            epoch,
            instance_id="static-d" if name == "d" else None,
            subscribed_topic_names=topics,
            subscribed_topic_regex=regex,
            owned=self.owned.get(name),
            rebalance_timeout_ms=60_000,
        )
        response = self.h.run(
            self.h.shard.consumer_group_heartbeat(request, self.h.topics, self.now)
        )
        if response.error is not ErrorCode.NONE or response.member_epoch < 0:
            self.epochs.pop(name, None)
            self.owned.pop(name, None)
            return
        self.epochs[name] = response.member_epoch
        if response.assignment is not None:
            self.owned[name] = response.assignment  # the client revokes/assigns at once

    @rule(
        member=st.sampled_from("abcd"),
        subscription=st.sampled_from(
            [(("t",), None), (("t", "u"), None), (("u",), None), ((), "[tu]"), (("t",), "u")]
        ),
    )
    def join(self, member: str, subscription: tuple[tuple[str, ...], str | None]) -> None:
        if member not in self.epochs:
            self._beat(member, 0, *subscription)

    @precondition(lambda self: bool(self.epochs))
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        member = data.draw(st.sampled_from(sorted(self.epochs)))
        self._beat(member, self.epochs[member])

    @precondition(lambda self: bool(self.epochs))
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        member = data.draw(st.sampled_from(sorted(self.epochs)))
        self._beat(member, data.draw(st.sampled_from([-1, -2])))

    @precondition(lambda self: bool(self.epochs))
    @rule(data=st.data())
    def go_silent(self, data: st.DataObject) -> None:
        silent = data.draw(st.sampled_from(sorted(self.epochs)))
        for member in sorted(self.epochs):
            if member != silent:
                self._beat(member, self.epochs[member])
        self.now += CONFIG.consumer_session_timeout_ms - 5
        for member in sorted(self.epochs):
            if member != silent:
                self._beat(member, self.epochs[member])
        self.now += 20  # past the silent member's session deadline, not the others'
        self.h.advance(self.now)
        found = self.h.shard.groups["cg"]
        assert isinstance(found, ConsumerGroup)
        assert self.member_ids[silent] not in found.members
        self.epochs.pop(silent, None)
        self.owned.pop(silent, None)

    @invariant()
    def no_partition_has_two_owners(self) -> None:
        found = self.h.shard.groups.get("cg")
        if not isinstance(found, ConsumerGroup):
            return
        seen: set[tuple[uuid.UUID, int]] = set()
        for member in found.members.values():
            for topic_id, items in list(member.assigned.items()) + list(
                member.pending_revocation.items()
            ):
                for index in items:
                    assert (topic_id, index) not in seen
                    seen.add((topic_id, index))
        claimed: set[tuple[uuid.UUID, int]] = set()
        for owned in self.owned.values():  # what clients believe they own is exclusive too
            for item in owned:
                for index in item.partitions:
                    assert (item.topic_id, index) not in claimed
                    claimed.add((item.topic_id, index))

    @invariant()
    def replay_equals_live(self) -> None:
        assert persisted_view(self.h.reloaded()) == persisted_view(self.h.shard)

    def teardown(self) -> None:
        for _ in range(4):  # converge: rounds of heartbeats bring everyone to the target
            for member in sorted(self.epochs):
                self._beat(member, self.epochs[member])
        found = self.h.shard.groups.get("cg")
        if (
            isinstance(found, ConsumerGroup)
            and found.members
            and set(found.members) == {self.member_ids[name] for name in self.epochs}
        ):
            for member in found.members.values():
                assert member.state is MemberState.STABLE
                assert member.member_epoch == found.assignment_epoch


TestConsumerGroupMachine = ConsumerGroupMachine.TestCase
TestConsumerGroupMachine.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)


def test_empty_consumer_group_is_deleted_once_its_offsets_expire() -> None:
    h = Harness(GroupConfig(offsets_retention_ms=1000))
    beat(h, 0, "a", 0)
    commit = OffsetCommitRequest("cg", (CommitPartition("t", 0, 1),), 1, "a")
    h.run(h.shard.offset_commit(commit, 10))
    assert h.shard.expire_offsets(5000) == []  # an active member still consumes "t"
    beat(h, 20, "a", -1)
    h.run(Result(records=h.shard.expire_offsets(5000)))
    assert "cg" not in h.shard.groups and not h.shard.offsets.has_offsets("cg")
    assert persisted_view(h.reloaded()) == persisted_view(h.shard)


def test_an_early_session_timer_is_rearmed() -> None:
    h = Harness(CONFIG)
    beat(h, 0, "a", 0)
    key = (SESSION_TIMER, "cg", "a")
    early = h.shard.on_timer(key, h.topics, CONFIG.consumer_session_timeout_ms - 1)
    assert [t.deadline_ms for t in early.timers] == [CONFIG.consumer_session_timeout_ms]
    assert "a" in group(h).members


def _static_beat(
    h: Harness,
    now: int,
    member_id: str,
    epoch: int,
    owned: tuple[TopicPartitions, ...] | None = None,
) -> ConsumerGroupHeartbeatResponse:
    request = ConsumerGroupHeartbeatRequest(
        "cg",
        member_id,
        epoch,
        instance_id="instance-1",
        rebalance_timeout_ms=60_000,
        subscribed_topic_names=("t",) if epoch == 0 else None,
        owned=owned,
    )
    response: ConsumerGroupHeartbeatResponse = h.run(
        h.shard.consumer_group_heartbeat(request, h.topics, now)
    )
    return response


def test_static_member_leaves_with_minus_two_and_comes_back_without_a_rebalance() -> None:
    h = Harness(CONFIG)
    _static_beat(h, 0, "a", 0)
    beat(h, 0, "b", 0)
    revoking = _static_beat(h, 10, "a", 1)
    _static_beat(h, 20, "a", 1, owned=revoking.assignment)
    b_first = beat(h, 30, "b", 2)
    kept = partitions(revoking)
    assert partitions(b_first) == set(range(6)) - kept
    epoch_before = group(h).group_epoch
    away = _static_beat(h, 40, "a", -2)
    assert (away.error, away.member_epoch) == (ErrorCode.NONE, -2)
    assert group(h).members["a"].member_epoch == -2 and group(h).group_epoch == epoch_before
    assert beat(h, 50, "b", 2).assignment is None  # b does not get a's partitions meanwhile
    conflict = ConsumerGroupHeartbeatRequest(
        "cg", "x", 0, instance_id="instance-1", subscribed_topic_names=("t",)
    )
    back = _static_beat(h, 60, "a2", 0)
    assert (back.error, back.member_epoch, partitions(back)) == (ErrorCode.NONE, 2, kept)
    assert "a" not in group(h).members and group(h).group_epoch == epoch_before
    refused = h.run(h.shard.consumer_group_heartbeat(conflict, h.topics, 70))
    assert refused.error is ErrorCode.UNRELEASED_INSTANCE_ID
    assert persisted_view(h.reloaded()) == persisted_view(h.shard)


def test_a_static_member_that_never_returns_is_fenced_at_session_expiry() -> None:
    h = Harness(CONFIG)
    _static_beat(h, 0, "a", 0)
    _static_beat(h, 10, "a", -2)
    h.advance(CONFIG.consumer_session_timeout_ms + 1)
    assert "a" not in group(h).members
    assert partitions(beat(h, 50_000, "b", 0)) == set(range(6))


def test_v1_requires_a_client_chosen_member_id_and_classic_describe_sees_dead() -> None:
    """KIP-1082: from ConsumerGroupHeartbeat v1 the client names itself; an empty member id is
    INVALID_REQUEST and joins nobody. DescribeGroups (classic API) answers a KIP-848 group as
    Kafka 4 does an unknown one: NONE, Dead, no members."""
    h = Harness(CONFIG)
    request = ConsumerGroupHeartbeatRequest(
        "cg", "", 0, new_member_id="generated", rebalance_timeout_ms=60_000,
        subscribed_topic_names=("t",), member_id_required=True,
    )
    refused = h.run(h.shard.consumer_group_heartbeat(request, h.topics, 0))
    assert (refused.error, refused.error_message) == (
        ErrorCode.INVALID_REQUEST, "MemberId can't be empty."
    )
    assert refused.member_id is None and "cg" not in h.shard.groups
    v0 = replace(request, member_id_required=False)  # v0: the coordinator names the member
    joined = h.run(h.shard.consumer_group_heartbeat(v0, h.topics, 0))
    assert (joined.error, joined.member_id) == (ErrorCode.NONE, "generated")
    described = h.shard.describe_group("cg")
    assert (described.error, described.state, described.members) == (ErrorCode.NONE, "Dead", ())
