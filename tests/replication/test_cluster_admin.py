"""Cluster-mode housekeeping with real brokers: the high watermark checkpoint, DeleteTopics and
CreatePartitions through ZooKeeper."""

from __future__ import annotations

import signal

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewPartitions
from kazoo.client import KazooClient

from tidelog.cluster.hw_checkpoint import CHECKPOINT_FILE

from .harness import Cluster


def _produce(cluster: Cluster, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                         "enable.idempotence": True})
    errors: list[object] = []
    for i in range(count):
        producer.produce(topic, f"m{i}".encode(), partition=partition,
                         on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(30) == 0
    assert errors == [None] * count


def _checkpoint(cluster: Cluster, node_id: int) -> str:
    path = cluster.brokers[node_id].data_dir / CHECKPOINT_FILE
    return path.read_text("ascii") if path.exists() else ""


def test_high_watermark_checkpoint_survives_a_restart(cluster: Cluster) -> None:
    cluster.create_topic("hw")
    cluster.wait_for(lambda: len(cluster.partition_state("hw")[2]) == 3, what="ISR of 3")
    _produce(cluster, "hw", 10)
    # Kafka's text format on every replica (followers learn the mark from their fetches).
    for node_id in cluster.brokers:
        cluster.wait_for(lambda node_id=node_id: "hw 0 10\n" in _checkpoint(cluster, node_id),
                         what=f"broker {node_id}'s checkpoint")
    lines = _checkpoint(cluster, 1).split("\n")
    assert lines[0] == "0" and int(lines[1]) == len([x for x in lines[2:] if x])
    leader, replicas, _ = cluster.partition_state("hw")
    follower = next(b for b in replicas if b != leader)
    cluster.kill(follower)
    cluster.start(follower)
    log_text = cluster.brokers[follower].log_path.read_text()
    assert "hw-0: high watermark 10 from the checkpoint" in log_text  # not 0 after restart


def test_delete_topics_and_create_partitions_go_through_zookeeper(cluster: Cluster) -> None:
    cluster.create_topic("doomed")
    cluster.create_topic("grow")
    cluster.wait_for(lambda: len(cluster.partition_state("doomed")[2]) == 3
                     and len(cluster.partition_state("grow")[2]) == 3, what="ISR of 3")
    _produce(cluster, "doomed", 5)
    admin = cluster.admin()
    admin.delete_topics(["doomed"], operation_timeout=20)["doomed"].result(timeout=30)
    for node_id, broker in cluster.brokers.items():
        cluster.wait_for(lambda broker=broker: not (broker.data_dir / "doomed-0").exists(),
                         what=f"broker {node_id} to delete its log")
    zookeeper = KazooClient(hosts=cluster.zookeeper, timeout=10)
    zookeeper.start(timeout=15)
    try:
        assert zookeeper.exists("/brokers/topics/doomed") is None
        assert zookeeper.get_children("/admin/delete_topics") == []
    finally:
        zookeeper.stop()
        zookeeper.close()
    assert "doomed" not in cluster.admin().list_topics(timeout=10).topics
    cluster.create_topic("doomed")  # the name is free again: a new, empty topic
    cluster.wait_for(lambda: len(cluster.partition_state("doomed")[2]) == 3, what="re-created")
    _produce(cluster, "doomed", 1)

    admin.create_partitions([NewPartitions("grow", 3)])["grow"].result(timeout=30)

    def grown() -> bool:
        partitions = cluster.admin().list_topics("grow", timeout=10).topics["grow"].partitions
        return len(partitions) == 3 and all(
            p.leader >= 0 and len(p.isrs) == 3 for p in partitions.values())

    cluster.wait_for(grown, what="3 partitions with leaders and ISR of 3")
    for broker in cluster.brokers.values():
        assert all((broker.data_dir / f"grow-{p}").is_dir() for p in range(3))
    _produce(cluster, "grow", 4, partition=2)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "unused",
                         "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("doomed", 0), timeout=10)
        assert (low, high) == (0, 1)  # the re-created topic did not inherit the old records
        assert consumer.get_watermark_offsets(TopicPartition("grow", 2), timeout=10) == (0, 4)
    finally:
        consumer.close()
    for node_id in cluster.brokers:
        cluster.kill(node_id, signal.SIGTERM)
