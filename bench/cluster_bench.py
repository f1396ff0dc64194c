"""Replicated benchmark: the seed-1p produce workload with acks=all, 3 brokers RF 3 beside 1.

    .venv/bin/python bench/cluster_bench.py [--messages 500000] [--rounds 3]

One real ZooKeeper (Debian's) for the run. Each round, interleaved:
- single: a fresh `tidelog serve` without --zookeeper, topic of 1 partition (RF 1);
- cluster: three fresh `tidelog serve --zookeeper` brokers in a new chroot, topic of 1
  partition, replication factor 3, min.insync.replicas=2.
Workload: values 200-300 bytes from a pre-generated pool, no key, one partition, acks=all,
compression none, confluent-kafka `produce_batch`; clock from the first send until flush()
returns (the last acknowledgement). Correctness: the leader's high watermark equals the
message count after each run (ListOffsets through the client). Printed as a Markdown table:
median and min-max of the rounds, and the cluster/single ratio per round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from broker_bench import PRODUCER_CONFIG, Server, queue_batch, value_pool
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.cluster.zookeeper_server import ZooKeeperConfig, ZooKeeperServer, free_port

TOPIC = "seed-1p"
CONFIG = {**PRODUCER_CONFIG, "acks": "all"}  # the broker bench's producer, acks=all


def serve(data_dir: Path, zookeeper: str | None = None, node_id: int = 0) -> Server:
    port = free_port() if zookeeper else 0
    args = [
        sys.executable, "-m", "tidelog.cli.main", "serve", "--data-dir", str(data_dir),
        "--listen", f"127.0.0.1:{port}", "--log-level", "WARNING", "--metrics", "off",
    ]  # fmt: skip
    if zookeeper:
        args += ["--zookeeper", zookeeper, "--node-id", str(node_id),
                 "--set", "zookeeper.session.timeout.ms=6000"]
    return Server(args)


def create_topic(bootstrap: str, replication: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"min.insync.replicas": "2"} if replication > 1 else {}
    admin.create_topics([NewTopic(TOPIC, 1, replication, config=configs)])[TOPIC].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        partition = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions.get(0)
        if partition is not None and partition.leader >= 0 and len(partition.isrs) == replication:
            return
        time.sleep(0.2)
    raise RuntimeError("topic not ready")


def produce(bootstrap: str, count: int, pool: list[bytes]) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, **CONFIG})
    producer.list_topics(TOPIC, timeout=10)
    chunk = [{"value": pool[i % len(pool)]} for i in range(10_000)]
    start = time.perf_counter()
    remaining = count
    while remaining:
        part = chunk if remaining >= len(chunk) else chunk[:remaining]
        queue_batch(producer, TOPIC, part)
        producer.poll(0)
        remaining -= len(part)
    left = producer.flush(300)
    elapsed = time.perf_counter() - start
    if left:
        raise RuntimeError(f"{left} messages undelivered")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-check"})
    _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
    consumer.close()
    if high != count:
        raise RuntimeError(f"high watermark {high} != {count} produced")
    return elapsed


def single_round(root: Path, count: int, pool: list[bytes]) -> float:
    server = serve(root / "single")
    try:
        create_topic(server.address, 1)
        return count / produce(server.address, count, pool)
    finally:
        server.stop()


def cluster_round(root: Path, zookeeper: ZooKeeperServer, count: int, pool: list[bytes]) -> float:
    connect = f"{zookeeper.connect_string}/bench-{uuid.uuid4().hex[:8]}"
    servers: list[Server] = []
    try:
        for node_id in (1, 2, 3):
            servers.append(serve(root / f"broker-{node_id}", connect, node_id))
        bootstrap = ",".join(s.address for s in servers)
        create_topic(bootstrap, 3)
        return count / produce(bootstrap, count, pool)
    finally:
        for server in servers:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    pool = value_pool()
    mean_value = statistics.fmean(len(v) for v in pool)
    singles: list[float] = []
    clusters: list[float] = []
    with tempfile.TemporaryDirectory(prefix="tidelog-cluster-bench-") as tmp:
        root = Path(tmp)
        (root / "zk").mkdir()
        zookeeper = ZooKeeperServer(ZooKeeperConfig(data_dir=root / "zk", port=free_port()))
        zookeeper.start()
        try:
            for index in range(arguments.rounds):
                round_dir = root / f"round-{index}"
                singles.append(single_round(round_dir, arguments.messages, pool))
                clusters.append(cluster_round(round_dir, zookeeper, arguments.messages, pool))
                print(f"round {index + 1}: single {singles[-1]:,.0f} msg/s, "
                      f"cluster {clusters[-1]:,.0f} msg/s, "
                      f"ratio {clusters[-1] / singles[-1]:.2f}", flush=True)
        finally:
            zookeeper.stop()
    ratios = [c / s for c, s in zip(clusters, singles, strict=True)]

    def row(name: str, values: list[float]) -> str:
        median = statistics.median(values)
        return (f"| {name} | {median:,.0f} | {min(values):,.0f}-{max(values):,.0f} | "
                f"{median * mean_value / 1e6:.1f} |")

    print(f"\n{arguments.messages:,} messages x {arguments.rounds} rounds, acks=all\n")
    print("| setup | produce msg/s (median) | min-max | MB/s |")
    print("|---|---|---|---|")
    print(row("1 broker (no ZooKeeper)", singles))
    print(row("3 brokers, RF 3, min.insync.replicas=2", clusters))
    print(f"\ncluster/single per round: {', '.join(f'{r:.2f}' for r in ratios)}")


if __name__ == "__main__":
    main()
