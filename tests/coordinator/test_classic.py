"""Classic group protocol: joins, generations, protocol vote, timeouts, static members, fencing."""

from __future__ import annotations

from tidelog.coordinator.group import TRANSITIONS, GroupState, parse_subscription_topics
from tidelog.coordinator.messages import (
    HEARTBEAT_TIMER,
    CommitPartition,
    GroupConfig,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveMember,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    SyncGroupResponse,
    TimerRequest,
)
from tidelog.errors import ErrorCode

from .harness import Harness, persisted_view

SESSION_MS = 10_000
REBALANCE_MS = 30_000


def subscription(*topics: str) -> bytes:
    body = b"".join(len(t).to_bytes(2, "big") + t.encode() for t in topics)
    return b"\x00\x01" + len(topics).to_bytes(4, "big") + body + b"\xff\xff\xff\xff"


def join(
    h: Harness, now: int, member_id: str = "", new_id: str = "m", **kw: object
) -> JoinGroupResponse | None:
    waiter = h.waiter()
    fields: dict[str, object] = {
        "group_id": "g",
        "member_id": member_id,
        "protocol_type": "consumer",
        "protocols": (("range", subscription("t")), ("roundrobin", subscription("t"))),
        "session_timeout_ms": SESSION_MS,
        "rebalance_timeout_ms": REBALANCE_MS,
        "waiter_id": waiter,
        "new_member_id": new_id,
        "client_id": "c",
        "client_host": "/127.0.0.1",
    }
    fields.update(kw)
    response = h.run(h.shard.join_group(JoinGroupRequest(**fields), now), waiter)  # type: ignore[arg-type]
    if response is None:
        h.parked = getattr(h, "parked", {})
        h.parked[member_id or fields["new_member_id"]] = waiter
    return response


def sync(
    h: Harness,
    now: int,
    member_id: str,
    generation: int,
    assignments: tuple[tuple[str, bytes], ...] = (),
) -> SyncGroupResponse | None:
    waiter = h.waiter()
    request = SyncGroupRequest("g", generation, member_id, waiter, assignments)
    response = h.run(h.shard.sync_group(request, now), waiter)
    if response is None:
        h.parked_sync = getattr(h, "parked_sync", {})
        h.parked_sync[member_id] = waiter
    return response


def heartbeat(h: Harness, now: int, member_id: str, generation: int) -> ErrorCode:
    result: ErrorCode = h.run(h.shard.heartbeat(HeartbeatRequest("g", generation, member_id), now))
    return result


def commit(
    h: Harness, now: int, member_id: str, generation: int, offset: int = 5, version: int = 8
) -> ErrorCode:
    request = OffsetCommitRequest(
        "g", (CommitPartition("t", 0, offset),), generation, member_id, api_version=version
    )
    response = h.run(h.shard.offset_commit(request, now))
    return response.partitions[0][2]  # type: ignore[no-any-return]


def stable_group_of_one(h: Harness) -> None:
    first = join(h, 0, new_id="a", require_known_member_id=True)
    assert first is not None and first.error is ErrorCode.MEMBER_ID_REQUIRED
    response = join(h, 0, member_id="a", require_known_member_id=True)
    assert response is not None and response.error is ErrorCode.NONE
    assert (response.generation_id, response.leader, response.protocol_name) == (1, "a", "range")
    assert [m.member_id for m in response.members] == ["a"]
    assigned = sync(h, 1, "a", 1, (("a", b"all"),))
    assert assigned == SyncGroupResponse(ErrorCode.NONE, b"all", "consumer", "range")


def test_transition_table_allows_only_kafka_moves() -> None:
    assert TRANSITIONS[GroupState.STABLE] == {GroupState.COMPLETING_REBALANCE}
    assert GroupState.STABLE not in TRANSITIONS[GroupState.EMPTY]


