"""D7 for acks=all: every ISR member has fsynced an acknowledged write.

Real ZooKeeper, three real brokers with /metrics on. What this proves and what it does not:
- each broker's group-commit thread ran fsyncs while acks=all writes were acknowledged, on the
  followers too (they fsync fetched data before their next fetch reports it to the leader);
  the topic is in the default `pagecache` durability, where nothing else fsyncs per write;
- every acknowledged record is in every replica's log at the same offset, read from the files
  after all three brokers were SIGKILLed at once.
SIGKILL keeps the page cache, so the second point alone would hold without fsync: power loss
is not simulated (that would need a VM or dm-flakey), and the fsync *order* against the
acknowledgement is shown by the code path (Replication.wait_for_high_watermark and the
fetcher's wait_durable before its next fetch), not by the test.
"""

from __future__ import annotations

import signal
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tidelog.cluster.zookeeper_server import ZooKeeperServer, free_port

from .harness import Cluster, replica_log

TOPIC = "durable"


@pytest.fixture
def metered_cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(zookeeper.connect_string + f"/tidelog-d7-{uuid.uuid4().hex[:12]}", tmp_path)
    try:
        for node_id in (1, 2, 3):
            cluster.add(node_id).metrics = f"127.0.0.1:{free_port()}"
            cluster.start(node_id)
        yield cluster
    finally:
        cluster.stop_all()


def _fsyncs(metrics_address: str) -> float:
    with urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    for line in text.splitlines():
        if line.startswith("tidelog_fsync_latency_seconds_count"):
            return float(line.split()[-1])
    raise AssertionError("no fsync histogram in /metrics")


def test_acks_all_write_is_fsynced_and_on_every_isr_member(metered_cluster: Cluster) -> None:
    cluster = metered_cluster
    cluster.create_topic(TOPIC, configs={"min.insync.replicas": "2"})
    cluster.wait_for(lambda: len(cluster.partition_state(TOPIC)[2]) == 3, what="ISR of 3")
    before = {b.node_id: _fsyncs(b.metrics) for b in cluster.brokers.values()}
    producer = Producer({
        "bootstrap.servers": cluster.bootstrap(), "acks": "all", "enable.idempotence": True,
        "linger.ms": 0,
    })
    acknowledged: dict[int, bytes] = {}

    def delivered(error: object, message: object) -> None:
        assert error is None, error
        acknowledged[message.offset()] = message.value()  # type: ignore[attr-defined]

    for round_index in range(20):  # separate flushes: many fetch rounds on every follower
        for i in range(5):
            producer.produce(TOPIC, f"r{round_index}-{i}".encode(), on_delivery=delivered)
        assert producer.flush(30) == 0
    assert len(acknowledged) == 100
    # A loaded follower can leave the ISR for a moment (replica.lag.time.max.ms is 2 s here);
    # back in it, it has caught up again.
    cluster.wait_for(lambda: sorted(cluster.partition_state(TOPIC)[2]) == [1, 2, 3],
                     what="ISR of 3")
    isr = [1, 2, 3]
    after = {b.node_id: _fsyncs(b.metrics) for b in cluster.brokers.values()}
    for node_id in isr:
        assert after[node_id] > before[node_id], f"broker {node_id} never fsynced"

    for node_id in (1, 2, 3):
        cluster.kill(node_id, signal.SIGKILL)
    for node_id in isr:
        copy = replica_log(cluster.brokers[node_id].data_dir, TOPIC)
        missing = {o: v for o, v in acknowledged.items() if copy.get(o) != v}
        assert not missing, f"broker {node_id} lacks acknowledged records {sorted(missing)[:5]}"
