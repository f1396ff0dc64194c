"""The controller against a real ZooKeeper: registration, election, fencing, failover.

Each simulated broker is a ClusterMember over its own KazooClient (its own ZooKeeper
session), so killing a broker = stopping its client or expiring its session.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tidelog.cluster import zk_layout as layout
from tidelog.cluster.zk_layout import PartitionState, TopicAssignment
from tidelog.cluster.zk_store import ControllerMovedError, ZkStore
from tidelog.cluster.zookeeper_server import ZooKeeperServer
from tidelog.errors import ErrorCode, KafkaError
from tidelog.types import TopicPartition

from .conftest import ZkFactory
from .helpers import controller_of, expire_session, settle, start_member


def _states(store: ZkStore, topic: str, count: int) -> dict[int, PartitionState]:
    result = {}
    for p in range(count):
        versioned = store.partition_state(TopicPartition(topic, p))
        assert versioned is not None
        result[p] = versioned.state
    return result


def test_registration_and_broker_epoch(zk_factory: ZkFactory) -> None:
    client = zk_factory()
    member = start_member(client, 1)
    data, stat = client.get(layout.broker_path(1))
    assert stat.ephemeralOwner == client.client_id[0]
    assert member.broker_epoch == stat.czxid
    registration = layout.BrokerRegistration.decode(1, data)
    assert (registration.host, registration.port) == ("127.0.0.1", 9091)

    other = zk_factory()
    with pytest.raises(KafkaError) as taken:
        start_member(other, 1)
    assert taken.value.code is ErrorCode.DUPLICATE_BROKER_REGISTRATION

    client.stop()  # the broker dies: its ephemeral znode goes with its session
    assert other.exists(layout.broker_path(1)) is None
    again = start_member(other, 1)
    assert again.broker_epoch is not None and member.broker_epoch is not None
    assert again.broker_epoch > member.broker_epoch


def test_one_controller_is_elected_with_epoch_one(zk_factory: ZkFactory) -> None:
    members = [start_member(zk_factory(), b) for b in (1, 2, 3)]
    settle(members, lambda: sum(m.is_controller for m in members) == 1)
    controller = controller_of(members)
    observer = ZkStore(zk_factory())
    assert observer.controller_id() == controller.broker_id
    assert observer.controller_epoch() == (1, 1)
    assert controller.controller_epoch == 1
    assert controller.live_broker_ids() == {1, 2, 3}


def test_controller_death_elects_another_with_next_epoch(zk_factory: ZkFactory) -> None:
    members = [start_member(zk_factory(), b) for b in (1, 2, 3)]
    settle(members, lambda: sum(m.is_controller for m in members) == 1)
    first = controller_of(members)
    first.store.client.stop()
    survivors = [m for m in members if m is not first]
    settle(survivors, lambda: sum(m.is_controller for m in survivors) == 1)
    second = controller_of(survivors)
    assert second.controller_epoch == 2
    observer = ZkStore(zk_factory())
    assert observer.controller_id() == second.broker_id
    assert observer.controller_epoch() == (2, 2)
    assert second.live_broker_ids() == {m.broker_id for m in survivors}


def test_stale_controller_is_fenced(zk_factory: ZkFactory, zookeeper: ZooKeeperServer) -> None:
    members = [start_member(zk_factory(), b) for b in (1, 2, 3)]
    settle(members, lambda: sum(m.is_controller for m in members) == 1)
    stale = controller_of(members)
    stale.create_topic("fenced", 3, 3)
    stale_fence = stale.fence
    assert stale_fence is not None and stale_fence.epoch == 1
    old_broker_epoch = stale.broker_epoch

    # A long pause (GC, SIGSTOP, partition): the session expires while the process lives.
    expire_session(stale.store.client, zookeeper.connect_string)
    others = [m for m in members if m is not stale]
    settle(others, lambda: any(m.is_controller for m in others))
    assert controller_of(others).controller_epoch == 2

    # The stale controller has not noticed yet and writes with its old fence: refused whole.
    observer = ZkStore(zk_factory())
    tp = TopicPartition("fenced", 0)
    before = observer.partition_state(tp)
    assert before is not None
    bogus = PartitionState(stale.broker_id, before.state.leader_epoch + 7, (stale.broker_id,), 1)
    with pytest.raises(ControllerMovedError):
        stale.store.write_partition_state(stale_fence, tp, bogus, before.zk_version)
    with pytest.raises(ControllerMovedError):
        stale.create_topic("never", 1, 1)
    assert observer.partition_state(tp) == before
    assert observer.topic_assignment("never") is None
    assert not stale.is_controller  # resigned on the fenced write

    # Once it handles its events it registers again under a new broker epoch.
    settle(members, lambda: stale.broker_id in controller_of(others).live_broker_ids())
    assert not stale.is_controller
    assert stale.broker_epoch is not None and old_broker_epoch is not None
    assert stale.broker_epoch > old_broker_epoch


def test_topic_creation_spreads_leaders(zk_factory: ZkFactory) -> None:
    members = [start_member(zk_factory(), b) for b in (1, 2, 3)]
    settle(members, lambda: sum(m.is_controller for m in members) == 1)
    controller = controller_of(members)
    assignment = controller.create_topic("spread", 6, 3)
    assert all(sorted(r) == [1, 2, 3] for r in assignment.partitions.values())
    observer = ZkStore(zk_factory())
    assert observer.topic_assignment("spread") == assignment
    states = _states(observer, "spread", 6)
    assert Counter(s.leader for s in states.values()) == {1: 2, 2: 2, 3: 2}
    for p, state in states.items():
        assert state.leader == assignment.partitions[p][0]
        assert state.isr == assignment.partitions[p]
        assert (state.leader_epoch, state.controller_epoch) == (0, 1)
    with pytest.raises(KafkaError) as exists:
        controller.create_topic("spread", 1, 1)
    assert exists.value.code is ErrorCode.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaError) as too_many:
        controller.create_topic("wide", 1, 4)
    assert too_many.value.code is ErrorCode.INVALID_REPLICATION_FACTOR
    not_controller = next(m for m in members if not m.is_controller)
    with pytest.raises(KafkaError) as refused:
        not_controller.create_topic("elsewhere", 1, 1)
    assert refused.value.code is ErrorCode.NOT_CONTROLLER


@pytest.mark.parametrize("victim_is_controller", [False, True])
def test_broker_death_moves_leadership_within_the_isr(
    zk_factory: ZkFactory, victim_is_controller: bool
) -> None:
    members = [start_member(zk_factory(), b) for b in (1, 2, 3)]
    settle(members, lambda: sum(m.is_controller for m in members) == 1)
    controller = controller_of(members)
    assignment = controller.create_topic("failover", 6, 3)
    observer = ZkStore(zk_factory())
    before = _states(observer, "failover", 6)

    victim = controller if victim_is_controller else next(m for m in members if m is not controller)
    dead = victim.broker_id
    victim.store.client.stop()
    survivors = [m for m in members if m is not victim]

    def recovered() -> bool:
        states = _states(observer, "failover", 6)
        return all(dead not in s.isr and s.leader != dead for s in states.values())

    settle(survivors, recovered)
    after = _states(observer, "failover", 6)
    for p, old in before.items():
        new = after[p]
        live_isr_in_order = [b for b in assignment.partitions[p] if b in old.isr and b != dead]
        assert new.leader == (old.leader if old.leader != dead else live_isr_in_order[0])
        assert new.leader in old.isr
        assert new.isr == tuple(b for b in old.isr if b != dead)
        assert new.leader_epoch == old.leader_epoch + 1
        assert new.controller_epoch == (2 if victim_is_controller else 1)


@pytest.mark.parametrize("unclean", [False, True])
def test_out_of_sync_replica_leads_only_with_unclean_election(
    zk_factory: ZkFactory, unclean: bool
) -> None:
    clients = {b: zk_factory() for b in (1, 2, 3)}
    members = {b: start_member(clients[b], b, unclean=unclean) for b in (1, 2, 3)}
    group = list(members.values())
    settle(group, lambda: sum(m.is_controller for m in group) == 1)
    controller = controller_of(group)
    leader_id = next(b for b in (1, 2, 3) if b != controller.broker_id)
    # Replicas: the future leader first, then the other two.
    replicas = (leader_id, *[b for b in (1, 2, 3) if b != leader_id])
    assignment = TopicAssignment("lagging", "AAAAAAAAAAAAAAAAAAAAAA", {0: replicas})
    members[leader_id].store.create_topic_assignment(assignment)  # an admin's CreateTopics
    tp = TopicPartition("lagging", 0)
    settle(group, lambda: controller.cached_state(tp) is not None)
    created = members[leader_id].store.partition_state(tp)
    assert created is not None and created.state.leader == leader_id

    # The followers fell behind: the leader drops them from the ISR itself.
    shrunk = PartitionState(leader_id, created.state.leader_epoch, (leader_id,), 1)
    new_version = members[leader_id].store.leader_update_isr(tp, shrunk, created.zk_version)
    assert new_version == created.zk_version + 1
    settle(group, lambda: (s := controller.cached_state(tp)) is not None and s.state == shrunk)
    assert members[leader_id].store.isr_change_notifications() == []

    clients[leader_id].stop()
    survivors = [m for b, m in members.items() if b != leader_id]
    observer = ZkStore(zk_factory())

    def decided() -> bool:
        current = observer.partition_state(tp)
        return current is not None and current.state.leader_epoch > shrunk.leader_epoch

    settle(survivors, decided)
    state = observer.partition_state(tp)
    assert state is not None
    if unclean:
        assert state.state.leader == replicas[1]  # first live replica in assignment order
        assert state.state.isr == (replicas[1],)
    else:
        assert state.state.leader == layout.NO_LEADER
        assert state.state.isr == (leader_id,)  # kept, so it can lead cleanly on return
        comeback = start_member(zk_factory(), leader_id)
        settle(
            [*survivors, comeback],
            lambda: (observer.partition_state(tp) or state).state.leader == leader_id,
        )
        back = observer.partition_state(tp)
        assert back is not None and back.state.leader_epoch == state.state.leader_epoch + 1


def test_preferred_leader_election_and_topic_deletion(zk_factory: ZkFactory) -> None:
    clients = {b: zk_factory() for b in (1, 2, 3)}
    members = {b: start_member(clients[b], b) for b in (1, 2, 3)}
    group = list(members.values())
    settle(group, lambda: sum(m.is_controller for m in group) == 1)
    controller = controller_of(group)
    victim = next(b for b in (1, 2, 3) if b != controller.broker_id)
    controller.create_topic("pref", 3, 3)
    tp = next(
        TopicPartition("pref", p)
        for p in range(3)
        if (s := controller.cached_state(TopicPartition("pref", p))) and s.state.leader == victim
    )

    clients[victim].stop()
    group = [m for m in group if m.broker_id != victim]
    settle(
        group, lambda: (s := controller.cached_state(tp)) is not None and s.state.leader != victim
    )
    assert controller.elect_preferred_leaders([tp]) == []  # preferred replica is down

    members[victim] = start_member(zk_factory(), victim)
    settle([controller, members[victim]], lambda: victim in controller.live_broker_ids())
    moved = controller.cached_state(tp)
    assert moved is not None
    # The returning follower caught up and its leader added it back to the ISR.
    leader_store = next(m for m in group if m.broker_id == moved.state.leader).store
    expanded = PartitionState(
        moved.state.leader, moved.state.leader_epoch, (*moved.state.isr, victim), 1
    )
    assert leader_store.leader_update_isr(tp, expanded, moved.zk_version) is not None
    settle(
        [controller],
        lambda: (s := controller.cached_state(tp)) is not None and victim in s.state.isr,
    )

    changes = controller.elect_preferred_leaders([tp])
    assert [c.tp for c in changes] == [tp]
    assert changes[0].state.state.leader == victim
    assert changes[0].state.state.leader_epoch == expanded.leader_epoch + 1

    controller.store.request_topic_deletion("pref")
    observer = ZkStore(zk_factory())
    settle([controller], lambda: observer.topic_assignment("pref") is None)
    assert observer.topics_to_delete() == []
    assert controller.cached_state(tp) is None


def test_controller_adopts_an_election_whose_reply_was_lost(zk_factory: ZkFactory) -> None:
    client = zk_factory()
    store = ZkStore(client)
    store.ensure_paths()
    # The multi-op committed but the broker never saw the answer (connection lost).
    fence = store.register_controller(4, now_ms=1)
    member = start_member(client, 4)
    assert member.fence == fence
    assert member.controller_epoch == 1


def test_malformed_znode_does_not_stop_the_controller(zk_factory: ZkFactory) -> None:
    members = [start_member(zk_factory(), b) for b in (1, 2)]
    settle(members, lambda: sum(m.is_controller for m in members) == 1)
    controller = controller_of(members)
    vandal = zk_factory()
    vandal.create(layout.topic_path("garbage"), b"{not json")
    # An admin assigns another topic afterwards: the controller still gives it states.
    ZkStore(vandal).create_topic_assignment(TopicAssignment("fine", "id", {0: (1, 2)}))
    tp = TopicPartition("fine", 0)
    settle(members, lambda: controller.cached_state(tp) is not None)
    assert controller.is_controller
    state = ZkStore(vandal).partition_state(tp)
    assert state is not None and state.state == PartitionState(1, 0, (1, 2), 1)
