"""Broker benchmark: the seed-1p workload with confluent-kafka, and the broker-only figure.

    .venv/bin/python bench/broker_bench.py [--messages 4000000] [--rounds 3] [--only produce,...]

Per round, each against a fresh `tidelog serve` (stdlib loop, pagecache durability):
- produce: 4,000,000 messages, values 200-300 bytes drawn from a pre-generated pool, no key,
  one partition, acks=1, compression none. Clock from the first send until flush() returns,
  i.e. the last delivery report. Two client modes: `produce_batch` and per-message `produce`.
- consume: the stored backlog read by assign from offset 0; every value's length is summed.
  Correctness: message count and total value bytes equal what was produced.
- broker-only: a raw-socket load generator sends pre-built 1 MiB Produce v9 requests (acks=1,
  8 in flight) to the broker, then the same frames to two bare asyncio sinks in their own
  process that answer each frame with 8 bytes: asyncio streams (WORKLOAD.md's ceiling) and a
  BufferedProtocol that copies nothing (the tougher ceiling); ratios per round.
Results are printed as a Markdown table (median and min-max of the rounds).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from broker_raw import SINK, SINK_BUFFERED, load_generator, produce_frame
from confluent_kafka import Consumer, Producer, TopicPartition

ANCHOR_PRODUCE = 331_198
ANCHOR_CONSUME = 255_983
TOPIC = "seed-1p"
REPO = Path(__file__).resolve().parent.parent


# --- processes ---------------------------------------------------------------------------------
class Server:
    """A subprocess that prints `... ready on HOST:PORT`; stopped by PID."""

    def __init__(self, args: list[str]) -> None:
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode()
        if "ready on" not in line:
            self.stop()
            raise RuntimeError(f"server did not start: {line!r}")
        self.address = line.rsplit(" ", 1)[1].strip()
        host, _, port = self.address.rpartition(":")
        self.host, self.port = host, int(port)

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss_mib(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait()


def start_broker(data_dir: Path) -> Server:
    return Server(
        [
            sys.executable, "-m", "tidelog.cli.main", "serve", "--data-dir", str(data_dir),
            "--listen", "127.0.0.1:0", "--log-level", "WARNING",
            # Kafka's own benchmarks set this to 0: no 3 s wait for more members to join.
            "--set", "group.initial.rebalance.delay.ms=0",
        ]
    )  # fmt: skip


# --- seed workload -----------------------------------------------------------------------------
def value_pool(seed: int = 1, size: int = 4096) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(rng.randint(200, 300)) for _ in range(size)]


PRODUCER_CONFIG = {
    "acks": "1",
    "linger.ms": 20,
    "batch.size": 1_000_000,
    "batch.num.messages": 1_000_000,
    "compression.type": "none",
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 2_000_000,
    "message.max.bytes": 1_000_000,
    "enable.idempotence": False,
}


def queue_batch(producer: Producer, topic: str, messages: list[dict[str, bytes]]) -> None:
    """produce_batch every message to partition 0, waiting out a full local queue."""
    pending = messages
    while pending:
        try:
            queued = producer.produce_batch(topic, pending, partition=0)
        except BufferError:
            producer.poll(0.005)
            continue
        if queued == len(pending):
            return
        # A full local queue fails the tail of the batch: librdkafka marks those messages
        # with "_error"; wait for deliveries and queue just those again.
        failed = [message for message in pending if "_error" in message]
        for message in failed:
            del message["_error"]
        if len(failed) != len(pending) - queued:
            raise RuntimeError(f"produce_batch queued {queued} of {len(pending)}")
        producer.poll(0.005)
        pending = failed


def produce_batch_mode(bootstrap: str, count: int, pool: list[bytes]) -> tuple[float, int]:
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG})
    producer.list_topics(TOPIC, timeout=10)  # metadata (auto-creates) before the clock
    chunk = [{"value": pool[i % len(pool)]} for i in range(10_000)]
    sent_bytes = 0
    chunk_bytes = sum(len(item["value"]) for item in chunk)
    start = time.perf_counter()
    remaining = count
    while remaining:
        part = chunk if remaining >= len(chunk) else chunk[:remaining]
        queue_batch(producer, TOPIC, part)
        producer.poll(0)
        remaining -= len(part)
        sent_bytes += chunk_bytes if part is chunk else sum(len(i["value"]) for i in part)
    left = producer.flush(120)
    elapsed = time.perf_counter() - start
    if left:
        raise RuntimeError(f"{left} messages undelivered")
    return elapsed, sent_bytes


def produce_per_message_mode(bootstrap: str, count: int, pool: list[bytes]) -> tuple[float, int]:
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG})
    producer.list_topics(TOPIC, timeout=10)
    produce = producer.produce
    size = len(pool)
    sent_bytes = 0
    start = time.perf_counter()
    for index in range(count):
        value = pool[index % size]
        try:
            produce(TOPIC, value, partition=0)
        except BufferError:
            producer.poll(0.005)
            produce(TOPIC, value, partition=0)
        sent_bytes += len(value)
    left = producer.flush(120)
    elapsed = time.perf_counter() - start
    if left:
        raise RuntimeError(f"{left} messages undelivered")
    return elapsed, sent_bytes


def consume_assign(bootstrap: str, count: int) -> tuple[float, int, int]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 64 << 20,
            "max.partition.fetch.bytes": 16 << 20,
            "queued.min.messages": 500_000,
            "queued.max.messages.kbytes": 1 << 20,
            # librdkafka 2.x waits this long (default 1000 ms) before fetching again once its
            # queue passed queued.min.messages: with the default, the consumer idles ~1 s in 4.
            "fetch.queue.backoff.ms": 1,
            "fetch.wait.max.ms": 10,
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen = 0
    value_bytes = 0
    start = time.perf_counter()
    deadline = start + 300
    while seen < count and time.perf_counter() < deadline:
        # Ask for no more than what is left: consume() waits for a full batch or the timeout.
        for message in consumer.consume(num_messages=min(100_000, count - seen), timeout=1.0):
            if message.error():
                raise RuntimeError(str(message.error()))
            value_bytes += len(message.value())
            seen += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed, seen, value_bytes


def consume_group(
    bootstrap: str, count: int, group: str | None = None
) -> tuple[float, int, int, int]:
    """The workload's consumer: subscribe in a group, sync commit after every poll batch.
    Returns (seconds, messages, value bytes, commits)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group or f"bench-group-{time.time_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.max.bytes": 64 << 20,
            "max.partition.fetch.bytes": 16 << 20,
            "queued.min.messages": 500_000,
            "queued.max.messages.kbytes": 1 << 20,
            "fetch.queue.backoff.ms": 1,
            "fetch.wait.max.ms": 10,
        }
    )
    seen = value_bytes = commits = 0
    start = time.perf_counter()
    consumer.subscribe([TOPIC])
    deadline = start + 300
    while seen < count and time.perf_counter() < deadline:
        batch = consumer.consume(num_messages=min(100_000, count - seen), timeout=1.0)
        for message in batch:
            if message.error():
                raise RuntimeError(str(message.error()))
            value_bytes += len(message.value())
            seen += 1
        if batch:
            committed = consumer.commit(asynchronous=False)
            commits += 1
            if committed is None or committed[0].offset != batch[-1].offset() + 1:
                raise RuntimeError(f"commit did not cover the batch: {committed}")
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed, seen, value_bytes, commits


