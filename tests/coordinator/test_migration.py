"""KIP-848 online migration (pure): classic -> consumer -> classic while members are rolled.

Clients are simulated as confluent-kafka behaves: classic members are cooperative (they report
owned partitions in their subscription, drop revoked ones after SyncGroup and rejoin at once),
consumer members report owned partitions on each heartbeat. After every step no partition is
held by two clients; at rest the log replays to the live state.
"""

from __future__ import annotations

import struct

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tidelog.coordinator.consumer_group import ConsumerGroup, from_topic_partitions
from tidelog.coordinator.consumer_protocol import (
    parse_assignment,
    parse_subscription,
    serialize_assignment,
)
from tidelog.coordinator.group import ClassicGroup, GroupState
from tidelog.coordinator.messages import (
    CommitPartition,
    ConsumerGroupHeartbeatRequest,
    GroupConfig,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeaveMember,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from tidelog.coordinator.records import TopicPartitions
from tidelog.errors import ErrorCode

from .harness import TOPIC_ID, Harness, persisted_view

SESSION_MS = 10_000


def subscription(owned: set[int] | None = None) -> bytes:
    """ConsumerProtocolSubscription v1: topics ["t"], null user data, owned partitions."""
    out = struct.pack(">hi", 1, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1)
    items = sorted(owned or ())
    out += struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", len(items))
    return out + b"".join(struct.pack(">i", p) for p in items)


class Clients:
    """What each client holds, and the protocol steps a real client takes."""

    def __init__(self, h: Harness) -> None:
        self.h = h
        self.now = 0
        self.held: dict[str, set[int]] = {}
        self.generation: dict[str, int] = {}
        self.epoch: dict[str, int] = {}
        self.instances: dict[str, str] = {}  # static members: member -> group.instance.id

    def check(self) -> None:
        seen: dict[int, str] = {}
        for member, partitions in self.held.items():
            for p in partitions:
                assert p not in seen, f"partition {p} held by {seen[p]} and {member}"
                seen[p] = member

    def classic_join(self, member: str) -> None:
        waiter = self.h.waiter()
        group = self.h.shard.groups.get("g")
        known = member if group is not None and member in group.members else ""
        request = JoinGroupRequest(
            "g", known, "consumer",
            (("cooperative-sticky", subscription(self.held.get(member))),),
            SESSION_MS, 30_000, waiter, new_member_id=member, client_id="c",
            group_instance_id=self.instances.get(member),
        )
        response = self.h.run(self.h.shard.join_group(request, self.now, self.h.topics), waiter)
        if response is None:  # a classic group's join phase: completed by the others
            return
        assert response.error is ErrorCode.NONE, response
        self.generation[member] = response.generation_id
        if response.leader == member:  # classic leader: cooperative keeps what members own
            return
        self.classic_sync(member)

    def classic_sync(self, member: str, assignments: tuple[tuple[str, bytes], ...] = ()) -> None:
        waiter = self.h.waiter()
        request = SyncGroupRequest(
            "g", self.generation[member], member, waiter, assignments,
            group_instance_id=self.instances.get(member),
        )
        response = self.h.run(self.h.shard.sync_group(request, self.now), waiter)
        if response is None:
            return
        if response.error is ErrorCode.REBALANCE_IN_PROGRESS:
            self.classic_join(member)
            return
        assert response.error is ErrorCode.NONE, response
        given = set(parse_assignment(response.assignment).get("t", frozenset()))
        revoked = self.held.get(member, set()) - given
        self.held[member] = given
        self.check()
        if revoked:
            self.classic_join(member)  # cooperative: rejoin after revoking

    def classic_heartbeat(self, member: str) -> ErrorCode:
        request = HeartbeatRequest(
            "g", self.generation[member], member, self.instances.get(member)
        )
        error: ErrorCode = self.h.run(self.h.shard.heartbeat(request, self.now))
        if error in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION):
            self.classic_join(member)
        return error

    def consumer_beat(self, member: str, epoch: int | None = None) -> ErrorCode:
        owned = None
        if member in self.held:
            owned = (TopicPartitions(TOPIC_ID, tuple(sorted(self.held[member]))),)
        request = ConsumerGroupHeartbeatRequest(
            "g", member, self.epoch.get(member, 0) if epoch is None else epoch,
            new_member_id=member, rebalance_timeout_ms=30_000,
            subscribed_topic_names=("t",), owned=owned, client_id="c",
            instance_id=self.instances.get(member),
        )
        response = self.h.run(self.h.shard.consumer_group_heartbeat(request, self.h.topics,
                                                                     self.now))
        if response.error is not ErrorCode.NONE:
            return response.error  # type: ignore[no-any-return]
        self.epoch[member] = response.member_epoch
        if response.assignment is not None:
            self.held[member] = set(
                from_topic_partitions(response.assignment).get(TOPIC_ID, frozenset())
            )
            self.check()
        return ErrorCode.NONE

    def settle(self, classic: list[str], consumer: list[str], rounds: int = 12) -> None:
        for _ in range(rounds):
            self.now += 100
            for member in classic:
                self.classic_heartbeat(member)
            for member in consumer:
                self.consumer_beat(member)
            self.check()


