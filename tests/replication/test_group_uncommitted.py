"""A group operation whose records never become durable is reverted, and every request it
would have answered gets an error (group_service: uncommitted state, Kafka's coordinator
runtime).

Real ZooKeeper, three real brokers, raw requests to the coordinator. Both followers of the
group's `__consumer_offsets` partition are SIGSTOPped, so the leader appends but its high
watermark cannot pass the records (acks=all; replica.lag.time.max.ms and the ZooKeeper session
are long enough that the ISR does not shrink meanwhile): the wait times out after
offsets.commit.timeout.ms (5 s) -> COORDINATOR_NOT_AVAILABLE. Then the followers resume and
the same requests succeed.
"""

from __future__ import annotations

import datetime
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as KioErrorCode

from tidelog.cluster.zookeeper_server import ZooKeeperServer
from tidelog.coordinator.coordinator import partition_for

from . import raw_requests
from .harness import Cluster

TOPIC, GROUP, OFFSETS = "orders", "undo", "__consumer_offsets"
FIND_COORDINATOR, JOIN, SYNC, HEARTBEAT, COMMIT, FETCH_OFFSETS, DESCRIBE = 10, 11, 14, 12, 8, 9, 15
VERSIONS = {FIND_COORDINATOR: 3, JOIN: 7, SYNC: 5, HEARTBEAT: 4, COMMIT: 8, FETCH_OFFSETS: 7,
            DESCRIBE: 5}
NONE = int(KioErrorCode.none)
NOT_AVAILABLE = int(KioErrorCode.coordinator_not_available)
MEMBER_ID_REQUIRED = int(KioErrorCode.member_id_required)
ILLEGAL_GENERATION = int(KioErrorCode.illegal_generation)
STALL_S = 30  # a request parked on a stalled commit: answered well before this


@pytest.fixture
def stallable(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    """Three brokers whose ISR does not shrink for a minute when followers stop."""
    cluster = Cluster(zookeeper.connect_string + f"/tidelog-undo-{uuid.uuid4().hex[:12]}",
                      tmp_path, extra_sets=(
                          "replica.lag.time.max.ms=60000", "zookeeper.session.timeout.ms=60000",
                          "group.initial.rebalance.delay.ms=0"))
    try:
        for node_id in (1, 2, 3):
            cluster.add(node_id)
            cluster.start(node_id)
        yield cluster
    finally:
        cluster.stop_all()


def _body(api_key: int, **fields: Any) -> Any:
    module = raw_requests._module(api_key, VERSIONS[api_key])
    name = {FIND_COORDINATOR: "FindCoordinatorRequest", JOIN: "JoinGroupRequest",
            SYNC: "SyncGroupRequest", HEARTBEAT: "HeartbeatRequest",
            COMMIT: "OffsetCommitRequest", FETCH_OFFSETS: "OffsetFetchRequest",
            DESCRIBE: "DescribeGroupsRequest"}[api_key]
    return getattr(module, name)(**fields)


def _module(api_key: int) -> Any:
    return raw_requests._module(api_key, VERSIONS[api_key])


def _call(address: str, api_key: int, timeout_s: float = 15.0, **fields: Any) -> Any:
    return raw_requests.call(address, api_key, VERSIONS[api_key], _body(api_key, **fields),
                             timeout_s)


def _join(address: str, member_id: str = "") -> Any:
    protocol = _module(JOIN).JoinGroupRequestProtocol(name="range", metadata=b"\0")
    return raw_requests.send(address, JOIN, VERSIONS[JOIN], _body(
        JOIN, group_id=GROUP, session_timeout=datetime.timedelta(seconds=120),
        rebalance_timeout=datetime.timedelta(seconds=120), member_id=member_id,
        group_instance_id=None, protocol_type="consumer", protocols=(protocol,)), STALL_S)


def _joined(sock: Any) -> Any:
    return raw_requests.receive(sock, JOIN, VERSIONS[JOIN])


def _sync(address: str, generation: int, member_id: str,
          assignments: dict[str, bytes] | None = None) -> Any:
    module = _module(SYNC)
    return raw_requests.send(address, SYNC, VERSIONS[SYNC], _body(
        SYNC, group_id=GROUP, generation_id=generation, member_id=member_id,
        group_instance_id=None, protocol_type="consumer", protocol_name="range",
        assignments=tuple(module.SyncGroupRequestAssignment(member_id=m, assignment=a)
                          for m, a in (assignments or {}).items())), STALL_S)


def _synced(sock: Any) -> tuple[int, bytes]:
    answer = raw_requests.receive(sock, SYNC, VERSIONS[SYNC])
    return int(answer.error_code), bytes(answer.assignment)


def _heartbeat(address: str, generation: int, member_id: str) -> int:
    return int(_call(address, HEARTBEAT, group_id=GROUP, generation_id=generation,
                     member_id=member_id, group_instance_id=None).error_code)


def _commit(address: str, generation: int, member_id: str, offset: int) -> int:
    module = _module(COMMIT)
    answer = _call(address, COMMIT, timeout_s=STALL_S, group_id=GROUP,
                   generation_id_or_member_epoch=generation, member_id=member_id,
                   group_instance_id=None, topics=(module.OffsetCommitRequestTopic(
                       name=TOPIC, partitions=(module.OffsetCommitRequestPartition(
                           partition_index=0, committed_offset=offset,
                           committed_leader_epoch=-1, committed_metadata=""),)),))
    return int(answer.topics[0].partitions[0].error_code)


def _committed(address: str) -> int:
    module = _module(FETCH_OFFSETS)
    answer = _call(address, FETCH_OFFSETS, group_id=GROUP, require_stable=False, topics=(
        module.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=(0,)),))
    return int(answer.topics[0].partitions[0].committed_offset)


