"""A consumer group survives the death of its coordinator's broker.

Real ZooKeeper, three real `tidelog serve --zookeeper` processes, confluent-kafka clients.
`__consumer_offsets` is a replicated topic created through the controller; the coordinator of
a group is the leader of the group's partition; commits are acks=all; the new leader reloads
the groups by replaying its copy of the partition.
"""

from __future__ import annotations

import signal
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tidelog.coordinator.coordinator import partition_for

from . import raw_requests
from .harness import Cluster

TOPIC = "orders"
GROUP = "billing"
OFFSETS = "__consumer_offsets"
FIND_COORDINATOR, HEARTBEAT = 10, 12
NOT_COORDINATOR = 16


def _produce(cluster: Cluster, first: int, count: int) -> None:
    producer = Producer({
        "bootstrap.servers": cluster.bootstrap(), "enable.idempotence": True, "acks": "all",
        "linger.ms": 5, "message.timeout.ms": 60_000,
    })
    errors: list[object] = []
    for i in range(first, first + count):
        producer.produce(TOPIC, f"m{i}".encode(), key=str(i).encode(),
                         on_delivery=lambda error, _: errors.append(error))
    assert producer.flush(60) == 0
    assert errors == [None] * count


def _consumer(cluster: Cluster) -> Consumer:
    return Consumer({
        "bootstrap.servers": cluster.bootstrap(), "group.id": GROUP,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
        "topic.metadata.refresh.interval.ms": 1000, "retry.backoff.ms": 100,
    })


def _poll(consumer: Consumer, seen: list[tuple[int, int, str]], distinct: int,
          timeout_s: float) -> None:
    """Consume until `distinct` different values have been seen (or the timeout)."""
    deadline = time.monotonic() + timeout_s
    while len({v for _, _, v in seen}) < distinct and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None or message.error() is not None:
            continue
        seen.append((message.partition(), message.offset(), message.value().decode()))


def _coordinator(cluster: Cluster, address: str) -> int:
    body = raw_requests._module(FIND_COORDINATOR, 3).FindCoordinatorRequest(
        key=GROUP, key_type=0)
    answer = raw_requests.call(address, FIND_COORDINATOR, 3, body)
    assert answer.error_code == 0, answer
    return int(answer.node_id)


def _heartbeat_error(address: str) -> int:
    body = raw_requests._module(HEARTBEAT, 4).HeartbeatRequest(
        group_id=GROUP, generation_id=1, member_id="nobody", group_instance_id=None)
    return int(raw_requests.call(address, HEARTBEAT, 4, body).error_code)


def _committed(cluster: Cluster, partitions: int) -> dict[int, int]:
    reader = _consumer(cluster)
    try:
        wanted = [TopicPartition(TOPIC, p) for p in range(partitions)]
        # -1001: nothing committed for that partition yet (it starts at 0)
        return {tp.partition: max(0, tp.offset) for tp in reader.committed(wanted, timeout=20)}
    finally:
        reader.close()


def test_group_keeps_working_when_its_coordinator_dies(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, partitions=3, configs={"min.insync.replicas": "2"})
    _produce(cluster, 0, 300)
    consumer = _consumer(cluster)
    consumer.subscribe([TOPIC])
    seen: list[tuple[int, int, str]] = []
    try:
        _poll(consumer, seen, 150, timeout_s=60)
        assert len(seen) >= 150
        consumer.commit(asynchronous=False)
        committed_before = _committed(cluster, 3)
        assert sum(committed_before.values()) == len(seen)

        # The coordinator is the leader of the group's __consumer_offsets partition, which is
        # replicated on every broker; every broker names it, the others refuse group requests.
        metadata = cluster.admin().list_topics(OFFSETS, timeout=10).topics[OFFSETS]
        group_partition = partition_for(GROUP, len(metadata.partitions))
        assert sorted(metadata.partitions[group_partition].replicas) == [1, 2, 3]
        # A loaded follower can drop out of the ISR for a moment (replica.lag.time.max.ms is
        # 2 s here); the kill below is meant for a whole ISR.
        coordinator, _, _ = cluster.wait_for_partition(
            OFFSETS, lambda view: sorted(view[2]) == [1, 2, 3], partition=group_partition,
            what="the group partition's ISR of 3")
        # Each broker learns leadership from its own ZooKeeper watch: wait until every one
        # names the leader of that same answer, then the others refuse group requests.
        for broker in cluster.brokers.values():
            cluster.wait_value(lambda broker=broker: _coordinator(cluster, broker.address),
                               lambda named: named == coordinator,
                               what=f"broker {broker.node_id} to name the coordinator")
            if broker.node_id != coordinator:
                assert _heartbeat_error(broker.address) == NOT_COORDINATOR

        cluster.kill(coordinator, signal.SIGKILL)
        survivor = next(b for b in cluster.brokers.values() if b.alive())
        cluster.wait_for(
            lambda: _coordinator(cluster, survivor.address) != coordinator,
            what="a new coordinator",
        )
        # The new coordinator loaded the group from its replica: the commits are intact.
        assert _committed(cluster, 3) == committed_before

        _produce(cluster, 300, 150)
        _poll(consumer, seen, 450, timeout_s=90)
        consumer.commit(asynchronous=False)
    finally:
        try:
            consumer.close()
        except KafkaException:
            pass

    values = [value for _, _, value in seen]
    assert set(values) == {f"m{i}" for i in range(450)}, "every message consumed"
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    for partition, offset, value in seen:
        if counts[value] > 1:  # duplicates only past the last commit before the kill
            assert offset >= committed_before[partition], (partition, offset, value)
    assert _committed(cluster, 3) == {
        p: 1 + max(o for q, o, _ in seen if q == p) for p in range(3)
    }
