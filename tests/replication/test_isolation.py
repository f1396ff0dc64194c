"""An isolated leader: it acknowledges no acks=all write, and its divergent tail is truncated.

Two ways to isolate it. With a loopback proxy (proxy.py) between each broker and ZooKeeper and
in front of each broker's advertised address (what followers dial), cutting the leader's two
proxies is a network partition: it keeps running and serving the clients that reach its real
port, but loses ZooKeeper and its followers. Simpler, SIGSTOP of the leader process:
its session expires, the controller elects a follower (leader epoch + 1) which takes writes.
Requests sent to the stopped leader wait in its socket buffer and are served the moment it
resumes, before it has heard of the new leader: the acks=1 batch is appended locally under
the old epoch and acknowledged (a divergent tail, and an acks=1 loss); the acks=all batch is
appended too but never acknowledged. Once it learns the new epoch it follows, truncates to
the new leader's end offset for its epoch (OffsetForLeaderEpoch, KIP-101) and fetches.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode as KioErrorCode

from tidelog.cluster.zookeeper_server import ZooKeeperServer

from .checker import check
from .harness import LAG_TIME_MAX_MS, SESSION_TIMEOUT_MS, Cluster, replica_log
from .proxy import Proxy
from .raw_requests import (
    PRODUCE,
    metadata_leader_epoch,
    produce,
    produce_answer,
    produce_request,
    receive,
    send,
)

TOPIC = "isolated"
NONE = int(KioErrorCode.none)


def test_isolated_leader_acks_no_acks_all_and_its_tail_is_truncated(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, configs={"min.insync.replicas": "2"})
    # One Metadata answer gives the leader, replicas and ISR together (a second read may come
    # from a broker that has not yet heard of the leader: leader -1).
    old, replicas, _ = cluster.wait_for_partition(TOPIC, lambda view: len(view[2]) == 3,
                                                  what="ISR of 3")
    old_address = cluster.brokers[old].address
    survivor = cluster.brokers[next(b for b in replicas if b != old)].address
    # That answer may come from a follower that heard of the state first; the writes below go
    # to the leader, which learns it leads from its own watch (seen answering
    # UNKNOWN_TOPIC_OR_PARTITION in between, under load).
    cluster.wait_value(lambda: metadata_leader_epoch(old_address, TOPIC),
                       lambda answer: answer[0] == old, what="the leader to know it leads")
    acknowledged: dict[bytes, int] = {}
    for i in range(3):
        value = f"base{i}".encode()
        code, acknowledged[value] = produce(old_address, TOPIC, [value], acks=-1)
        assert code == NONE
    # The survivor's own view may trail: take its epoch from an answer naming the same leader.
    _, old_epoch = cluster.wait_value(lambda: metadata_leader_epoch(survivor, TOPIC),
                                      lambda answer: answer[0] == old,
                                      what="the survivor to see the leader")

    cluster.signal(old, signal.SIGSTOP)
    try:
        acks_one = send(old_address, PRODUCE, 9,
                        produce_request(TOPIC, [b"divergent-acks1"], 1, 10), timeout_s=60)
        acks_all = send(old_address, PRODUCE, 9,
                        produce_request(TOPIC, [b"isolated-acks-all"], -1, 5), timeout_s=60)
        new, _ = cluster.wait_value(
            lambda: metadata_leader_epoch(survivor, TOPIC),
            lambda answer: answer[1] > old_epoch and answer[0] != -1,
            timeout_s=SESSION_TIMEOUT_MS / 1000 * 6, what="a new leader")
        assert new not in (old, -1)
        new_address = cluster.brokers[new].address
        first: list[tuple[int, int]] = []
        cluster.wait_for(lambda: first.append(produce(new_address, TOPIC, [b"new0"], acks=-1))
                         or first[-1][0] == NONE, what="the new leader to take acks=all writes")
        acknowledged[b"new0"] = first[-1][1]
        for value in (b"new1", b"new2"):
            code, offset = produce(new_address, TOPIC, [value], acks=-1)
            assert code == NONE
            acknowledged[value] = offset
    finally:
        cluster.signal(old, signal.SIGCONT)

    code_all, _ = produce_answer(receive(acks_all, PRODUCE, 9))
    assert code_all != NONE  # the isolated leader acknowledged no acks=all write
    code_one, offset_one = produce_answer(receive(acks_one, PRODUCE, 9))
    assert code_one == NONE, "served before the new view: an acks=1 ack for a divergent tail"
    assert offset_one == 3  # the offset the new leader gave to b"new0"
    cluster.wait_for(lambda: len(cluster.admin_of(new_address).list_topics(TOPIC, timeout=5)
                                 .topics[TOPIC].partitions[0].isrs) == 3,
                     timeout_s=30, what="the old leader back in the ISR")
    cluster.wait_for(lambda: b"truncating from 5 to 3" in cluster.brokers[old].log_path
                     .read_bytes(), what="the divergent tail truncated")
    code, offset = produce(new_address, TOPIC, [b"after"], acks=-1)  # acks=all on ISR of 3
    assert code == NONE
    acknowledged[b"after"] = offset
    for node_id in cluster.brokers:
        cluster.kill(node_id, signal.SIGTERM)
    logs = {n: replica_log(b.data_dir, TOPIC) for n, b in cluster.brokers.items()}
    assert all(log == logs[new] for log in logs.values())  # same records at the same offsets
    assert not {b"divergent-acks1", b"isolated-acks-all"} & set(logs[old].values())
    verdict = check(acknowledged, list(acknowledged), logs)
    assert verdict.ok() and verdict.acknowledged == 7, verdict
    acks_one_lost = check({b"divergent-acks1": offset_one}, [], logs).lost
    print(f"isolated leader: {verdict}; acks=1 lost: {acks_one_lost}")
    assert acks_one_lost == 1  # the loss acks=1 allows, counted, not silent corruption


Proxied = tuple[Cluster, dict[int, tuple[Proxy, Proxy]]]


@pytest.fixture
def proxied(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Proxied]:
    """Three brokers, each reaching ZooKeeper through its own proxy and advertising a proxy
    in front of its own port; proxies[node] = (to ZooKeeper, in front of the broker)."""
    chroot = f"/tidelog-proxy-{uuid.uuid4().hex[:12]}"
    cluster = Cluster(zookeeper.connect_string + chroot, tmp_path)
    proxies: dict[int, tuple[Proxy, Proxy]] = {}
    zk_host, _, zk_port = zookeeper.connect_string.rpartition(":")
    try:
        for node_id in (1, 2, 3):
            broker = cluster.add(node_id)
            to_zookeeper = Proxy(zk_host, int(zk_port))
            in_front = Proxy("127.0.0.1", broker.port)
            proxies[node_id] = (to_zookeeper, in_front)
            broker.zookeeper = to_zookeeper.address + chroot
            broker.advertise = in_front.address
            cluster.start(node_id)
        yield cluster, proxies
    finally:
        cluster.stop_all()
        for pair in proxies.values():
            for proxy in pair:
                proxy.close()


def test_partitioned_leader_acks_no_acks_all_and_its_tail_is_truncated(proxied: Proxied) -> None:
    cluster, proxies = proxied
    cluster.create_topic(TOPIC, configs={"min.insync.replicas": "2"})
    # One Metadata answer gives the leader, replicas and ISR together (a second read may come
    # from a broker that has not yet heard of the leader: leader -1).
    old, replicas, _ = cluster.wait_for_partition(TOPIC, lambda view: len(view[2]) == 3,
                                                  what="ISR of 3")
    direct = cluster.brokers[old].address  # the test's clients still reach the old leader
    survivor = cluster.brokers[next(b for b in replicas if b != old)].address
    # As above: the leader itself must know it leads before it takes the writes below.
    cluster.wait_value(lambda: metadata_leader_epoch(direct, TOPIC),
                       lambda answer: answer[0] == old, what="the leader to know it leads")
    acknowledged: dict[bytes, int] = {}
    for i in range(3):
        code, acknowledged[f"base{i}".encode()] = produce(direct, TOPIC, [f"base{i}".encode()], -1)
        assert code == NONE
    # The survivor's own view may trail: take its epoch from an answer naming the same leader.
    _, old_epoch = cluster.wait_value(lambda: metadata_leader_epoch(survivor, TOPIC),
                                      lambda answer: answer[0] == old,
                                      what="the survivor to see the leader")

    for proxy in proxies[old]:
        proxy.cut()  # the partition: no ZooKeeper, no followers
    try:
        # Still leader in its own eyes: acks=1 is appended and acknowledged (a divergent tail,
        # lost later: what acks=1 allows); acks=all waits for followers that never come.
        code_one, offset_one = produce(direct, TOPIC, [b"divergent-acks1"], 1)
        assert (code_one, offset_one) == (NONE, 3)
        code_all, _ = produce(direct, TOPIC, [b"isolated-acks-all"], -1,
                              timeout_s=LAG_TIME_MAX_MS / 1000 + 2)
        assert code_all != NONE
        new, _ = cluster.wait_value(
            lambda: metadata_leader_epoch(survivor, TOPIC),
            lambda answer: answer[1] > old_epoch and answer[0] != -1,
            timeout_s=SESSION_TIMEOUT_MS / 1000 * 6, what="a new leader")
        assert new not in (old, -1)
        new_address = cluster.brokers[new].address
        for value in (b"new0", b"new1", b"new2"):
            attempts: list[tuple[int, int]] = []
            cluster.wait_for(lambda value=value, attempts=attempts: attempts.append(
                produce(new_address, TOPIC, [value], -1))
                or attempts[-1][0] == NONE, what="acks=all on the new leader")
            acknowledged[value] = attempts[-1][1]
        # The partitioned leader still acknowledges no acks=all write.
        assert produce(direct, TOPIC, [b"isolated-acks-all-2"], -1, timeout_s=2)[0] != NONE
    finally:
        for proxy in proxies[old]:
            proxy.heal()

    cluster.wait_for(lambda: len(cluster.admin_of(new_address).list_topics(TOPIC, timeout=5)
                                 .topics[TOPIC].partitions[0].isrs) == 3,
                     timeout_s=40, what="the old leader back in the ISR")
    # The old leader's own log line; the ISR above is the new leader's view.
    cluster.wait_for(lambda: b"truncating from 6 to 3" in cluster.brokers[old].log_path
                     .read_bytes(), what="the divergent tail truncated")
    for node_id in cluster.brokers:
        cluster.kill(node_id, signal.SIGTERM)
    logs = {n: replica_log(b.data_dir, TOPIC) for n, b in cluster.brokers.items()}
    assert all(log == logs[new] for log in logs.values())  # same records at the same offsets
    verdict = check(acknowledged, list(acknowledged), logs)
    assert verdict.ok() and verdict.acknowledged == 6, verdict
    acks_one_lost = check({b"divergent-acks1": offset_one}, [], logs).lost
    print(f"partitioned leader: {verdict}; acks=1 lost: {acks_one_lost}")
    assert acks_one_lost == 1