def classic_group(h: Harness, clients: Clients) -> None:
    """a and b form a classic group by the classic protocol; the leader a assigns 0-2 / 3-5."""
    everything = serialize_assignment(1, {"t": frozenset(range(6))})
    clients.classic_join("a")  # alone: generation 1 at once, a leads
    clients.classic_sync("a", (("a", everything),))
    assert clients.held == {"a": set(range(6))}
    clients.classic_join("b")  # parked until a rejoins
    assert clients.classic_heartbeat("a") is ErrorCode.REBALANCE_IN_PROGRESS  # a rejoins
    group = h.shard.groups["g"]
    assert isinstance(group, ClassicGroup) and group.state is GroupState.COMPLETING_REBALANCE
    assert group.leader_id == "a"
    clients.generation = {m: group.generation_id for m in ("a", "b")}
    plan = {"a": {0, 1, 2}, "b": {3, 4, 5}}
    assignments = tuple((m, serialize_assignment(1, {"t": frozenset(p)})) for m, p in plan.items())
    clients.held["a"] = plan["a"]  # cooperative: the leader's plan revokes 3-5 from a first
    clients.classic_sync("a", assignments)
    clients.classic_sync("b")
    assert clients.held == plan
    commit = OffsetCommitRequest(
        "g", (CommitPartition("t", 0, 42),), clients.generation["a"], "a", api_version=8
    )
    assert h.run(h.shard.offset_commit(commit, clients.now)).partitions[0][2] is ErrorCode.NONE


def test_roll_classic_to_consumer_and_back() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0))
    clients = Clients(h)
    classic_group(h, clients)

    # Upgrade: a consumer-protocol member joins the non-empty classic group.
    assert clients.consumer_beat("c") is ErrorCode.NONE
    group = h.shard.groups["g"]
    assert isinstance(group, ConsumerGroup)
    assert {m: (v.classic is not None) for m, v in group.members.items()} == {
        "a": True, "b": True, "c": False
    }
    assert clients.held["c"] == set()  # nothing until the classic members give it up
    clients.settle(["a", "b"], ["c"])
    assert sorted(len(p) for p in clients.held.values()) == [2, 2, 2]
    described = h.shard.describe_consumer_group("g")
    assert described.group_type == "consumer"
    assert {m.member_id: m.classic for m in described.members} == {
        "a": True, "b": True, "c": False
    }
    assert h.shard.list_groups()[0].group_type == "consumer"
    assert persisted_view(h.reloaded()) == persisted_view(h.shard)

    # Roll b to the consumer protocol: it leaves by LeaveGroup and comes back as "b2".
    answer = h.run(h.shard.leave_group(LeaveGroupRequest("g", (LeaveMember("b"),)), clients.now,
                                       h.topics))
    assert answer.members[0][1] is ErrorCode.NONE
    del clients.held["b"]
    clients.consumer_beat("b2")
    clients.settle(["a"], ["c", "b2"])
    assert sorted(len(p) for p in clients.held.values()) == [2, 2, 2]
    # A classic member commits with its generation (= member epoch), any version.
    commit = OffsetCommitRequest(
        "g", (CommitPartition("t", 1, 7),), clients.generation["a"], "a", api_version=8
    )
    assert h.run(h.shard.offset_commit(commit, clients.now)).partitions[0][2] is ErrorCode.NONE

    # Downgrade: roll b2 and c back to classic; when the last consumer member leaves, the group
    # becomes classic and rebalances.
    assert clients.consumer_beat("b2", epoch=-1) is ErrorCode.NONE
    del clients.held["b2"]
    clients.classic_join("b")
    clients.settle(["a", "b"], ["c"])
    assert clients.consumer_beat("c", epoch=-1) is ErrorCode.NONE
    del clients.held["c"]
    group = h.shard.groups["g"]
    assert isinstance(group, ClassicGroup) and group.state is GroupState.PREPARING_REBALANCE
    assert set(group.members) == {"a", "b"}
    for member in ("a", "b"):
        assert clients.classic_heartbeat(member) in (
            ErrorCode.ILLEGAL_GENERATION, ErrorCode.REBALANCE_IN_PROGRESS
        )
    assert group.state is GroupState.COMPLETING_REBALANCE
    leader = group.leader_id
    assert leader is not None
    plan = {"a": {0, 1, 2}, "b": {3, 4, 5}}
    assignments = tuple((m, serialize_assignment(1, {"t": frozenset(p)})) for m, p in plan.items())
    clients.generation = {m: group.generation_id for m in ("a", "b")}
    for member in (leader, "b" if leader == "a" else "a"):
        held = clients.held.get(member, set())
        clients.held[member] = held & plan[member]  # a cooperative client keeps only its own
        clients.classic_sync(member, assignments if member == leader else ())
    assert group.state is GroupState.STABLE
    assert persisted_view(h.reloaded()) == persisted_view(h.shard)
    fetched = h.shard.offset_fetch(OffsetFetchRequest("g", (("t", 0), ("t", 1))))
    assert [o.offset for o in fetched.partitions] == [42, 7]  # no committed offset lost


