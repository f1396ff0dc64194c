"""Repeated SIGKILL of partition leaders while three producers write (Jepsen-style check).

Real ZooKeeper, three real `tidelog serve --zookeeper` processes. Three topics (RF 3,
min.insync.replicas=2), one producer each:
- `jepsen-ck`: confluent-kafka, idempotent, acks=all;
- `jepsen-kp`: kafka-python, idempotent, acks=all;
- `jepsen-acks1`: confluent-kafka, acks=1 without retries.
Kills go round-robin over the three topics' current leaders; the killed broker restarts and
rejoins before the next kill. Verdict for the acks=all producers: 0 lost, 0 duplicated,
0 reordered, 0 inconsistent offsets, every replica the same log. For acks=1 the checker counts
the acknowledged messages that were lost (allowed by acks=1, reported) and still requires the
same record at the same offset on every replica (never silent corruption).

TIDELOG_LEADER_KILLS sets the number of kills (default 20; a soak sets hundreds).
"""

from __future__ import annotations

import os
import signal
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, Producer
from kafka import KafkaProducer

from .checker import Verdict, check
from .harness import Cluster, replica_log

KILLS = int(os.environ.get("TIDELOG_LEADER_KILLS", "20"))
CONFLUENT, KAFKA_PYTHON, ACKS_ONE = "jepsen-ck", "jepsen-kp", "jepsen-acks1"
TOPICS = (CONFLUENT, KAFKA_PYTHON, ACKS_ONE)


