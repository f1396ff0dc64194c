"""The controller's reassignment decisions and the znode payloads they write (pure)."""

from __future__ import annotations

import json

import pytest

from tidelog.cluster import reassignment
from tidelog.cluster.zk_layout import (
    PartitionState,
    TopicAssignment,
    ZkLayoutError,
    decode_reassignment,
    encode_reassignment,
)
from tidelog.cluster.zk_store import ZkStore
from tidelog.types import TopicPartition

from .conftest import ZkFactory
from .helpers import controller_of, settle, start_member

BASE = TopicAssignment("t", "AAAAAAAAAAAAAAAAAAAAAA", {0: (1, 2, 3), 1: (2, 3, 4)})


def test_start_lists_target_then_origin_with_adding_and_removing() -> None:
    moving = reassignment.start(BASE, 0, (2, 3, 4))
    assert moving.partitions[0] == (2, 3, 4, 1)
    assert moving.adding_replicas == {0: (4,)} and moving.removing_replicas == {0: (1,)}
    # Kafka's originReplicas = replicas -- adding: the origin set, in the full list's order.
    assert moving.target_replicas(0) == (2, 3, 4) and moving.origin_replicas(0) == (2, 3, 1)
    assert moving.is_reassigning(0) and not moving.is_reassigning(1)
    assert moving.partitions[1] == (2, 3, 4)  # other partitions untouched
    # Kafka's layout, read back the same.
    payload = json.loads(moving.encode())
    assert payload["adding_replicas"] == {"0": [4]}
    assert payload["removing_replicas"] == {"0": [1]}
    assert TopicAssignment.decode("t", moving.encode()) == moving


def test_a_new_target_keeps_the_origin_and_cancelling_goes_back_to_it() -> None:
    moving = reassignment.start(BASE, 0, (2, 3, 4))
    again = reassignment.start(moving, 0, (3, 4, 5))
    assert again.partitions[0] == (3, 4, 5, 2, 1)
    assert again.adding_replicas[0] == (4, 5) and again.removing_replicas[0] == (2, 1)
    cancelled = reassignment.start(again, 0, again.origin_replicas(0))
    assert cancelled.partitions[0] == (3, 2, 1) and not cancelled.is_reassigning(0)


def test_finish_narrows_to_the_target() -> None:
    done = reassignment.finish(reassignment.start(BASE, 0, (2, 3, 4)), 0)
    assert done.partitions[0] == (2, 3, 4)
    assert not done.adding_replicas and not done.removing_replicas
    assert json.loads(done.encode())["adding_replicas"] == {}


def test_completion_waits_for_the_target_in_the_isr_and_moves_leadership() -> None:
    state = PartitionState(leader=1, leader_epoch=4, isr=(1, 2, 3), controller_epoch=1)
    live = {1, 2, 3, 4}
    assert reassignment.completed_state(state, (2, 3, 4), live, controller_epoch=2) is None
    synced = PartitionState(1, 4, (1, 2, 3, 4), 1)
    done = reassignment.completed_state(synced, (2, 3, 4), live, controller_epoch=2)
    assert done == PartitionState(leader=2, leader_epoch=5, isr=(2, 3, 4), controller_epoch=2)
    # A leader that stays a replica keeps leading (its epoch is bumped, as Kafka does).
    kept = reassignment.completed_state(PartitionState(3, 4, (1, 2, 3, 4), 1), (2, 3, 4),
                                        live, controller_epoch=2)
    assert kept is not None and (kept.leader, kept.leader_epoch) == (3, 5)
    # A dead leader: the first live target replica in the ISR.
    dead = reassignment.completed_state(synced, (2, 3, 4), {3, 4}, controller_epoch=2)
    assert dead is not None and dead.leader == 3


def test_reassignment_request_payload_round_trips_and_rejects_garbage() -> None:
    targets = {TopicPartition("t", 0): (2, 3, 4), TopicPartition("u", 5): (1,)}
    data = encode_reassignment(targets)
    assert json.loads(data) == {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [2, 3, 4]},
        {"topic": "u", "partition": 5, "replicas": [1]}]}
    assert decode_reassignment(data) == targets
    for bad in (b"{", b'{"version":2,"partitions":[]}', b'{"version":1}',
                b'{"version":1,"partitions":[{"topic":"t","partition":-1,"replicas":[1]}]}',
                b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}',
                b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[]}]}',
                b'{"version":1,"partitions":[7]}'):
        with pytest.raises(ZkLayoutError):
            decode_reassignment(bad)


def test_topic_znode_with_moving_replicas_outside_the_list_is_refused() -> None:
    data = json.dumps({"version": 3, "partitions": {"0": [1, 2]}, "topic_id": "x",
                       "adding_replicas": {"0": [9]}, "removing_replicas": {}}).encode()
    with pytest.raises(ZkLayoutError):
        TopicAssignment.decode("t", data)


def test_a_move_survives_controller_failover(zk_factory: ZkFactory) -> None:
    """Started by one controller, completed by the next from ZooKeeper alone: the topic znode's
    adding/removing replicas are all the state a reassignment has."""
    members = [start_member(zk_factory(), b) for b in (1, 2, 3, 4)]
    settle(members, lambda: sum(m.is_controller for m in members) == 1)
    first = controller_of(members)
    origin = first.create_topic("moving", 1, 3).partitions[0]
    target = tuple(b for b in (1, 2, 3, 4) if b != first.broker_id)
    observer = ZkStore(zk_factory())
    tp = TopicPartition("moving", 0)

    def assignment() -> TopicAssignment:
        current = observer.topic_assignment("moving")
        assert current is not None
        return current

    assert observer.request_reassignment({tp: target})
    settle(members, lambda: assignment().target_replicas(0) == target)
    assert assignment().adding_replicas.get(0, ()) == tuple(b for b in target if b not in origin)
    assert observer.reassignment_request() is None  # taken by the controller

    first.store.client.stop()
    survivors = [m for m in members if m is not first]

    def led_by_a_survivor() -> bool:
        state = observer.partition_state(tp)
        return (sum(m.is_controller for m in survivors) == 1 and state is not None
                and state.state.leader not in (first.broker_id, -1))

    settle(survivors, led_by_a_survivor)
    assert assignment().is_reassigning(0)  # still waiting for the new replica
    # The leader lets the new replica into the ISR (its own conditional write + notification).
    current = observer.partition_state(tp)
    assert current is not None
    expanded = PartitionState(current.state.leader, current.state.leader_epoch,
                              (*current.state.isr, *[b for b in target
                                                     if b not in current.state.isr]),
                              current.state.controller_epoch)
    assert observer.leader_update_isr(tp, expanded, current.zk_version) is not None
    settle(survivors, lambda: not assignment().is_reassigning(0))
    assert assignment().partitions[0] == target
    final = observer.partition_state(tp)
    assert final is not None
    assert final.state.leader == current.state.leader  # a target replica: it keeps leading
    assert final.state.leader_epoch == current.state.leader_epoch + 1
    assert set(final.state.isr) == set(target)
