"""Random classic-group traffic (hypothesis state machine): the table is never violated, the
generation never goes back, and whenever the group is at rest the log replays to live state."""

from __future__ import annotations

from typing import Any

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tidelog.coordinator.group import ClassicGroup, GroupState
from tidelog.coordinator.messages import (
    CommitPartition,
    GroupConfig,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveMember,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from tidelog.errors import ErrorCode

from .harness import Harness, persisted_view

CLIENTS = ["c0", "c1", "c2", "c3"]
STATIC = {"c3": "instance-3"}


class ClassicGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness(GroupConfig(initial_rebalance_delay_ms=500))
        self.now = 0
        self.member_ids: dict[str, str] = {}
        self.generations: dict[str, int] = {}
        self.join_waiters: dict[str, int] = {}
        self.leaders: set[str] = set()
        self.ids = 0
        self.last_generation = 0

    def _settle(self) -> None:
        """Hand parked answers back to the simulated clients."""
        for client, waiter in list(self.join_waiters.items()):
            answer = self.h.completions.pop(waiter, None)
            if answer is not None:
                del self.join_waiters[client]
                self._joined(client, answer)

    def _joined(self, client: str, answer: Any) -> None:
        if not isinstance(answer, JoinGroupResponse):
            return
        if answer.error in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED) and answer.member_id:
            self.member_ids[client] = answer.member_id
        if answer.error is ErrorCode.NONE:
            self.generations[client] = answer.generation_id
            if answer.leader == answer.member_id:
                self.leaders.add(client)
            else:
                self.leaders.discard(client)
            self.sync(client)  # as real clients do, at once
        elif answer.error is ErrorCode.MEMBER_ID_REQUIRED:
            self.join(client)  # rejoin with the id just handed out
        elif answer.error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            self.member_ids.pop(client, None)
            self.generations.pop(client, None)

    @rule(client=st.sampled_from(CLIENTS))
    def join(self, client: str) -> None:
        if client in self.join_waiters:
            return
        self.ids += 1
        waiter = self.h.waiter()
        request = JoinGroupRequest(
            "g",
            self.member_ids.get(client, ""),
            "consumer",
            (("range", b"meta-" + client.encode()),),
            session_timeout_ms=6000,
            rebalance_timeout_ms=3000,
            waiter_id=waiter,
            new_member_id=f"{client}-{self.ids}",
            group_instance_id=STATIC.get(client),
            require_known_member_id=True,
        )
        answer = self.h.run(self.h.shard.join_group(request, self.now))
        if answer is None:
            self.join_waiters[client] = waiter
        else:
            self._joined(client, answer)
        self._settle()

    @rule(client=st.sampled_from(CLIENTS))
    def sync(self, client: str) -> None:
        if client not in self.generations or client not in self.member_ids:
            return
        assignments: tuple[tuple[str, bytes], ...] = ()
        if client in self.leaders:
            assignments = tuple((m, b"part-" + m.encode()) for m in self.member_ids.values())
        request = SyncGroupRequest(
            "g",
            self.generations[client],
            self.member_ids[client],
            self.h.waiter(),
            assignments,
            STATIC.get(client),
        )
        self.h.run(self.h.shard.sync_group(request, self.now))
        self._settle()

    @rule(client=st.sampled_from(CLIENTS), offset=st.integers(0, 100))
    def heartbeat_and_commit(self, client: str, offset: int) -> None:
        if client not in self.member_ids:
            return
        member_id, generation = self.member_ids[client], self.generations.get(client, -1)
        self.h.run(self.h.shard.heartbeat(HeartbeatRequest("g", generation, member_id), self.now))
        commit = OffsetCommitRequest(
            "g", (CommitPartition("t", 0, offset),), generation, member_id, STATIC.get(client)
        )
        self.h.run(self.h.shard.offset_commit(commit, self.now))
        self._settle()

    @rule(client=st.sampled_from(CLIENTS))
    def leave(self, client: str) -> None:
        if client not in self.member_ids:
            return
        leaving = LeaveMember(self.member_ids.pop(client), STATIC.get(client))
        self.generations.pop(client, None)
        self.h.run(self.h.shard.leave_group(LeaveGroupRequest("g", (leaving,)), self.now))
        self._settle()

    @rule(step=st.sampled_from([100, 600, 3500, 7000]))
    def advance(self, step: int) -> None:
        self.now += step
        self.h.advance(self.now)
        self._settle()

    @invariant()
    def generation_only_grows(self) -> None:
        group = self.h.shard.groups.get("g")
        if isinstance(group, ClassicGroup):
            assert group.generation_id >= self.last_generation
            self.last_generation = group.generation_id

    @invariant()
    def at_rest_the_log_replays_to_live_state(self) -> None:
        group = self.h.shard.groups.get("g")
        at_rest = isinstance(group, ClassicGroup) and group.state in (
            GroupState.EMPTY,
            GroupState.STABLE,
        )
        if at_rest and group is not None and group.generation_id > 0:
            event(f"at rest: {group.state.value} with {min(len(group.members), 2)}+ members")
            assert persisted_view(self.h.reloaded()) == persisted_view(self.h.shard)


TestClassicGroupMachine = ClassicGroupMachine.TestCase
TestClassicGroupMachine.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
