"""Kafka 4 admin APIs any broker of a 3-broker cluster answers: DescribeCluster v1 (every live
broker, the ZooKeeper controller's id), DescribeTopicPartitions (KIP-966: leaders and ISRs from
the cluster view, pages and cursors), ElectLeaders (preferred, through the controller's
/admin/preferred_replica_election) and KIP-714 client-metrics subscriptions (stored in
ZooKeeper's /config/client-metrics, served by every broker). confluent-kafka and kafka-python
admin clients, one cluster for the module."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import ElectionType, TopicCollection
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kazoo.client import KazooClient

from broker.raw import RawClient, request_module
from tidelog.cluster.zk_payloads import PartitionState
from tidelog.cluster.zookeeper_server import ZooKeeperServer

from .harness import Cluster

DESCRIBE_TOPIC_PARTITIONS, GET_TELEMETRY = 75, 71


@pytest.fixture(scope="module")
def three(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, str]]:
    chroot = f"/tidelog-k4-{uuid.uuid4().hex[:12]}"
    cluster = Cluster(zookeeper.connect_string + chroot, tmp_path_factory.mktemp("k4"))
    try:
        for node_id in (1, 2, 3):
            cluster.add(node_id)
            cluster.start(node_id)
        cluster.create_topic("k4-topic", partitions=5, replication=3)
        yield cluster, chroot
    finally:
        cluster.stop_all()


def wait_until(read: Any, accept: Any, what: str, timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    value = None
    while time.monotonic() < deadline:
        value = read()
        if accept(value):
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what}: last seen {value!r}")


def test_describe_cluster_from_every_broker_lists_every_live_broker(
    three: tuple[Cluster, str],
) -> None:
    cluster, _ = three
    controller = cluster.admin().list_topics(timeout=10).controller_id
    assert controller in (1, 2, 3)
    for node_id, broker in cluster.brokers.items():
        admin = AdminClient({"bootstrap.servers": broker.address})  # outlives its future
        described = admin.describe_cluster(request_timeout=10).result(timeout=15)
        assert sorted(node.id for node in described.nodes) == [1, 2, 3], node_id
        assert described.controller.id == controller
        ports = {node.id: node.port for node in described.nodes}
        assert ports == {n: b.port for n, b in cluster.brokers.items()}
    kafka_admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[2].address)
    try:
        answer = kafka_admin.describe_cluster()
    finally:
        kafka_admin.close()
    assert sorted(b["broker_id"] for b in answer["brokers"]) == [1, 2, 3]
    assert answer["controller_id"] == controller


def test_describe_topic_partitions_through_any_broker(three: tuple[Cluster, str]) -> None:
    cluster, _ = three

    def from_metadata() -> dict[int, tuple[int, list[int], list[int]]]:
        topic = cluster.admin().list_topics("k4-topic", timeout=10).topics["k4-topic"]
        return {p: (m.leader, sorted(m.replicas), sorted(m.isrs))
                for p, m in topic.partitions.items()}

    expected = wait_until(
        from_metadata, lambda got: len(got) == 5 and all(
            leader >= 0 and len(isr) == 3 for leader, _r, isr in got.values()),
        "every partition led with a full ISR")
    for broker in cluster.brokers.values():
        # librdkafka >= 2.5 asks DescribeTopicPartitions when the broker advertises it.
        admin = AdminClient({"bootstrap.servers": broker.address})

        def described(admin: AdminClient = admin) -> dict[int, Any]:
            futures = admin.describe_topics(TopicCollection(["k4-topic"]), request_timeout=10)
            return {
                p.id: (p.leader.id if p.leader is not None else -1,
                       sorted(n.id for n in p.replicas), sorted(n.id for n in p.isr))
                for p in futures["k4-topic"].result(timeout=15).partitions
            }

        wait_until(described, lambda found: found == expected, f"{broker.address} agrees")
    # Pages: two partitions per answer, the cursor naming the next one.
    module = request_module(DESCRIBE_TOPIC_PARTITIONS, 0)
    seen: list[tuple[int, int, tuple[int, ...]]] = []
    cursor = None
    with RawClient(cluster.brokers[3].address) as raw:
        for _page in range(5):
            answer = raw.call(DESCRIBE_TOPIC_PARTITIONS, 0, module.DescribeTopicPartitionsRequest(
                topics=(module.TopicRequest(name="k4-topic"),), response_partition_limit=2,
                cursor=cursor,
            ))
            (topic,) = answer.topics
            assert topic.error_code.value == 0
            seen += [(p.partition_index, p.leader_id, tuple(sorted(p.isr_nodes)))
                     for p in topic.partitions]
            if answer.next_cursor is None:
                break
            assert answer.next_cursor.topic_name == "k4-topic"
            cursor = module.Cursor(topic_name="k4-topic",
                                   partition_index=answer.next_cursor.partition_index)
    assert [(p, leader, list(isr)) for p, leader, isr in seen] == [
        (p, expected[p][0], expected[p][2]) for p in range(5)
    ]


def test_client_metrics_subscriptions_live_in_zookeeper(
    three: tuple[Cluster, str], zookeeper: ZooKeeperServer,
) -> None:
    cluster, chroot = three
    first = KafkaAdminClient(bootstrap_servers=cluster.brokers[1].address)
    try:
        assert first.alter_configs([ConfigResource(
            ConfigResourceType.CLIENT_METRICS, "cluster-sub",
            configs={"metrics": "org.apache.kafka.", "interval.ms": "45000"},
        )]) == {"client_metrics": {"cluster-sub": "OK"}}
    finally:
        first.close()
    # Every broker serves it: a new client of broker 3 is given it.
    module = request_module(GET_TELEMETRY, 0)

    def subscription() -> tuple[tuple[str, ...], float]:
        with RawClient(cluster.brokers[3].address) as raw:
            answer = raw.call(GET_TELEMETRY, 0,
                              module.GetTelemetrySubscriptionsRequest(client_instance_id=None))
        return answer.requested_metrics, answer.push_interval.total_seconds()

    wait_until(subscription, lambda got: got == (("org.apache.kafka.",), 45.0),
               "broker 3 serves the subscription made through broker 1")
    third = KafkaAdminClient(bootstrap_servers=cluster.brokers[3].address)
    try:
        assert "cluster-sub" in third.list_config_resources()["client_metrics"]
    finally:
        third.close()
    client = KazooClient(hosts=zookeeper.connect_string + chroot)
    client.start(timeout=15)
    try:
        data, _ = client.get("/config/client-metrics/cluster-sub")
        assert json.loads(data) == {
            "version": 1, "config": {"interval.ms": "45000", "metrics": "org.apache.kafka."}
        }
    finally:
        client.stop()
        client.close()


def test_preferred_leader_election_through_a_broker_that_is_not_the_controller(
    three: tuple[Cluster, str], zookeeper: ZooKeeperServer,
) -> None:
    cluster, chroot = three
    cluster.create_topic("elect", partitions=1, replication=3)
    def state() -> tuple[int, list[int], list[int]] | None:
        try:
            return cluster.partition_state("elect")
        except KeyError:  # not in this broker's metadata yet
            return None

    leader, replicas, _isr = wait_until(state, lambda s: s is not None and len(s[2]) == 3,
                                        "ISR of 3")
    preferred = replicas[0]
    assert leader == preferred
    other = next(b for b in replicas if b != preferred)
    # Leadership moved away (what a failover leaves behind): written as a controller would.
    client = KazooClient(hosts=zookeeper.connect_string + chroot)
    client.start(timeout=15)
    try:
        path = "/brokers/topics/elect/partitions/0/state"
        data, stat = client.get(path)
        current = PartitionState.decode(data)
        moved = PartitionState(other, current.leader_epoch + 1, current.isr,
                               current.controller_epoch)
        client.set(path, moved.encode(), version=stat.version)
    finally:
        client.stop()
        client.close()
    wait_until(state, lambda got: got is not None and got[0] == other,
               "the leader moved away from the preferred replica")
    controller = cluster.admin().list_topics(timeout=10).controller_id
    asked = next(b for n, b in cluster.brokers.items() if n != controller)
    admin = AdminClient({"bootstrap.servers": asked.address})  # outlives its future
    partition = ConfluentPartition("elect", 0)
    # (confluent-kafka 2.16's elect_leaders takes no timeout keywords: a SystemError.)
    result = admin.elect_leaders(ElectionType.PREFERRED, [partition]).result(timeout=30)
    assert result[partition] is None  # elected
    assert cluster.partition_state("elect")[0] == preferred
    # Again: nothing to do.
    again = admin.elect_leaders(ElectionType.PREFERRED, [partition]).result(timeout=30)
    assert again[partition] is not None and "ELECTION_NOT_NEEDED" in again[partition].name()
    kafka_admin = KafkaAdminClient(bootstrap_servers=asked.address)
    try:
        answer = kafka_admin.elect_leaders(0, {"elect": [0], "no-such-topic": [0]},
                                           raise_errors=False)
    finally:
        kafka_admin.close()
    codes = {r.topic: [p.error_code for p in r.partition_result]
             for r in answer.replica_election_results}
    assert codes == {"elect": [84], "no-such-topic": [3]}
