"""Fetch sessions (KIP-227) on and off: one consumer of 1,000 partitions, in one run (<1 min).

    .venv/bin/python bench/fetch_sessions_bench.py [--partitions 1000] [--per-partition 50]
                                                   [--tail-s 5]

Per mode, a fresh `tidelog serve` (sessions on: the default 1000 cache slots; off:
`max.incremental.fetch.session.cache.slots=0`) and a topic of `--partitions` partitions
filled with `--per-partition` 100-byte records each (confluent-kafka producer). Then a
kafka-python consumer (the Python client that keeps fetch sessions; librdkafka does not)
assigned every partition:
- backlog: reads everything from offset 0 (twice: the first read, untimed, warms the client),
  msg/s and broker CPU seconds of the second.
- idle tail: `--tail-s` seconds caught up with nothing new (each Fetch long-polls
  `fetch_max_wait_ms=50`): broker CPU per second and per Fetch, Fetch requests per second by
  kind (from /metrics).
Correctness: the backlog arrives exactly (count), the tail receives nothing.
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, TopicPartition

from tidelog.cluster.zookeeper_server import free_port

TOPIC = "sessions"


class Broker:
    def __init__(self, data_dir: Path, slots: int) -> None:
        self.metrics_port = free_port()
        self.process = subprocess.Popen(
            [
                sys.executable, "-m", "tidelog.cli.main", "serve", "--data-dir", str(data_dir),
                "--listen", "127.0.0.1:0", "--log-level", "WARNING",
                "--metrics", f"127.0.0.1:{self.metrics_port}",
                "--set", f"max.incremental.fetch.session.cache.slots={slots}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode()
        if "ready on" not in line:
            self.stop()
            raise RuntimeError(f"broker did not start: {line!r}")
        self.bootstrap = line.rsplit(" ", 1)[1].strip()

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def fetch_kinds(self) -> dict[str, float]:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        kinds: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("tidelog_fetch_requests_total{"):
                kind = line.split('kind="', 1)[1].split('"', 1)[0]
                kinds[kind] = float(line.split()[-1])
        return kinds

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait()


def produce(bootstrap: str, partitions: int, per_partition: int, tag: str) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    value = b"x" * 100
    for partition in range(partitions):  # partition-major: one batch per partition
        for _ in range(per_partition):
            while True:
                try:
                    producer.produce(TOPIC, value, key=tag.encode(), partition=partition)
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.poll(0)
    if producer.flush(60):
        raise RuntimeError("produce did not finish")
    return partitions * per_partition


def consume(consumer: KafkaConsumer, count: int, timeout_s: float) -> int:
    received = 0
    deadline = time.monotonic() + timeout_s
    while received < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"received {received} of {count}")
        for records in consumer.poll(timeout_ms=200, max_records=100_000).values():
            received += len(records)
    if received != count:
        raise RuntimeError(f"received {received}, expected {count}")
    return received


def note(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def run_mode(slots: int, args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="tidelog-sessions-") as tmp:
        broker = Broker(Path(tmp), slots)
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic(TOPIC, num_partitions=args.partitions)])[TOPIC].result(
                60
            )
            note("topic created")
            backlog = produce(broker.bootstrap, args.partitions, args.per_partition, "backlog")
            consumer = KafkaConsumer(
                bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                fetch_max_wait_ms=50, max_partition_fetch_bytes=1 << 20,
                fetch_max_bytes=50 << 20,
            )  # fmt: skip
            assigned = [TopicPartition(TOPIC, index) for index in range(args.partitions)]
            consumer.assign(assigned)
            consumer.seek_to_beginning(*assigned)
            note("backlog produced")
            consume(consumer, backlog, 60)  # untimed: warms the client (the first mode ran cold)
            consumer.seek_to_beginning(*assigned)
            cpu0, wall0 = broker.cpu_s(), time.perf_counter()
            consume(consumer, backlog, 60)
            backlog_s = time.perf_counter() - wall0
            backlog_cpu = broker.cpu_s() - cpu0
            note("backlog read")
            # Idle tail: caught up, nothing new; every Fetch long-polls fetch.max.wait.ms.
            kinds0, cpu1, wall1 = broker.fetch_kinds(), broker.cpu_s(), time.perf_counter()
            while time.perf_counter() - wall1 < args.tail_s:
                if consumer.poll(timeout_ms=100):
                    raise RuntimeError("records in the idle tail")
            tail_s = time.perf_counter() - wall1
            tail_cpu = broker.cpu_s() - cpu1
            kinds1 = broker.fetch_kinds()
            consumer.close()
            note("tail done")
            fetches = {k: kinds1.get(k, 0) - kinds0.get(k, 0) for k in kinds1}
            return {
                "backlog_msgs": backlog,
                "backlog_rate": backlog / backlog_s,
                "backlog_cpu_s": backlog_cpu,
                "tail_cpu_per_s": tail_cpu / tail_s,
                "tail_fetch_per_s": sum(fetches.values()) / tail_s,
                "tail_cpu_ms_per_fetch": 1000 * tail_cpu / max(1.0, sum(fetches.values())),
                "tail_incremental": fetches.get("incremental", 0),
                "tail_full": fetches.get("full", 0) + fetches.get("sessionless", 0),
            }
        finally:
            broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--per-partition", type=int, default=50)
    parser.add_argument("--tail-s", type=float, default=5.0)
    args = parser.parse_args()
    results = {"on": run_mode(1000, args), "off": run_mode(0, args)}
    load = os.getloadavg()[0]
    print(f"\n{platform.machine()}, {os.cpu_count()} cores, load average {load:.1f}, "
          f"{args.partitions} partitions, {args.per_partition} records each\n")
    print("| figure | sessions on | sessions off (slots=0) |")
    print("|---|---|---|")
    rows = [
        ("backlog read, msg/s", "backlog_rate", "{:,.0f}"),
        ("backlog read, broker CPU s", "backlog_cpu_s", "{:.2f}"),
        ("idle tail, broker CPU s per s", "tail_cpu_per_s", "{:.3f}"),
        ("idle tail, Fetch requests per s", "tail_fetch_per_s", "{:.1f}"),
        ("idle tail, broker CPU ms per Fetch", "tail_cpu_ms_per_fetch", "{:.1f}"),
        ("idle tail, incremental / full fetches", None, ""),
    ]
    for label, key, fmt in rows:
        if key is None:
            cells = [
                f"{r['tail_incremental']:.0f} / {r['tail_full']:.0f}" for r in results.values()
            ]
        else:
            cells = [fmt.format(r[key]) for r in results.values()]
        print(f"| {label} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