@dataclass
class History:
    """What one producer sent (in order) and what it saw acknowledged (value -> offset)."""

    sent: list[bytes] = field(default_factory=list)
    acknowledged: dict[bytes, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def _stable(cluster: Cluster) -> bool:
    for topic in TOPICS:
        leader, _, isr = cluster.partition_state(topic)
        if leader < 0 or not cluster.brokers[leader].alive() or len(isr) != 3:
            return False
    return True


def _caught_up(cluster: Cluster) -> bool:
    """Every replica of every topic holds the same records at the same offsets."""
    for topic in TOPICS:
        first, *others = (replica_log(b.data_dir, topic) for b in cluster.brokers.values())
        if any(log != first for log in others):
            return False
    return True


def _confluent(cluster: Cluster, acks_all: bool) -> Producer:
    config: dict[str, object] = {
        "bootstrap.servers": cluster.bootstrap(),
        "linger.ms": 5,
        "message.timeout.ms": 120_000,
        "retry.backoff.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    if acks_all:
        config.update({"enable.idempotence": True, "acks": "all"})
    else:
        config.update({"acks": "1", "retries": 0, "message.timeout.ms": 10_000})
    return Producer(config)


def _confluent_loop(producer: Producer, topic: str, history: History,
                    stop: threading.Event) -> None:
    def on_delivery(error: KafkaError | None, message: object) -> None:
        if error is None:
            history.acknowledged[message.value()] = message.offset()  # type: ignore[attr-defined]
        else:
            history.failures.append(str(error))

    sequence = 0
    while not stop.is_set():
        value = f"{topic}-{sequence:08d}".encode()
        try:
            producer.produce(topic, value, partition=0, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.05)
            continue
        history.sent.append(value)
        sequence += 1
        producer.poll(0.002)


def _kafka_python_loop(producer: KafkaProducer, history: History, stop: threading.Event) -> None:
    sequence = 0
    while not stop.is_set():
        value = f"{KAFKA_PYTHON}-{sequence:08d}".encode()
        future = producer.send(KAFKA_PYTHON, value, partition=0)
        future.add_callback(
            lambda metadata, value=value: history.acknowledged.__setitem__(value, metadata.offset)
        )
        future.add_errback(lambda error: history.failures.append(repr(error)))
        history.sent.append(value)
        sequence += 1
        time.sleep(0.002)


def test_leader_kills_lose_and_duplicate_nothing(cluster: Cluster) -> None:
    for topic in TOPICS:
        cluster.create_topic(topic, configs={"min.insync.replicas": "2"})
    cluster.wait_for(lambda: _stable(cluster), what="ISR of 3 everywhere")
    histories = {topic: History() for topic in TOPICS}
    confluent = _confluent(cluster, acks_all=True)
    acks_one = _confluent(cluster, acks_all=False)
    kafka_python = KafkaProducer(
        bootstrap_servers=cluster.bootstrap().split(","), enable_idempotence=True, acks="all",
        linger_ms=5, retry_backoff_ms=100, metadata_max_age_ms=1000,
        request_timeout_ms=10_000, delivery_timeout_ms=120_000,
    )
    stop = threading.Event()
    writers: list[tuple[str, Callable[[], None]]] = [
        (CONFLUENT, lambda: _confluent_loop(confluent, CONFLUENT, histories[CONFLUENT], stop)),
        (ACKS_ONE, lambda: _confluent_loop(acks_one, ACKS_ONE, histories[ACKS_ONE], stop)),
        (KAFKA_PYTHON, lambda: _kafka_python_loop(kafka_python, histories[KAFKA_PYTHON], stop)),
    ]
    threads = [threading.Thread(target=target, name=name) for name, target in writers]
    for thread in threads:
        thread.start()
    started = time.monotonic()
    resumed_after: list[float] = []  # seconds from a kill to the killed topic's next ack
    try:
        for kill in range(KILLS):
            time.sleep(0.5)
            topic = TOPICS[kill % len(TOPICS)]
            leader, _, _ = cluster.wait_for_partition(
                topic, lambda view: cluster.brokers[view[0]].alive(), what="the leader")
            before = {t: len(h.acknowledged) for t, h in histories.items()}
            killed_at = time.monotonic()
            cluster.kill(leader)
            cluster.wait_for(
                lambda leader=leader, topic=topic:
                    cluster.partition_state(topic)[0] not in (-1, leader),
                what="a new leader",
            )
            if topic in (CONFLUENT, KAFKA_PYTHON):  # reported, never asserted
                cluster.wait_for(
                    lambda topic=topic, before=before: len(histories[topic].acknowledged)
                    > before[topic], what=f"{topic} writes to resume")
                resumed_after.append(time.monotonic() - killed_at)
            cluster.start(leader)
            cluster.wait_for(lambda: _stable(cluster), timeout_s=60, what="the ISR to heal")
            for name in (CONFLUENT, KAFKA_PYTHON):
                cluster.wait_for(
                    lambda name=name, before=before: len(histories[name].acknowledged)
                    > before[name], what=f"{name} writes to resume")
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        remaining = confluent.flush(120) + acks_one.flush(30)
        kafka_python.flush(timeout=120)
        kafka_python.close(timeout=10)
    elapsed = time.monotonic() - started
    assert remaining == 0
    for name in (CONFLUENT, KAFKA_PYTHON):
        assert not histories[name].failures, histories[name].failures[:5]
    cluster.wait_for(lambda: _stable(cluster), what="a final ISR of 3")
    # Writes stopped: wait until every follower has fetched the leader's last batches (an acks=1
    # tail can still be in flight after the ISR is whole). Segment appends are plain writes, so
    # the files show what each running broker has appended.
    cluster.wait_for(lambda: _caught_up(cluster), timeout_s=60, what="every replica caught up")
    for node_id in cluster.brokers:
        cluster.kill(node_id, signal.SIGTERM)
    verdicts: dict[str, Verdict] = {}
    for topic, history in histories.items():
        replicas = {n: replica_log(b.data_dir, topic) for n, b in cluster.brokers.items()}
        verdicts[topic] = check(history.acknowledged, history.sent, replicas)
        assert len({len(log) for log in replicas.values()}) == 1, topic  # all caught up
        assert verdicts[topic].inconsistent_offsets == 0, (topic, verdicts[topic])
    print(f"{KILLS} leader kills in {elapsed:.0f} s: "
          + "; ".join(f"{t}: {v}" for t, v in verdicts.items())
          + f"; acks=1 failures: {len(histories[ACKS_ONE].failures)}"
          + (f"; acks=all writes resumed after a kill in median "
             f"{statistics.median(resumed_after):.1f} s, max {max(resumed_after):.1f} s"
             if resumed_after else ""))
    for name in (CONFLUENT, KAFKA_PYTHON):
        assert verdicts[name].acknowledged > 0
        assert verdicts[name].ok(), (name, verdicts[name])
    assert verdicts[ACKS_ONE].acknowledged > 0  # its losses are counted above, not forbidden
