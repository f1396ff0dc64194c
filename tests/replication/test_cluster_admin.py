"""Cluster-mode housekeeping with real brokers: the high watermark checkpoint, DeleteTopics,
CreatePartitions and topic configs through ZooKeeper, DeleteRecords followed by followers."""

from __future__ import annotations

import datetime
import json
import signal

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions
from kazoo.client import KazooClient

from tidelog.storage.hw_checkpoint import CHECKPOINT_FILE

from . import raw_requests
from .harness import Cluster

INIT_PRODUCER_ID = 22


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
    cluster.wait_for_partition("hw", lambda view: len(view[2]) == 3, what="ISR of 3")
    _produce(cluster, "hw", 10)
    # Kafka's text format on every replica (followers learn the mark from their fetches).
    for node_id in cluster.brokers:
        cluster.wait_for(lambda node_id=node_id: "hw 0 10\n" in _checkpoint(cluster, node_id),
                         what=f"broker {node_id}'s checkpoint")
    lines = _checkpoint(cluster, 1).split("\n")
    assert lines[0] == "0" and int(lines[1]) == len([x for x in lines[2:] if x])
    leader, replicas, _ = cluster.wait_for_partition("hw", lambda view: True, what="a leader")
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
    # Metadata can name the new replicas before every broker has heard of them from ZooKeeper.
    for node_id, broker in cluster.brokers.items():
        cluster.wait_for(lambda broker=broker: all((broker.data_dir / f"grow-{p}").is_dir()
                                                   for p in range(3)),
                         what=f"broker {node_id} to create grow-0..2")
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


def _topic_configs(address: str, topic: str) -> dict[str, str]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = Cluster.admin_of(address)  # must outlive the future
    entries = admin.describe_configs([resource])[resource].result(timeout=15)
    return {name: entry.value for name, entry in entries.items()}


def _produce_error(cluster: Cluster, topic: str) -> KafkaError | None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                         "message.timeout.ms": 5000, "retries": 0})
    errors: list[KafkaError | None] = []
    producer.produce(topic, b"probe", partition=0, on_delivery=lambda e, m: errors.append(e))
    producer.flush(15)
    return errors[0]


def _set(cluster: Cluster, topic: str, entries: list[ConfigEntry]) -> None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    admin = cluster.admin()  # must outlive the future
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)


def _producer_id(address: str) -> int:
    body = raw_requests._module(INIT_PRODUCER_ID, 4).InitProducerIdRequest(
        transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=-1, producer_epoch=-1)
    answer = raw_requests.call(address, INIT_PRODUCER_ID, 4, body)
    assert answer.error_code == 0, answer
    return int(answer.producer_id)


def test_configs_and_delete_records_in_cluster_mode(cluster: Cluster) -> None:
    # Producer ids come from blocks claimed in ZooKeeper: no two brokers hand out the same one.
    ids = [_producer_id(b.address) for b in cluster.brokers.values() for _ in range(2)]
    assert len(set(ids)) == len(ids), ids
    topic = "configured"
    cluster.create_topic(topic, configs={"min.insync.replicas": "2"})
    cluster.wait_for(lambda: len(cluster.partition_state(topic)[2]) == 3, what="ISR of 3")
    _produce(cluster, topic, 100)

    # IncrementalAlterConfigs through any broker: stored in ZooKeeper in Kafka's layout and
    # applied on every broker (its data watch), replication configs included.
    set_op = AlterConfigOpType.SET
    _set(cluster, topic, [ConfigEntry("retention.ms", "3600000", incremental_operation=set_op),
                          ConfigEntry("min.insync.replicas", "4", incremental_operation=set_op)])
    zookeeper = KazooClient(hosts=cluster.zookeeper, timeout=10)
    zookeeper.start()
    try:
        data, _ = zookeeper.get(f"/config/topics/{topic}")
        assert json.loads(data) == {"version": 1, "config": {
            "min.insync.replicas": "4", "retention.ms": "3600000"}}
        assert zookeeper.get_children("/config/changes")  # Kafka's change notification
        block = json.loads(zookeeper.get("/latest_producer_id_block")[0])
        assert int(block["block_end"]) >= max(ids) and block["version"] == 1
    finally:
        zookeeper.stop()
        zookeeper.close()
    for broker in cluster.brokers.values():
        cluster.wait_for(
            lambda b=broker: _topic_configs(b.address, topic)["retention.ms"] == "3600000",
            what=f"broker {broker.node_id} to apply the config",
        )
    error = _produce_error(cluster, topic)  # ISR 3 < min.insync.replicas 4 on the leader
    assert error is not None and error.code() == KafkaError.NOT_ENOUGH_REPLICAS
    _set(cluster, topic, [ConfigEntry("min.insync.replicas", None,
                                      incremental_operation=AlterConfigOpType.DELETE)])
    cluster.wait_for(lambda: _produce_error(cluster, topic) is None, what="acks=all again")
    with pytest.raises(KafkaException):  # validated whole before anything is written
        _set(cluster, topic, [ConfigEntry("retention.ms", "soon", incremental_operation=set_op)])

    # DeleteRecords on the leader; followers follow its log start offset, so the next leader
    # has the same low watermark.
    admin = cluster.admin()
    deleted = admin.delete_records([TopicPartition(topic, 0, 40)])
    low_watermark = next(iter(deleted.values())).result(timeout=15).low_watermark
    assert low_watermark == 40
    leader, _, _ = cluster.wait_for_partition(topic, lambda view: True, what="the leader")
    cluster.kill(leader, signal.SIGKILL)
    cluster.wait_for(lambda: cluster.partition_state(topic)[0] not in (-1, leader),
                     what="a new leader")
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "watermarks"})
    try:
        # Each broker learns the new leader from its own ZooKeeper watch: the consumer's first
        # metadata may come from one that does not know it yet (librdkafka then reports an
        # unknown partition), so read until one answer comes, within a deadline.
        low, high = cluster.wait_value(
            lambda: consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5),
            lambda watermarks: watermarks is not None, what="the new leader's watermarks")
    finally:
        consumer.close()
    assert low == 40 and high >= 101
