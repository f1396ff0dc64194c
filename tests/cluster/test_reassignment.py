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
from tidelog.types import TopicPartition

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
