"""Delayed delivery on a 3-broker cluster (docs/delivery.md, Cluster mode): the replicated
`__tidelog_timer`, its deliverer on the timer partition's leader, produce and delivery across
brokers, and SIGKILLs of the timer partition's leader and of target leaders during a run.

Real ZooKeeper, three real `tidelog serve --zookeeper` processes (tests/replication/harness.py),
confluent-kafka producers and consumers. One cluster per module.

`test_kills_lose_and_duplicate_nothing`: TIMER_CLUSTER_RECORDS records (default 2,000) with
random delays of 0-10 s over 4 partitions, produced over 8 s by a producer without retries
(acks=all), while the timer partition's leader, a target leader and the timer leader again are
SIGKILLed and restarted. Every acknowledged record is read exactly once, none before its due
time, key/value/headers/timestamp intact; a record whose produce failed is read at most once.
Lateness p50/p99 is printed, not asserted (the outages dominate it).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer

from replication.harness import Cluster
from tidelog.cli.main import main as cli
from tidelog.cluster.zookeeper_server import ZooKeeperServer, free_port
from timers.helpers import DELAY_TOPIC, Reader, now_ms

TIMER_TOPIC = "__tidelog_timer"
TOPIC = "cluster-delays"
PARTITIONS = 4
RECORDS = int(os.environ.get("TIMER_CLUSTER_RECORDS", "2000"))
MAX_DELAY_MS = 10_000
PRODUCE_SECONDS = 8.0
SETTINGS = (
    "auto.create.topics.enable=false",
    "tidelog.timer.log.num.partitions=2",
    "tidelog.timer.log.replication.factor=3",
    "tidelog.timer.log.min.isr=2",
)


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Cluster]:
    chroot = f"/tidelog-timers-{uuid.uuid4().hex[:12]}"
    root: Path = tmp_path_factory.mktemp("timer-cluster")
    cluster = Cluster(zookeeper.connect_string + chroot, root, SETTINGS)
    try:
        for node_id in (1, 2, 3):
            broker = cluster.add(node_id)
            broker.metrics = f"127.0.0.1:{free_port()}"
            cluster.start(node_id)
        cluster.create_topic(TOPIC, PARTITIONS, 3,
                             {"min.insync.replicas": "2", **DELAY_TOPIC})
        for partition in range(PARTITIONS):
            cluster.wait_for_partition(TOPIC, lambda view: len(view[2]) == 3, partition)
        yield cluster
    finally:
        cluster.stop_all()
    tracebacks = [
        f"{b.log_path.name}: {line}" for b in cluster.brokers.values() if b.log_path.exists()
        for line in b.log_path.read_text(errors="replace").splitlines() if "Traceback" in line
    ]
    if tracebacks:
        pytest.fail("a broker logged a traceback:\n" + "\n".join(tracebacks))


def _producer(cluster: Cluster, **extra: object) -> Producer:
    return Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                     "linger.ms": 5, "enable.idempotence": False, **extra})


def _timer_leader(cluster: Cluster, partition: int) -> int:
    view = cluster.wait_for_partition(TIMER_TOPIC, lambda view: len(view[2]) >= 2, partition)
    return view[0]


def test_delayed_records_cross_brokers_and_timers_list(cluster: Cluster) -> None:
    """Records for every partition (led by different brokers) go to the one timer partition
    of the topic, wherever it is led, and come back due; `tidelog timers` on each broker's
    metrics shows the pending ones on the timer partition's leader."""
    producer = _producer(cluster)
    errors: list[object] = []
    base = now_ms()
    for index in range(8):
        producer.produce(TOPIC, f"v{index}".encode(), f"k{index}".encode(),
                         partition=index % PARTITIONS,
                         headers=[("TIMER_DELAY_MS", b"3000" if index < 4 else b"60000"),
                                  ("h", str(index).encode())],
                         on_delivery=lambda error, _m: errors.append(error) if error else None)
    assert producer.flush(30) == 0 and not errors, errors
    leader = cluster.wait_value(
        lambda: _listing_rows(cluster), lambda rows: sum(r[2] for r in rows) == 8,
        30, "8 records pending in some broker's listing")
    assert {row[1] for row in leader} == set(range(PARTITIONS))
    reader = Reader(cluster.bootstrap(), TOPIC, PARTITIONS)
    try:
        records = reader.read_count(4, timeout_s=30)
        assert sorted(r.key for r in records) == [b"k0", b"k1", b"k2", b"k3"]
        for record in records:
            assert record.received_ms >= base + 3000
            index = int(record.key[1:])
            assert record.value == f"v{index}".encode()
            assert record.headers[:2] == [("TIMER_DELAY_MS", b"3000"),
                                          ("h", str(index).encode())]
            assert record.header("TIMER_ENQUEUE_MS") is not None
    finally:
        reader.close()
    cluster.wait_value(lambda: _listing_rows(cluster),
                       lambda rows: sum(r[2] for r in rows) == 4, 30, "4 still pending")


def _listing_rows(cluster: Cluster) -> list[tuple[str, int, int]]:
    """(topic, partition, pending) from `tidelog timers describe --json` over every live
    broker's metrics endpoint (each reports the timer partitions it leads)."""
    endpoints = ",".join(b.metrics for b in cluster.brokers.values() if b.alive())
    result = CliRunner().invoke(cli, ["timers", "describe", TOPIC, "--metrics", endpoints,
                                      "--json"])
    assert result.exit_code == 0, result.output
    return [(TOPIC, int(row["partition"]), int(row["pending"]))
            for row in json.loads(result.output)["partitions"]]