def produce_latency(bootstrap: str, rate: float, seconds: float, pool: list[bytes]) -> list[float]:
    """Produce at a fixed offered `rate` (msg/s); delivery latency in ms of every 50th message."""
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG, "linger.ms": 5})
    producer.list_topics(TOPIC, timeout=10)
    latencies: list[float] = []

    def sampled(sent_at: float) -> Callable[[object, object], None]:
        def on_delivery(error: object, _message: object) -> None:
            if error is None:
                latencies.append((time.perf_counter() - sent_at) * 1000)

        return on_delivery

    start = time.perf_counter()
    index = 0
    total = int(rate * seconds)
    while index < total:
        due = int((time.perf_counter() - start) * rate)  # messages that should have been sent
        while index < min(due, total):
            value = pool[index % len(pool)]
            if index % 50 == 0:
                producer.produce(
                    TOPIC, value, partition=0, on_delivery=sampled(time.perf_counter())
                )
            else:
                producer.produce(TOPIC, value, partition=0)
            index += 1
        producer.poll(0.0005)
    if producer.flush(60):
        raise RuntimeError("latency run left messages undelivered")
    return sorted(latencies)


# --- driver ------------------------------------------------------------------------------------
def summary(values: list[float]) -> str:
    digits = 2 if statistics.median(values) < 10 else 0
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:,.{digits}f} ({low:,.{digits}f}-{high:,.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=4_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="batch,permessage,consume,group,latency,brokeronly")
    parser.add_argument("--raw-requests", type=int, default=400)
    parser.add_argument(
        "--shm-too",
        action="store_true",
        help="also run broker-only with the data dir on /dev/shm (no filesystem write cost)",
    )
    options = parser.parse_args()
    parts = set(options.only.split(","))
    pool = value_pool()
    results: dict[str, list[float]] = {}

    def record(name: str, value: float) -> None:
        results.setdefault(name, []).append(value)
        print(f"  {name}: {value:,.1f}", flush=True)

    for round_index in range(options.rounds):
        print(f"round {round_index + 1}", flush=True)
        modes: list[tuple[str, Callable[[str, int, list[bytes]], tuple[float, int]]]] = []
        if "batch" in parts:
            modes.append(("produce_batch", produce_batch_mode))
        if "permessage" in parts:
            modes.append(("produce", produce_per_message_mode))
        for mode_name, mode in modes:
            with tempfile.TemporaryDirectory(prefix="tidelog-bench-") as data_dir:
                broker = start_broker(Path(data_dir))
                try:
                    cpu_before = broker.cpu_seconds()
                    elapsed, sent_bytes = mode(broker.address, options.messages, pool)
                    broker_cpu = broker.cpu_seconds() - cpu_before
                    record(f"{mode_name} msg/s", options.messages / elapsed)
                    record(f"{mode_name} MB/s", sent_bytes / elapsed / 1e6)
                    record(f"{mode_name} broker CPU s/M msgs", broker_cpu / options.messages * 1e6)
                    if "consume" in parts and mode_name == modes[0][0]:
                        cpu_before = broker.cpu_seconds()
                        elapsed, seen, value_bytes = consume_assign(
                            broker.address, options.messages
                        )
                        if seen != options.messages or value_bytes != sent_bytes:
                            raise RuntimeError(
                                f"consumed {seen} msgs/{value_bytes} B, produced "
                                f"{options.messages}/{sent_bytes}"
                            )
                        record("consume msg/s", seen / elapsed)
                        record(
                            "consume broker CPU s/M msgs",
                            (broker.cpu_seconds() - cpu_before) / seen * 1e6,
                        )
                    if "group" in parts and mode_name == modes[0][0]:
                        elapsed, seen, value_bytes, _ = consume_group(
                            broker.address, options.messages
                        )
                        if seen != options.messages or value_bytes != sent_bytes:
                            raise RuntimeError(f"group consumer read {seen} msgs/{value_bytes} B")
                        record("consume in a group, commit per batch msg/s", seen / elapsed)
                    record(f"{mode_name} broker peak RSS MiB", broker.peak_rss_mib())
                finally:
                    broker.stop()
        if "latency" in parts and "produce msg/s" in results:
            rate = statistics.median(results["produce msg/s"]) / 2
            with tempfile.TemporaryDirectory(prefix="tidelog-bench-") as data_dir:
                broker = start_broker(Path(data_dir))
                try:
                    latencies = produce_latency(broker.address, rate, 5.0, pool)
                finally:
                    broker.stop()
            record("latency offered msg/s", rate)
            record("produce latency p50 ms", latencies[len(latencies) // 2])
            record("produce latency p99 ms", latencies[int(len(latencies) * 0.99)])
        if "brokeronly" in parts:
            frame, per_frame = produce_frame(TOPIC, 4000, pool)
            requests = options.raw_requests
            roots = [None, "/dev/shm"] if options.shm_too else [None]
            broker_rates = {}
            for root in roots:
                with tempfile.TemporaryDirectory(prefix="tidelog-bench-", dir=root) as data_dir:
                    broker = start_broker(Path(data_dir))
                    try:
                        Producer({"bootstrap.servers": broker.address}).list_topics(TOPIC)
                        elapsed = load_generator(broker.host, broker.port, frame, requests)
                    finally:
                        broker.stop()
                broker_rates[root] = requests * per_frame / elapsed
            sink_rates = {}
            for sink_name, sink_code in (("streams", SINK), ("buffered", SINK_BUFFERED)):
                sink = Server([sys.executable, "-c", sink_code])
                try:
                    sink_elapsed = load_generator(sink.host, sink.port, frame, requests)
                finally:
                    sink.stop()
                sink_rates[sink_name] = requests * per_frame / sink_elapsed
            sink_rate = sink_rates["buffered"]
            record("broker-only msg/s", broker_rates[None])
            record("broker-only MB/s", broker_rates[None] * len(frame) / per_frame / 1e6)
            record("asyncio streams sink msg/s", sink_rates["streams"])
            record("asyncio BufferedProtocol sink msg/s", sink_rate)
            record("broker-only / streams sink %", 100 * broker_rates[None] / sink_rates["streams"])
            record("broker-only / BufferedProtocol sink %", 100 * broker_rates[None] / sink_rate)
            if options.shm_too:
                record("broker-only on /dev/shm msg/s", broker_rates["/dev/shm"])
                record(
                    "broker-only on /dev/shm / BufferedProtocol sink %",
                    100 * broker_rates["/dev/shm"] / sink_rate,
                )

    print()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}")
    print(f"python {platform.python_version()}, librdkafka {Producer and _libversion()}")
    print(f"client peak RSS MiB: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")
    print("| figure | median (min-max) | ratio to anchor |")
    print("|---|---|---|")
    for name, values in results.items():
        ratio = ""
        if name.endswith("produce_batch msg/s") or name == "produce msg/s":
            ratio = f"{statistics.median(values) / ANCHOR_PRODUCE:.2f}x"
        elif name == "consume msg/s":
            ratio = f"{statistics.median(values) / ANCHOR_CONSUME:.2f}x"
        print(f"| {name} | {summary(values)} | {ratio} |")


def _libversion() -> str:
    import confluent_kafka

    return f"{confluent_kafka.libversion()[0]} (confluent-kafka {confluent_kafka.version()})"


if __name__ == "__main__":
    main()