def test_member_id_required_then_join_sync_heartbeat() -> None:
    h = Harness()
    assert (
        join(h, 0, new_id="a", require_known_member_id=True).error is ErrorCode.MEMBER_ID_REQUIRED
    )  # type: ignore[union-attr]
    assert join(h, 0, member_id="zzz").error is ErrorCode.UNKNOWN_MEMBER_ID  # type: ignore[union-attr]
    response = join(h, 0, member_id="a")
    assert response is not None and response.generation_id == 1
    assert sync(h, 1, "a", 1, (("a", b"x"),)).assignment == b"x"  # type: ignore[union-attr]
    assert heartbeat(h, 2, "a", 1) is ErrorCode.NONE
    assert heartbeat(h, 2, "a", 0) is ErrorCode.ILLEGAL_GENERATION
    assert heartbeat(h, 2, "b", 1) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.shard.describe_group("g").state == "Stable"


def test_second_member_triggers_rebalance_and_fences_old_generation() -> None:
    h = Harness()
    stable_group_of_one(h)
    assert join(h, 10, new_id="b") is None  # parked until "a" rejoins
    assert heartbeat(h, 11, "a", 1) is ErrorCode.REBALANCE_IN_PROGRESS
    assert commit(h, 11, "a", 1) is ErrorCode.NONE  # commits still allowed while preparing
    response = join(h, 12, member_id="a")
    assert response is not None and response.generation_id == 2 and len(response.members) == 2
    b_response = h.completions.pop(h.parked["b"])
    assert b_response.generation_id == 2 and b_response.members == ()
    assert commit(h, 13, "a", 2) is ErrorCode.REBALANCE_IN_PROGRESS  # no assignment yet
    assert commit(h, 13, "a", 1) is ErrorCode.ILLEGAL_GENERATION
    assert sync(h, 14, "b", 2) is None  # follower waits for the leader
    sync(h, 15, "a", 2, (("a", b"A"), ("b", b"B")))
    assert h.completions.pop(h.parked_sync["b"]).assignment == b"B"
    assert commit(h, 16, "b", 2) is ErrorCode.NONE
    assert commit(h, 16, "x", 2) is ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(h, 16, "", -1) is ErrorCode.UNKNOWN_MEMBER_ID  # admin commit, group active


def test_protocol_vote_picks_what_most_members_prefer() -> None:
    h = Harness()
    rr_first = (("roundrobin", subscription("t")), ("range", subscription("t")))
    join(h, 0, new_id="a", protocols=rr_first)
    h.run(h.shard.sync_group(SyncGroupRequest("g", 1, "a", h.waiter()), 0))
    join(h, 1, new_id="b", protocols=rr_first)
    join(h, 1, new_id="c")
    response = join(h, 2, member_id="a", protocols=rr_first)
    assert response is not None and response.protocol_name == "roundrobin"
    bad = join(h, 3, new_id="d", protocols=(("sticky", b""),))
    assert bad is not None and bad.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_session_timeout_removes_member_then_group_empties() -> None:
    h = Harness()
    stable_group_of_one(h)
    h.advance(1 + SESSION_MS - 1)
    assert h.shard.describe_group("g").state == "Stable"
    h.advance(1 + SESSION_MS)
    group = h.shard.describe_group("g")
    assert group.state == "Empty" and group.members == ()
    assert persisted_view(h.reloaded()) == persisted_view(h.shard)
    assert h.reloaded().groups["g"].generation_id == 2  # type: ignore[union-attr]


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    h = Harness()
    stable_group_of_one(h)
    join(h, 10, new_id="b")
    for now in range(5_000, 30_000, 5_000):
        assert heartbeat(h, now, "a", 1) is ErrorCode.REBALANCE_IN_PROGRESS
    h.advance(10 + REBALANCE_MS)
    b_response = h.completions.pop(h.parked["b"])
    assert b_response.generation_id == 2 and b_response.leader == "b"
    assert "a" not in h.shard.groups["g"].members  # type: ignore[union-attr]


def test_initial_rebalance_delay_waits_for_more_members() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=3000))
    assert join(h, 0, new_id="a") is None
    assert join(h, 1000, new_id="b") is None
    h.advance(2999)
    assert h.parked["a"] not in h.completions
    h.advance(3000)  # "b" arrived during the delay: wait one more delay
    assert h.parked["a"] not in h.completions
    h.advance(6000)
    first, second = h.completions[h.parked["a"]], h.completions[h.parked["b"]]
    assert first.generation_id == second.generation_id == 1
    assert {first.leader, second.leader} == {"a"}


