"""Broker benchmark: the seed-1p workload with confluent-kafka, and the broker-only figure.

    .venv/bin/python bench/broker_bench.py [--messages 4000000] [--rounds 3] [--only produce,...]

Per round, each against a fresh `tidelog serve` (stdlib loop, pagecache durability):
- produce: 4,000,000 messages, values 200-300 bytes drawn from a pre-generated pool, no key,
  one partition, acks=1, compression none. Clock from the first send until flush() returns,
  i.e. the last delivery report. Two client modes: `produce_batch` and per-message `produce`.
- consume: the stored backlog read by assign from offset 0; every value's length is summed.
  Correctness: message count and total value bytes equal what was produced.
- broker-only: a raw-socket load generator sends pre-built 1 MiB Produce v9 requests (acks=1,
  8 in flight) to the broker, then the same frames to a bare asyncio-streams sink in its own
  process that answers each frame with 8 bytes (the Python loopback ceiling); ratio per round.
Results are printed as a Markdown table (median and min-max of the rounds).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from tidelog.records.builder import NewRecord, build_batch

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
        ]
    )  # fmt: skip


SINK = textwrap.dedent(
    """
    import asyncio, struct, sys
    async def handle(reader, writer):
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                writer.write(struct.pack(">ii", 4, struct.unpack_from(">i", frame, 4)[0]))
        except asyncio.IncompleteReadError:
            writer.close()
    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0, limit=4 << 20)
        print("sink ready on 127.0.0.1:%d" % server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()
    asyncio.run(main())
    """
)


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
        while True:
            try:
                queued = producer.produce_batch(TOPIC, part, partition=0)
            except BufferError:
                producer.poll(0.005)
                continue
            if queued != len(part):
                raise RuntimeError(f"produce_batch queued {queued} of {len(part)}")
            break
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
            "queued.max.messages.kbytes": 1 << 20,
            "fetch.wait.max.ms": 10,
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen = 0
    value_bytes = 0
    start = time.perf_counter()
    deadline = start + 300
    while seen < count and time.perf_counter() < deadline:
        for message in consumer.consume(num_messages=100_000, timeout=1.0):
            if message.error():
                raise RuntimeError(str(message.error()))
            value_bytes += len(message.value())
            seen += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed, seen, value_bytes


# --- broker-only -------------------------------------------------------------------------------
def produce_frame(topic: str, records_per_batch: int, pool: list[bytes]) -> tuple[bytes, int]:
    """A Produce v9 frame (size prefix included) holding one ~1 MiB uncompressed batch."""
    batch = build_batch(
        [NewRecord(value=pool[i % len(pool)]) for i in range(records_per_batch)],
        now_ms=int(time.time() * 1000),
    )
    name = topic.encode()

    def uvarint(value: int) -> bytes:
        out = bytearray()
        while value >= 0x80:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
        return bytes(out)

    body = (
        struct.pack(">hhih", 0, 9, 0, 5) + b"bench" + b"\x00"  # header v2: client id, no tags
        + b"\x00" + struct.pack(">hi", 1, 30_000)  # null transactional id, acks=1, timeout
        + uvarint(2) + uvarint(len(name) + 1) + name  # one topic
        + uvarint(2) + struct.pack(">i", 0) + uvarint(len(batch) + 1) + bytes(batch)
        + b"\x00" + b"\x00" + b"\x00"  # tagged fields: partition, topic, request
    )  # fmt: skip
    return struct.pack(">i", len(body)) + body, records_per_batch


def load_generator(host: str, port: int, frame: bytes, requests: int, window: int = 8) -> float:
    """Send `requests` copies of `frame` with up to `window` unanswered; returns seconds."""
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    reader = sock.makefile("rb", buffering=1 << 20)
    sent = answered = 0
    start = time.perf_counter()
    while answered < requests:
        while sent < requests and sent - answered < window:
            sock.sendall(frame)
            sent += 1
        size = struct.unpack(">i", reader.read(4))[0]
        response = reader.read(size)
        if len(response) != size:
            raise RuntimeError("connection closed by the server")
        answered += 1
    elapsed = time.perf_counter() - start
    sock.close()
    return elapsed


# --- driver ------------------------------------------------------------------------------------
def summary(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=4_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="batch,permessage,consume,brokeronly")
    parser.add_argument("--raw-requests", type=int, default=400)
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
                    record(f"{mode_name} broker peak RSS MiB", broker.peak_rss_mib())
                finally:
                    broker.stop()
        if "brokeronly" in parts:
            frame, per_frame = produce_frame(TOPIC, 4000, pool)
            with tempfile.TemporaryDirectory(prefix="tidelog-bench-") as data_dir:
                broker = start_broker(Path(data_dir))
                try:
                    Producer({"bootstrap.servers": broker.address}).list_topics(TOPIC, timeout=10)
                    elapsed = load_generator(broker.host, broker.port, frame, options.raw_requests)
                finally:
                    broker.stop()
            sink = Server([sys.executable, "-c", SINK])
            try:
                sink_elapsed = load_generator(sink.host, sink.port, frame, options.raw_requests)
            finally:
                sink.stop()
            broker_rate = options.raw_requests * per_frame / elapsed
            sink_rate = options.raw_requests * per_frame / sink_elapsed
            record("broker-only msg/s", broker_rate)
            record("broker-only MB/s", options.raw_requests * len(frame) / elapsed / 1e6)
            record("asyncio ceiling msg/s", sink_rate)
            record("broker-only / ceiling %", 100 * broker_rate / sink_rate)

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

    return f"{confluent_kafka.libversion()[0]} (confluent-kafka {confluent_kafka.version()[0]})"


if __name__ == "__main__":
    main()
