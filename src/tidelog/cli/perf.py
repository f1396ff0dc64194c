"""Workload runners behind `tidelog bench` (the seed workload of WORKLOAD.md by default).

- produce: N messages, values of uniform random size in [min_size, max_size] drawn from a
  pre-generated pool (the generator costs nothing); the clock starts at the first send and stops
  when the LAST message is acknowledged. Latency = produce() call -> delivery report, per message
  (librdkafka's own measurement, `Message.latency()`).
- consume: a consumer in a fresh group reads N messages from the earliest offset, touches every
  value (sums lengths) and commits synchronously after every poll batch; the clock starts at the
  first message and stops when the last commit is acknowledged. Latency = commit round trip.
- e2e (perf_e2e.py, Kafka's EndToEndLatency): a producer thread stamps `perf_counter_ns()` into
  the first 8 bytes of each value; the consumer (same process, assigned partitions, no group)
  measures send -> receive per message.

Every run checks its counts: acknowledged == N and the partitions' high watermarks advanced by N
(produce); N read and the final commit covers exactly N offsets (consume); N received with the
expected bytes (e2e). A failed check is reported and makes the command exit non-zero.
"""

from __future__ import annotations

import random
import resource
import struct
import time
from array import array
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from tidelog.cli.client import (
    ToolError,
    base_config,
    find_partitions,
    kafka_error_text,
    topic_partitions,
)

SEED_MESSAGES = 4_000_000
QUICK_MESSAGES = 200_000
POOL_SIZE = 4096
IDLE_TIMEOUT_S = 30.0
STAMP = struct.Struct(">q")  # e2e: perf_counter_ns() at send, in the value's first 8 bytes

Progress = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class ValuePool:
    """Pre-generated values; message k carries values[k % len(values)]."""

    values: tuple[bytes, ...]

    @classmethod
    def generate(cls, min_size: int, max_size: int, seed: int = 1) -> ValuePool:
        rng = random.Random(seed)
        return cls(tuple(rng.randbytes(rng.randint(min_size, max_size)) for _ in range(POOL_SIZE)))

    def total_bytes(self, count: int) -> int:
        """Value bytes of messages 0..count-1."""
        full, rest = divmod(count, len(self.values))
        sizes = [len(v) for v in self.values]
        return full * sum(sizes) + sum(sizes[:rest])


@dataclass(slots=True)
class BenchResult:
    mode: str
    topic: str
    messages: int
    bytes: int
    seconds: float
    latency_kind: str
    latency_ms: dict[str, float]
    client_cpu_s_per_million: float
    checks: dict[str, bool] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def msg_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0

    @property
    def ok(self) -> bool:
        return all(self.checks.values())

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(
            msg_per_s=round(self.msg_per_s, 1), mb_per_s=round(self.mb_per_s, 3), ok=self.ok
        )
        return data


