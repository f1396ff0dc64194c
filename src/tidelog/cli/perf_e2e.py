"""`tidelog bench e2e` (Kafka's EndToEndLatency): send -> receive latency per message.

A producer thread stamps `perf_counter_ns()` into the first 8 bytes of each value (perf.STAMP);
the consumer (same process, assigned partitions from the current high watermarks, no group)
subtracts it from its receive time. Checks: N received, N acknowledged, the expected bytes.
"""

from __future__ import annotations

import threading
import time
from array import array

from tidelog.cli.client import ToolError, base_config, kafka_error_text
from tidelog.cli.perf import (
    IDLE_TIMEOUT_S,
    STAMP,
    BenchResult,
    Deliveries,
    Progress,
    ValuePool,
    cpu_seconds,
    percentiles_ms,
    producer_config,
    send_all,
    watermarks,
)


def run_e2e(
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
    from confluent_kafka import Consumer, Producer, TopicPartition

    if min(len(v) for v in pool.values) < STAMP.size:
        raise ToolError("e2e needs values of at least 8 bytes (--min-size 8)")
    start = {p: high for p, (_, high) in watermarks(bootstrap, topic).items()}
    consumer = Consumer(
        base_config(
            bootstrap,
            **{
                "group.id": f"tidelog-bench-e2e-{time.time_ns()}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            },
        )
    )
    consumer.assign([TopicPartition(topic, p, offset) for p, offset in start.items()])
    deliveries = Deliveries()
    producer = Producer(producer_config(bootstrap, acks, compression, extra or {}, deliveries))

    def send() -> None:
        send_all(producer, topic, count, pool, rate, lambda n: None, stamp=True)
        producer.flush(IDLE_TIMEOUT_S)

    latencies: array[float] = array("d")
    received = received_bytes = 0
    cpu_before = cpu_seconds()
    started = time.perf_counter()
    sender = threading.Thread(target=send, name="bench-e2e-producer", daemon=True)
    sender.start()
    idle_since = started
    try:
        while received < count:
            batch = consumer.consume(num_messages=min(10_000, count - received), timeout=0.5)
            now_ns = time.perf_counter_ns()
            if not batch:
                if time.perf_counter() - idle_since > IDLE_TIMEOUT_S:
                    raise ToolError(f"only {received:,} of {count:,} messages arrived")
                continue
            idle_since = time.perf_counter()
            for message in batch:
                if message.error() is not None:
                    raise ToolError(f"consume failed: {kafka_error_text(message.error())}")
                value = message.value() or b""
                received_bytes += len(value)
                latencies.append((now_ns - STAMP.unpack_from(value)[0]) / 1e9)
            received += len(batch)
            progress(len(batch))
        seconds = time.perf_counter() - started
        cpu = cpu_seconds() - cpu_before
    finally:
        sender.join(IDLE_TIMEOUT_S)
        consumer.close()
    return BenchResult(
        mode="e2e",
        topic=topic,
        messages=received,
        bytes=received_bytes,
        seconds=seconds,
        latency_kind="send->receive",
        latency_ms=percentiles_ms(latencies),
        client_cpu_s_per_million=cpu / max(count, 1) * 1e6,
        checks={
            "received == sent": received == count,
            "acked == sent": deliveries.acked == count and deliveries.failed == 0,
            "bytes == expected": received_bytes == pool.total_bytes(count),
        },
    )