def _described(address: str) -> tuple[str, list[tuple[str, bytes]]]:
    group = _call(address, DESCRIBE, groups=(GROUP,), include_authorized_operations=False
                  ).groups[0]
    assert group.error_code == NONE, group
    return str(group.group_state), sorted(
        (str(m.member_id), bytes(m.member_assignment)) for m in group.members)


def _coordinator(cluster: Cluster) -> tuple[int, list[int]]:
    """(coordinator, followers) once the group's partition has its ISR of 3 and every broker
    names that leader."""
    any_address = cluster.bootstrap().split(",")[0]
    cluster.wait_value(lambda: _call(any_address, FIND_COORDINATOR, key=GROUP, key_type=0),
                       lambda answer: answer.error_code == NONE, what="__consumer_offsets")
    count = len(cluster.admin().list_topics(OFFSETS, timeout=10).topics[OFFSETS].partitions)
    partition = partition_for(GROUP, count)
    leader, replicas, _ = cluster.wait_for_partition(
        OFFSETS, lambda view: sorted(view[2]) == [1, 2, 3], partition=partition,
        what="the group partition's ISR of 3")
    for broker in cluster.brokers.values():
        cluster.wait_value(lambda b=broker: _call(b.address, FIND_COORDINATOR, key=GROUP,
                                                  key_type=0).node_id,
                           lambda node: node == leader, what="every broker to name it")
    return leader, [b for b in replicas if b != leader]


def _stall(cluster: Cluster, followers: list[int]) -> None:
    for node_id in followers:
        cluster.signal(node_id, signal.SIGSTOP)


def _resume(cluster: Cluster, followers: list[int], coordinator: int) -> None:
    for node_id in followers:
        cluster.signal(node_id, signal.SIGCONT)
    address = cluster.brokers[coordinator].address
    # The coordinator's own view: acks=all passes again once both followers are back.
    count = len(cluster.admin_of(address).list_topics(OFFSETS, timeout=10)
                .topics[OFFSETS].partitions)
    cluster.wait_value(lambda: cluster.admin_of(address).list_topics(OFFSETS, timeout=5)
                       .topics[OFFSETS].partitions[partition_for(GROUP, count)].isrs,
                       lambda isr: sorted(isr) == [1, 2, 3], what="the ISR of 3 again")


def test_a_sync_whose_records_never_commit_is_reverted_and_fails_parked_requests(
    stallable: Cluster,
) -> None:
    cluster = stallable
    cluster.create_topic(TOPIC)
    coordinator, followers = _coordinator(cluster)
    address = cluster.brokers[coordinator].address

    # Member A alone (generation 1), then B joins and A rejoins: generation 2, both in.
    # The coordinator loads the partition's groups just after it learns it leads.
    first = cluster.wait_value(lambda: _joined(_join(address)),
                               lambda answer: answer.error_code == MEMBER_ID_REQUIRED,
                               what="the coordinator to have loaded its groups")
    a_id = str(first.member_id)
    a1 = _joined(_join(address, a_id))
    assert a1.error_code == NONE
    b_id = str(_joined(_join(address)).member_id)
    b_join = _join(address, b_id)  # parks until A rejoins
    a2_sock = _join(address, a_id)
    a2, b2 = _joined(a2_sock), _joined(b_join)
    assert a2.error_code == NONE and b2.error_code == NONE
    generation = int(a2.generation_id)
    leader_id, other_id = (a_id, b_id) if str(a2.leader) == a_id else (b_id, a_id)
    before = _described(address)
    assert before[0] == "CompletingRebalance"

    # The follower member parks its SyncGroup; the leader's SyncGroup writes the group's
    # assignment, which cannot commit while both replicas are stopped.
    _stall(cluster, followers)
    try:
        parked = _sync(address, generation, other_id)
        leader_sync = _sync(address, generation, leader_id,
                            {leader_id: b"for-leader", other_id: b"for-other"})
        assert _synced(leader_sync)[0] == NOT_AVAILABLE  # the wait timed out
        assert _synced(parked)[0] == NOT_AVAILABLE  # answered with the error, not left parked
        # Reverted: the group is as it was before the leader's SyncGroup.
        assert _described(address) == before
        assert _heartbeat(address, generation, leader_id) == NONE  # same generation
        assert _heartbeat(address, generation + 1, leader_id) == ILLEGAL_GENERATION
    finally:
        _resume(cluster, followers, coordinator)

    # The same SyncGroups again: they succeed now.
    leader_sync = _sync(address, generation, leader_id,
                        {leader_id: b"for-leader", other_id: b"for-other"})
    assert _synced(leader_sync) == (NONE, b"for-leader")
    assert _synced(_sync(address, generation, other_id)) == (NONE, b"for-other")
    assert _described(address)[0] == "Stable"

    # A commit that cannot commit is not visible; retried, it is.
    assert _commit(address, generation, leader_id, 5) == NONE
    assert _committed(address) == 5
    _stall(cluster, followers)
    try:
        assert _commit(address, generation, leader_id, 9) == NOT_AVAILABLE
        assert _committed(address) == 5
        assert _described(address)[0] == "Stable"
    finally:
        _resume(cluster, followers, coordinator)
    assert _commit(address, generation, leader_id, 9) == NONE
    assert _committed(address) == 9
