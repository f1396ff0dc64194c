"""Replication under failure: a stopped follower, ISR below min.insync.replicas.

Real ZooKeeper, three real `tidelog serve --zookeeper` processes, confluent-kafka clients.
Leader kills are in test_leader_kills.py, leader isolation in test_isolation.py.
"""

from __future__ import annotations

import signal

from confluent_kafka import KafkaError, Producer

from .harness import LAG_TIME_MAX_MS, Cluster, replica_log

TOPIC = "jepsen"


def _wait_stable(cluster: Cluster, isr_size: int) -> tuple[int, list[int], list[int]]:
    """(leader, replicas, isr) of one Metadata answer with a live leader and the ISR size."""
    return cluster.wait_for_partition(
        TOPIC, lambda view: cluster.brokers[view[0]].alive() and len(view[2]) == isr_size,
        what=f"ISR of {isr_size}")


def _producer(cluster: Cluster) -> Producer:
    # No short topic.metadata.refresh.interval.ms here: librdkafka's metadata.max.age.ms
    # defaults to 3 times it, and a refresh it sends to a SIGSTOPped broker (whose connection
    # stays up) waits out socket.timeout.ms (60 s), so with 1 s the topic's metadata expired
    # after 3 s, and every message produced meanwhile waited, unpartitioned, for the stopped
    # broker to answer (librdkafka debug: "Topic jepsen metadata information timed out",
    # MetadataResponse rtt 33023 ms, "100/100 messages were partitioned" only after SIGCONT).
    return Producer({
        "bootstrap.servers": cluster.bootstrap(),
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 120_000,
        "retry.backoff.ms": 100,
    })


def test_stopped_follower_leaves_isr_and_rejoins(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, configs={"min.insync.replicas": "2"})
    leader, replicas, _ = _wait_stable(cluster, 3)
    follower = next(b for b in replicas if b != leader)
    producer = _producer(cluster)
    # Its producer id and the partition's leader before the follower stops: librdkafka sends
    # those first requests to any broker, and one parked on the stopped broker outlasts the
    # flush below (seen: InitProducerId retried on the stopping follower).
    warm_up: list[object] = []
    producer.produce(TOPIC, b"warm-up", on_delivery=lambda e, m: warm_up.append(e))
    assert producer.flush(30) == 0 and warm_up == [None]
    cluster.signal(follower, signal.SIGSTOP)
    try:
        # Asked of the leader: a Metadata request to the stopped follower (any broker may be
        # picked from the bootstrap list) would only time out.
        leader_admin = cluster.admin_of(cluster.brokers[leader].address)
        cluster.wait_for(
            lambda: follower not in leader_admin.list_topics(TOPIC, timeout=10)
            .topics[TOPIC].partitions[0].isrs,
            timeout_s=max(30, LAG_TIME_MAX_MS / 1000 * 5), what="the ISR to shrink",
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
    leader, replicas, _ = _wait_stable(cluster, 3)
    follower = next(b for b in replicas if b != leader)
    cluster.kill(follower)
    cluster.wait_for(lambda: len(cluster.partition_state(TOPIC)[2]) == 2, what="ISR of 2")
    # retries=0: the first answer is final; the timeout only covers a slow start under load.
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                         "message.timeout.ms": 20_000, "retries": 0})
    errors: list[KafkaError | None] = []
    producer.produce(TOPIC, b"refused", on_delivery=lambda e, m: errors.append(e))
    producer.flush(30)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS
    leader_dir = cluster.brokers[leader].data_dir
    cluster.kill(leader, signal.SIGTERM)
    assert b"refused" not in replica_log(leader_dir, TOPIC).values()  # nothing appended