def percentiles_ms(samples_s: array[float] | list[float]) -> dict[str, float]:
    """p50/p95/p99/max in milliseconds (nearest rank) of samples in seconds."""
    if not samples_s:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}
    ordered = sorted(samples_s)
    last = len(ordered) - 1

    def rank(q: float) -> float:
        return round(ordered[min(last, int(q * len(ordered)))] * 1000, 3)

    return {
        "p50": rank(0.50),
        "p95": rank(0.95),
        "p99": rank(0.99),
        "max": round(ordered[-1] * 1000, 3),
    }


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> bool:
    """Create `topic` if missing; True when this call created it."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    if find_partitions(bootstrap, topic) is not None:
        return False
    admin = AdminClient(base_config(bootstrap))
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
    )
    try:
        futures[topic].result(timeout=15.0)
    except KafkaException as exc:
        if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
            raise ToolError(
                f"cannot create topic {topic!r}: {kafka_error_text(exc.args[0])}"
            ) from None
        return False
    return True


def watermarks(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (low, high) watermark."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(base_config(bootstrap, **{"group.id": "tidelog-bench-watermarks"}))
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10.0)
            for p in topic_partitions(bootstrap, topic)
        }
    finally:
        consumer.close()


class Deliveries:
    """Delivery-report sink; a slotted object is the cheapest per-message callback target."""

    __slots__ = ("acked", "acked_bytes", "failed", "first_error", "latencies")

    def __init__(self) -> None:
        self.acked = 0
        self.acked_bytes = 0
        self.failed = 0
        self.first_error = ""
        self.latencies: array[float] = array("d")

    def __call__(self, error: Any, message: Any) -> None:
        if error is not None:
            self.failed += 1
            if not self.first_error:
                self.first_error = kafka_error_text(error)
            return
        self.acked += 1
        self.acked_bytes += len(message)
        latency = message.latency()
        if latency is not None:
            self.latencies.append(latency)


def producer_config(
    bootstrap: str, acks: str, compression: str, extra: dict[str, str], deliveries: Deliveries
) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "acks": acks,
        "compression.type": compression,
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000,
        "on_delivery": deliveries,
    }
    settings.update(extra)
    return base_config(bootstrap, **settings)


def send_all(
    producer: Any,
    topic: str,
    count: int,
    pool: ValuePool,
    rate: float,
    progress: Progress,
    stamp: bool = False,
) -> None:
    """Produce `count` messages (optionally at `rate` msg/s); poll to serve delivery reports."""
    values = pool.values
    size = len(values)
    produce = producer.produce
    poll = producer.poll
    started = time.perf_counter()
    for k in range(count):
        value = values[k % size]
        if stamp:
            value = STAMP.pack(time.perf_counter_ns()) + value[8:]
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:
                poll(0.01)
        if k % 2000 == 1999:
            poll(0)
            progress(2000)
            if rate > 0:
                ahead_s = (k + 1) / rate - (time.perf_counter() - started)
                if ahead_s > 0:
                    time.sleep(ahead_s)
    progress(count % 2000)


def run_produce(
    bootstrap: str,
    topic: str,
    count: int,
    pool: ValuePool,
    *,
    acks: str = "1",
    compression: str = "none",
    rate: float = 0.0,
    extra: dict[str, str] | None = None,
    progress: Progress = lambda n: None,
) -> BenchResult:
    from confluent_kafka import Producer

    deliveries = Deliveries()
    producer = Producer(producer_config(bootstrap, acks, compression, extra or {}, deliveries))
    before = watermarks(bootstrap, topic)
    cpu_before = cpu_seconds()
    started = time.perf_counter()
    send_all(producer, topic, count, pool, rate, progress)
    while producer.flush(1.0):
        if time.perf_counter() - started > IDLE_TIMEOUT_S + count / 10_000:
            break
    seconds = time.perf_counter() - started
    cpu = cpu_seconds() - cpu_before
    after = watermarks(bootstrap, topic)
    advanced = sum(after[p][1] - before.get(p, (0, 0))[1] for p in after)
    result = BenchResult(
        mode="produce",
        topic=topic,
        messages=deliveries.acked,
        bytes=deliveries.acked_bytes,
        seconds=seconds,
        latency_kind="send->ack",
        latency_ms=percentiles_ms(deliveries.latencies),
        client_cpu_s_per_million=cpu / max(count, 1) * 1e6,
        checks={
            "acked == sent": deliveries.acked == count and deliveries.failed == 0,
            "bytes == expected": deliveries.acked_bytes == pool.total_bytes(count),
            "high watermark advanced by sent": advanced == count,
        },
    )
    if deliveries.failed:
        result.notes.append(f"{deliveries.failed} failed: {deliveries.first_error}")
    return result


def run_consume(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    group: str | None = None,
    expected_bytes: int | None = None,
    progress: Progress = lambda n: None,
) -> BenchResult:
    from confluent_kafka import Consumer

    marks = watermarks(bootstrap, topic)
    available = sum(high - low for low, high in marks.values())
    if available < count:
        raise ToolError(f"topic {topic!r} holds {available:,} messages, fewer than {count:,}")
    group_id = group or f"tidelog-bench-{time.time_ns()}"
    consumer = Consumer(
        base_config(
            bootstrap,
            **{
                "group.id": group_id,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "fetch.max.bytes": 52_428_800,
                "max.partition.fetch.bytes": 10_485_760,
                # librdkafka backs off 1 s (fetch.queue.backoff.ms) whenever its prefetch
                # queue is full: with the default a fast consumer idles about a quarter of
                # the time (docs/benchmarks.md, Broker section).
                "fetch.queue.backoff.ms": 1,
                "fetch.wait.max.ms": 10,
            },
        )
    )
    commit_latencies: list[float] = []
    consumed = consumed_bytes = 0
    cpu_before = cpu_seconds()
    subscribed = time.perf_counter()
    started = 0.0
    idle_since = subscribed
    try:
        consumer.subscribe([topic])
        while consumed < count:
            batch = consumer.consume(num_messages=min(10_000, count - consumed), timeout=0.5)
            now = time.perf_counter()
            if not batch:
                if now - idle_since > IDLE_TIMEOUT_S:
                    raise ToolError(
                        f"only {consumed:,} of {count:,} messages arrived "
                        f"(nothing for {IDLE_TIMEOUT_S:g}s)"
                    )
                continue
            if not started:
                started = now
            idle_since = now
            for message in batch:
                error = message.error()
                if error is not None:
                    raise ToolError(f"consume failed: {kafka_error_text(error)}")
                consumed_bytes += len(message.value() or b"")
            consumed += len(batch)
            commit_started = time.perf_counter()
            consumer.commit(asynchronous=False)
            commit_latencies.append(time.perf_counter() - commit_started)
            progress(len(batch))
        seconds = time.perf_counter() - started
        cpu = cpu_seconds() - cpu_before
        committed = consumer.committed(consumer.assignment(), timeout=10.0)
    finally:
        consumer.close()
    covered = sum(
        max(tp.offset, marks[tp.partition][0]) - marks[tp.partition][0] for tp in committed
    )
    checks = {"read == requested": consumed == count, "final commit covers all": covered == count}
    if expected_bytes is not None:
        checks["bytes == expected"] = consumed_bytes == expected_bytes
    return BenchResult(
        mode="consume",
        topic=topic,
        messages=consumed,
        bytes=consumed_bytes,
        seconds=seconds,
        latency_kind="commit round trip",
        latency_ms=percentiles_ms(commit_latencies),
        client_cpu_s_per_million=cpu / max(count, 1) * 1e6,
        checks=checks,
        notes=[f"group {group_id}; first message {started - subscribed:.2f}s after subscribe"],
    )