def test_leave_group_batch_and_static_fencing() -> None:
    h = Harness()
    join(h, 0, new_id="a", group_instance_id="i-a")
    sync(h, 0, "a", 1, (("a", b"A"),))
    # The static member restarts with a new id: same protocols -> no rebalance, old id fenced.
    response = join(h, 5, new_id="a2", group_instance_id="i-a")
    assert response is not None and response.error is ErrorCode.NONE and response.generation_id == 1
    assert response.leader == "a2" and response.skip_assignment  # keep the current assignment
    assert heartbeat(h, 6, "a", 1) is ErrorCode.UNKNOWN_MEMBER_ID
    fenced = h.run(h.shard.heartbeat(HeartbeatRequest("g", 1, "a", "i-a"), 6))
    assert fenced is ErrorCode.FENCED_INSTANCE_ID
    assert commit(h, 6, "a2", 1) is ErrorCode.NONE
    assert persisted_view(h.reloaded()) == persisted_view(h.shard)
    leave = LeaveGroupRequest(
        "g", (LeaveMember("a", "i-a"), LeaveMember("ghost"), LeaveMember("", "i-a"))
    )
    response2 = h.run(h.shard.leave_group(leave, 7))
    assert [error for _, error in response2.members] == [
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.NONE,
    ]
    assert h.shard.describe_group("g").state == "Empty"
    assert commit(h, 8, "", -1) is ErrorCode.NONE  # admin commit into an empty group


def test_invalid_session_timeout_and_unknown_group() -> None:
    h = Harness()
    bad = join(h, 0, new_id="a", session_timeout_ms=10)
    assert bad is not None and bad.error is ErrorCode.INVALID_SESSION_TIMEOUT
    assert sync(h, 0, "a", 1) == SyncGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID)
    assert commit(h, 0, "a", 3) is ErrorCode.ILLEGAL_GENERATION
    assert commit(h, 0, "a", 3, version=9) is ErrorCode.GROUP_ID_NOT_FOUND


def test_replay_of_the_log_equals_live_state() -> None:
    h = Harness()
    stable_group_of_one(h)
    join(h, 10, new_id="b")
    join(h, 11, member_id="a")
    sync(h, 12, "a", 2, (("a", b"A"), ("b", b"B")))
    commit(h, 13, "a", 2, offset=10)
    commit(h, 14, "b", 2, offset=11)
    h.run(h.shard.leave_group(LeaveGroupRequest("g", (LeaveMember("b"),)), 15))
    join(h, 16, member_id="a")
    sync(h, 17, "a", 3, (("a", b"AB"),))
    assert persisted_view(h.reloaded()) == persisted_view(h.shard)
    fetched = h.reloaded().offset_fetch(OffsetFetchRequest("g", (("t", 0), ("t", 1))))
    assert [(p.offset, p.error) for p in fetched.partitions] == [
        (11, ErrorCode.NONE),
        (-1, ErrorCode.NONE),
    ]


def test_subscription_parsing() -> None:
    assert parse_subscription_topics(subscription("a", "bb")) == ["a", "bb"]
    assert parse_subscription_topics(b"\x00") is None
    assert parse_subscription_topics(b"\x00\x00\x00\x00\x00\x05\x00\x09ab") is None


def test_a_timer_firing_early_is_rearmed_not_lost() -> None:
    h = Harness()
    stable_group_of_one(h)
    key = (HEARTBEAT_TIMER, "g", "a")
    deadline = h.timers[key]
    early = h.shard.on_timer(key, h.topics, deadline - 1)
    assert early.timers == [TimerRequest(key, deadline)] and not early.records
    assert h.shard.describe_group("g").state == "Stable"
    h.run(h.shard.on_timer(key, h.topics, deadline))
    assert h.shard.describe_group("g").state == "Empty"


def test_heartbeat_with_an_empty_group_id_is_invalid_group_id() -> None:
    """Kafka validates the group id before looking for the member."""
    h = Harness()
    assert h.run(h.shard.heartbeat(HeartbeatRequest("", 1, "m"), 0)) is ErrorCode.INVALID_GROUP_ID
    assert h.run(h.shard.heartbeat(HeartbeatRequest("g", 1, "m"), 0)) is ErrorCode.UNKNOWN_MEMBER_ID