def test_policy_disabled_refuses_the_mixed_join() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0, consumer_migration_policy="disabled"))
    clients = Clients(h)
    classic_group(h, clients)
    assert clients.consumer_beat("c") is ErrorCode.GROUP_ID_NOT_FOUND
    assert isinstance(h.shard.groups["g"], ClassicGroup)


def test_upgrade_only_policy_keeps_a_consumer_group_of_classic_members() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0, consumer_migration_policy="upgrade"))
    clients = Clients(h)
    classic_group(h, clients)
    clients.consumer_beat("c")
    clients.settle(["a", "b"], ["c"])
    assert clients.consumer_beat("c", epoch=-1) is ErrorCode.NONE
    assert isinstance(h.shard.groups["g"], ConsumerGroup)  # no downgrade
    assert persisted_view(h.reloaded()) == persisted_view(h.shard)


def test_consumer_protocol_bytes() -> None:
    parsed = parse_subscription(subscription({4, 5}))
    assert (parsed.version, parsed.topics, parsed.owned) == (1, ("t",), {"t": frozenset({4, 5})})
    data = serialize_assignment(3, {"t": frozenset({2, 0}), "u": frozenset()})
    assert parse_assignment(data) == {"t": frozenset({0, 2})}


class MixedGroupMachine(RuleBasedStateMachine):
    """Random steps of a mixed group (classic a, b; consumer c, d), policy `upgrade` so it
    stays a consumer group: no partition is ever held by two clients; replay equals live."""

    def __init__(self) -> None:
        super().__init__()
        config = GroupConfig(
            initial_rebalance_delay_ms=0,
            consumer_migration_policy="upgrade",
            consumer_session_timeout_ms=SESSION_MS,
        )
        self.h = Harness(config)
        self.clients = Clients(self.h)
        classic_group(self.h, self.clients)
        self.clients.consumer_beat("c")

    def members(self) -> set[str]:
        group = self.h.shard.groups["g"]
        assert isinstance(group, ConsumerGroup)
        return set(group.members)

    @rule(member=st.sampled_from("ab"))
    def classic_step(self, member: str) -> None:
        self.clients.now += 50
        if member in self.members():
            self.clients.classic_heartbeat(member)
        else:
            self.clients.held.pop(member, None)
            self.clients.classic_join(member)

    @rule(member=st.sampled_from("cd"))
    def consumer_step(self, member: str) -> None:
        self.clients.now += 50
        if member not in self.members():
            self.clients.held.pop(member, None)
            self.clients.epoch.pop(member, None)
        self.clients.consumer_beat(member)

    @precondition(lambda self: len(self.members()) >= 2)
    @rule(member=st.sampled_from("abcd"))
    def leave(self, member: str) -> None:
        if member not in self.members():
            return
        if member in "ab":
            request = LeaveGroupRequest("g", (LeaveMember(member),))
            self.h.run(self.h.shard.leave_group(request, self.clients.now, self.h.topics))
        else:
            self.clients.consumer_beat(member, epoch=-1)
            self.clients.epoch.pop(member, None)
        self.clients.held.pop(member, None)

    @precondition(lambda self: len(self.members()) >= 2)
    @rule(member=st.sampled_from("abcd"))
    def go_silent(self, member: str) -> None:
        """Every other member keeps heartbeating; `member` stops and is fenced."""
        if member not in self.members():
            return
        self.clients.held.pop(member, None)  # a client that lost its session stops consuming
        for _ in range(12):
            self.clients.now += 1000
            for other in sorted(self.members() - {member}):
                if other in "ab":
                    self.clients.classic_heartbeat(other)
                else:
                    self.clients.consumer_beat(other)
            self.h.advance(self.clients.now)
        assert member not in self.members()
        self.clients.epoch.pop(member, None)

    @invariant()
    def exclusive_and_replayable(self) -> None:
        self.clients.check()
        assert persisted_view(self.h.reloaded()) == persisted_view(self.h.shard)


MixedGroupMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=25, deadline=None
)
test_mixed_group_machine = MixedGroupMachine.TestCase


def test_a_static_classic_member_rejoining_under_a_new_id_keeps_its_partitions() -> None:
    """Kafka's replaceMember: no rebalance, the new id owns what the old one did."""
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0))
    clients = Clients(h)
    clients.consumer_beat("c")
    waiter = h.waiter()

    def static_join(new_id: str) -> int:
        clients.instances[new_id] = "i1"
        request = JoinGroupRequest(
            "g", "", "consumer", (("cooperative-sticky", subscription(set())),), SESSION_MS,
            30_000, waiter,
            new_member_id=new_id, group_instance_id="i1", client_id="s",
        )
        response = h.run(h.shard.join_group(request, clients.now, h.topics), waiter)
        assert response.error is ErrorCode.NONE and response.member_id == new_id
        clients.generation[new_id] = response.generation_id
        return int(response.generation_id)

    static_join("s1")
    clients.settle(["s1"], ["c"])
    assert sorted(len(p) for p in clients.held.values()) == [3, 3]
    group = h.shard.groups["g"]
    assert isinstance(group, ConsumerGroup)
    epoch, kept = group.group_epoch, clients.held.pop("s1")
    assert static_join("s2") == group.members["s2"].member_epoch  # answered at once
    assert "s1" not in group.members and group.group_epoch == epoch  # no rebalance
    clients.classic_sync("s2")
    assert clients.held["s2"] == kept
    assert persisted_view(h.reloaded()) == persisted_view(h.shard)
    stale = HeartbeatRequest("g", clients.generation["s1"], "s1", "i1")
    assert h.run(h.shard.heartbeat(stale, clients.now)) is ErrorCode.FENCED_INSTANCE_ID


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades() -> None:
    """Kafka's downgrade on static replacement: a static consumer member leaves with epoch -2
    and comes back as a classic member under the same instance id; the group becomes classic
    at once (no rebalance) and the newcomer holds its predecessor's target."""
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0))
    clients = Clients(h)
    classic_group(h, clients)
    clients.instances["c"] = "i9"
    clients.consumer_beat("c")  # upgrade
    clients.settle(["a", "b"], ["c"])
    group = h.shard.groups["g"]
    assert isinstance(group, ConsumerGroup)
    kept = set(clients.held["c"])
    assert clients.consumer_beat("c", epoch=-2) is ErrorCode.NONE  # static leave: keeps them
    clients.held.pop("c")
    clients.instances["c2"] = "i9"
    clients.classic_join("c2")
    converted = h.shard.groups["g"]
    assert isinstance(converted, ClassicGroup) and converted.state is GroupState.STABLE
    assert set(converted.members) == {"a", "b", "c2"}
    assert clients.generation["c2"] == converted.generation_id
    assert clients.held["c2"] == kept
    for member in ("a", "b"):
        assert clients.classic_heartbeat(member) is ErrorCode.NONE  # nobody rebalances
    assert persisted_view(h.reloaded()) == persisted_view(h.shard)


