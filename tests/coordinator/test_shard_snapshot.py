"""GroupCoordinatorShard.snapshot / restore: the undo the broker uses for operations whose
records never become durable (group_service, group_writes)."""

from __future__ import annotations

import copy

from tidelog.coordinator.coordinator import GroupCoordinatorShard
from tidelog.coordinator.group import GroupState
from tidelog.coordinator.messages import ConsumerGroupHeartbeatRequest
from tidelog.errors import ErrorCode

from .harness import Harness
from .test_classic import commit, join, stable_group_of_one, sync


def _state(shard: GroupCoordinatorShard) -> tuple[object, ...]:
    return (copy.deepcopy(shard.groups), shard.offsets.snapshot(), dict(shard.deadlines))


def test_restore_undoes_a_rebalance_and_a_commit_and_stays_reusable() -> None:
    h = Harness()
    stable_group_of_one(h)
    assert commit(h, 2, "a", 1, offset=5) is ErrorCode.NONE
    before = _state(h.shard)
    undo = h.shard.snapshot(["g"])
    # A second member and a new generation, its sync and a commit, all replayed.
    assert join(h, 3, new_id="b", require_known_member_id=False) is None
    response = join(h, 4, member_id="a")
    assert response is not None and response.generation_id == 2
    sync(h, 5, "a", 2, (("a", b"x"), ("b", b"y")))
    assert commit(h, 6, "a", 2, offset=9) is ErrorCode.NONE
    assert h.shard.offsets.get("g", "t", 0).offset == 9  # type: ignore[union-attr]
    h.shard.restore(undo)
    assert _state(h.shard) == before
    group = h.shard.groups["g"]
    assert group.state is GroupState.STABLE and group.generation_id == 1  # type: ignore[union-attr]
    assert h.shard.offsets.get("g", "t", 0).offset == 5  # type: ignore[union-attr]
    # The snapshot is not shared with the live state: changing it again and restoring again
    # still gives the state before.
    assert commit(h, 7, "a", 1, offset=7) is ErrorCode.NONE
    h.shard.restore(undo)
    assert _state(h.shard) == before


def test_restore_removes_a_group_that_did_not_exist() -> None:
    h = Harness()
    undo = h.shard.snapshot(["g"])
    stable_group_of_one(h)
    assert commit(h, 2, "a", 1) is ErrorCode.NONE
    h.shard.restore(undo)
    assert h.shard.groups == {} and h.shard.offsets.snapshot() == {}


def test_other_groups_are_left_alone() -> None:
    h = Harness()
    stable_group_of_one(h)
    undo = h.shard.snapshot(["other"])
    assert commit(h, 2, "a", 1, offset=8) is ErrorCode.NONE
    h.shard.restore(undo)
    assert h.shard.offsets.get("g", "t", 0).offset == 8  # type: ignore[union-attr]


def test_a_consumer_group_heartbeat_is_undone() -> None:
    h = Harness()
    request = ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m1", member_epoch=0, subscribed_topic_names=("t",),
        rebalance_timeout_ms=30_000)
    h.run(h.shard.consumer_group_heartbeat(request, h.topics, 0))
    before = _state(h.shard)
    undo = h.shard.snapshot(["g"])
    second = ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m2", member_epoch=0, subscribed_topic_names=("t",),
        rebalance_timeout_ms=30_000)
    h.run(h.shard.consumer_group_heartbeat(second, h.topics, 10))
    assert _state(h.shard) != before
    h.shard.restore(undo)
    assert _state(h.shard) == before
