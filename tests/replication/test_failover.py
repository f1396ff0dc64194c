"""Replication under failure: leader kills, a stopped follower, ISR below min.insync.replicas.

Real ZooKeeper, three real `tidelog serve --zookeeper` processes, confluent-kafka clients.
TIDELOG_LEADER_KILLS sets the number of leader kills (default 5).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from confluent_kafka import KafkaError, Producer

from tidelog.records.batch import iter_batches
from tidelog.records.record import iter_records

from .checker import check
from .harness import LAG_TIME_MAX_MS, Cluster

TOPIC = "jepsen"
KILLS = int(os.environ.get("TIDELOG_LEADER_KILLS", "5"))


def _replica_log(data_dir: Path, topic: str) -> dict[int, bytes]:
    data = b"".join(p.read_bytes() for p in sorted((data_dir / f"{topic}-0").glob("*.log")))
    return {
        record.offset: record.value or b""
        for batch in iter_batches(data)
        for record in iter_records(batch)
    }


def _stable(cluster: Cluster, isr_size: int) -> bool:
    leader, _, isr = cluster.partition_state(TOPIC)
    return leader >= 0 and cluster.brokers[leader].alive() and len(isr) == isr_size


def _producer(cluster: Cluster) -> Producer:
    return Producer({
        "bootstrap.servers": cluster.bootstrap(),
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 120_000,
        "retry.backoff.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000,
    })


def test_leader_kills_lose_and_duplicate_nothing(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, configs={"min.insync.replicas": "2"})
    cluster.wait_for(lambda: _stable(cluster, 3), what="ISR of 3")
    producer = _producer(cluster)
    acknowledged: dict[bytes, int] = {}
    failures: list[str] = []
    sent: list[bytes] = []
    stop = threading.Event()

    def on_delivery(error: KafkaError | None, message: object) -> None:
        if error is None:
            acknowledged[message.value()] = message.offset()  # type: ignore[attr-defined]
        else:
            failures.append(str(error))

    def produce() -> None:
        sequence = 0
        while not stop.is_set():
            value = f"v{sequence:08d}".encode()
            try:
                producer.produce(TOPIC, value, on_delivery=on_delivery)
            except BufferError:
                producer.poll(0.05)
                continue
            sent.append(value)
            sequence += 1
            producer.poll(0.002)

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        for _ in range(KILLS):
            time.sleep(1.0)
            leader, _, _ = cluster.partition_state(TOPIC)
            before = len(acknowledged)
            cluster.kill(leader)
            cluster.wait_for(
                lambda leader=leader: cluster.partition_state(TOPIC)[0] not in (-1, leader),
                what="a new leader",
            )
            cluster.start(leader)
            cluster.wait_for(lambda: _stable(cluster, 3), timeout_s=60, what="the ISR to heal")
            cluster.wait_for(lambda before=before: len(acknowledged) > before, what="writes")
    finally:
        stop.set()
        writer.join()
        remaining = producer.flush(120)
    assert remaining == 0 and not failures, failures[:5]
    cluster.wait_for(lambda: _stable(cluster, 3), what="a final ISR of 3")
    time.sleep(1.5)  # followers fetch the last batches
    for node_id in cluster.brokers:
        cluster.kill(node_id, signal.SIGTERM)
    replicas = {n: _replica_log(b.data_dir, TOPIC) for n, b in cluster.brokers.items()}
    verdict = check(acknowledged, sent, replicas)
    print(f"{KILLS} leader kills: {verdict}")
    assert verdict.acknowledged > 0
    assert verdict.ok(), verdict
    assert len({len(log) for log in replicas.values()}) == 1  # every replica caught up


def test_stopped_follower_leaves_isr_and_rejoins(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, configs={"min.insync.replicas": "2"})
    cluster.wait_for(lambda: _stable(cluster, 3), what="ISR of 3")
    leader, replicas, _ = cluster.partition_state(TOPIC)
    follower = next(b for b in replicas if b != leader)
    producer = _producer(cluster)
    cluster.signal(follower, signal.SIGSTOP)
    try:
        cluster.wait_for(
            lambda: follower not in cluster.partition_state(TOPIC)[2],
            timeout_s=LAG_TIME_MAX_MS / 1000 * 5, what="the ISR to shrink",
        )
        errors: list[object] = []
        for i in range(100):
            producer.produce(TOPIC, f"m{i}".encode(), on_delivery=lambda e, m: errors.append(e))
        assert producer.flush(30) == 0
        assert errors == [None] * 100  # acks=all goes on with ISR 2 >= min.insync.replicas
    finally:
        cluster.signal(follower, signal.SIGCONT)
    cluster.wait_for(lambda: follower in cluster.partition_state(TOPIC)[2], what="rejoin")


def test_isr_below_min_insync_refuses_acks_all(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, configs={"min.insync.replicas": "3"})
    cluster.wait_for(lambda: _stable(cluster, 3), what="ISR of 3")
    leader, replicas, _ = cluster.partition_state(TOPIC)
    follower = next(b for b in replicas if b != leader)
    cluster.kill(follower)
    cluster.wait_for(lambda: len(cluster.partition_state(TOPIC)[2]) == 2, what="ISR of 2")
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                         "message.timeout.ms": 3000, "retries": 0})
    errors: list[KafkaError | None] = []
    producer.produce(TOPIC, b"refused", on_delivery=lambda e, m: errors.append(e))
    producer.flush(10)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS
    leader_dir = cluster.brokers[leader].data_dir
    cluster.kill(leader, signal.SIGTERM)
    assert b"refused" not in _replica_log(leader_dir, TOPIC).values()  # nothing appended