def test_a_static_classic_member_rolled_to_the_consumer_protocol_takes_its_own_place() -> None:
    """The first consumer-protocol member of an upgrade can be a static classic member's new
    incarnation: it replaces the classic member at once (Kafka's replaceMember), no
    UNRELEASED_INSTANCE_ID, and gets its partitions back."""
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0))
    clients = Clients(h)
    clients.instances["a"] = "ia"
    classic_group(h, clients)
    kept = clients.held.pop("a")
    clients.instances["a2"] = "ia"
    assert clients.consumer_beat("a2") is ErrorCode.NONE
    group = h.shard.groups["g"]
    assert isinstance(group, ConsumerGroup) and set(group.members) == {"a2", "b"}
    assert group.members["a2"].classic is None
    clients.settle(["b"], ["a2"])
    assert clients.held["a2"] == kept and clients.held["b"] == {3, 4, 5}
    assert persisted_view(h.reloaded()) == persisted_view(h.shard)


def test_classic_members_that_do_not_rejoin_or_sync_in_time_are_fenced() -> None:
    """Told REBALANCE_IN_PROGRESS, a classic member must rejoin within its rebalance timeout;
    after its JoinGroup it must SyncGroup within it; otherwise it is removed (Kafka's join and
    sync timeouts for classic members of a consumer group)."""
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0, consumer_session_timeout_ms=60_000))
    clients = Clients(h)
    classic_group(h, clients)
    clients.consumer_beat("c")  # upgrade: a and b must rejoin
    request = HeartbeatRequest("g", clients.generation["a"], "a")
    assert h.run(h.shard.heartbeat(request, clients.now)) is ErrorCode.REBALANCE_IN_PROGRESS
    # b rejoins but never syncs; a never rejoins; heartbeats keep both sessions alive.
    waiter = h.waiter()
    join = JoinGroupRequest("g", "b", "consumer",
                            (("cooperative-sticky", subscription({3, 4, 5})),),
                            SESSION_MS, 30_000, waiter, new_member_id="b")
    joined = h.run(h.shard.join_group(join, clients.now, h.topics), waiter)
    assert joined.error is ErrorCode.NONE
    clients.generation["b"] = joined.generation_id
    clients.held.pop("a"), clients.held.pop("b")  # stuck clients: only membership is checked
    for step in range(1, 8):
        clients.now += 5_000
        clients.consumer_beat("c")
        for member in ("a", "b"):
            beat = HeartbeatRequest("g", clients.generation[member], member)
            h.run(h.shard.heartbeat(beat, clients.now))
        h.advance(clients.now)
        group = h.shard.groups["g"]
        assert isinstance(group, ConsumerGroup)
        if step == 5:  # 25 s: sessions kept alive, the 30 s rebalance timeout not reached
            assert set(group.members) == {"a", "b", "c"}
    group = h.shard.groups["g"]
    assert isinstance(group, ConsumerGroup) and set(group.members) == {"c"}
    assert persisted_view(h.reloaded()) == persisted_view(h.shard)


def test_an_upgrade_mid_rebalance_answers_parked_requests_rebalance_in_progress() -> None:
    """A classic group is preparing a rebalance (b's JoinGroup parked, waiting for a) when a
    consumer member arrives: the parked JoinGroup answers REBALANCE_IN_PROGRESS and b rejoins
    into the consumer group."""
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0))
    clients = Clients(h)
    clients.classic_join("a")
    clients.classic_sync("a", (("a", serialize_assignment(1, {"t": frozenset(range(6))})),))
    waiter = h.waiter()
    join = JoinGroupRequest("g", "", "consumer", (("cooperative-sticky", subscription()),),
                            SESSION_MS, 30_000, waiter, new_member_id="b")
    assert h.run(h.shard.join_group(join, 0, h.topics), waiter) is None  # parked
    assert clients.consumer_beat("c") is ErrorCode.NONE
    parked = h.completions.pop(waiter)
    assert (parked.error, parked.member_id) == (ErrorCode.REBALANCE_IN_PROGRESS, "b")
    group = h.shard.groups["g"]
    assert isinstance(group, ConsumerGroup) and set(group.members) == {"a", "b", "c"}
    clients.classic_join("b")
    clients.settle(["a", "b"], ["c"])
    assert sorted(len(p) for p in clients.held.values()) == [2, 2, 2]
    assert persisted_view(h.reloaded()) == persisted_view(h.shard)
