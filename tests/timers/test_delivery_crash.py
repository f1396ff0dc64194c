"""Exactly once across SIGKILL: delayed records are neither lost nor delivered twice.

A producer sends `TIMER_CRASH_RECORDS` (default 3,000) records with random delays of 0-10 s
over 4 partitions of a delay-enabled topic, half with an absolute TIMER_DELIVER_MS, half with
a relative TIMER_DELAY_MS, while the broker is SIGKILLed and restarted on the same data 3
times; a consumer reads all along. The checker counts, over the records the broker
acknowledged: lost, duplicated, early (read before due), corrupted (key, value, headers or
timestamp changed); all must be 0. Run twice: a plain producer without retries (records whose
produce failed while the broker was down may be present at most once), and an idempotent
producer retrying through the outages (every record acknowledged, each read exactly once:
its batches with delayed records are taken whole by the timer log under their sequence
numbers). Lateness (read time - due time) is printed: records due while the
broker was down are as late as the outage. `TIMER_CRASH_RECORDS=20000` soaks;
`TIMER_CRASH_KILLS=0` runs without kills.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from confluent_kafka import Producer

from conftest import BrokerFactory, BrokerProcess
from tidelog.cluster.zookeeper_server import free_port

from .helpers import DELAY_TOPIC, Reader, Received, create_topic, now_ms

RECORDS = int(os.environ.get("TIMER_CRASH_RECORDS", "3000"))
PARTITIONS = 4
MAX_DELAY_MS = 10_000
PRODUCE_SECONDS = 8.0
# TIMER_CRASH_KILLS=0: the same run without kills (to measure lateness alone).
KILLS_AT_S = (2.5, 6.0, 10.0) if os.environ.get("TIMER_CRASH_KILLS", "1") != "0" else ()
TOPIC = "crash-delays"


@dataclass
class Sent:
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]
    partition: int
    timestamp_ms: int
    due_ms: int  # absolute: exact; relative: sent time + delay (refined by TIMER_ENQUEUE_MS)
    relative_ms: int | None
    acked: bool | None = None


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_no_loss_no_duplicate_across_sigkill(broker_factory: BrokerFactory,
                                             idempotent: bool) -> None:
    port = free_port()
    listen = f"127.0.0.1:{port}"
    broker = broker_factory(listen=listen)
    create_topic(broker.bootstrap, TOPIC, PARTITIONS, DELAY_TOPIC)
    rng = random.Random(1414)
    sent = _plan(rng)

    reader = Reader(broker.bootstrap, TOPIC, PARTITIONS)
    stop_reading = threading.Event()
    reading = threading.Thread(target=_read_all, args=(reader, stop_reading), daemon=True)
    reading.start()
    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": "all",
        # Plain: no retries (a retry could duplicate in the timer log: the producer's
        # doing, not the broker's). Idempotent: retries through the outages, deduplicated
        # by sequence numbers, so every record must end up acknowledged.
        "retries": 1000 if idempotent else 0,
        "message.timeout.ms": 30000 if idempotent else 3000,
        "enable.idempotence": idempotent,
        "reconnect.backoff.max.ms": 200,
    })
    start = time.monotonic()
    kills = list(KILLS_AT_S)
    current: BrokerProcess = broker
    for index, record in enumerate(sent):
        target_s = PRODUCE_SECONDS * index / len(sent)
        while time.monotonic() - start < target_s:
            producer.poll(0.005)
        if kills and time.monotonic() - start >= kills[0]:
            kills.pop(0)
            current.kill()
            current = broker_factory(data_dir=broker.data_dir, listen=listen)
        record.timestamp_ms = now_ms() - 1_000
        if record.relative_ms is None:
            headers = [("TIMER_DELIVER_MS", str(record.due_ms).encode()), *record.headers]
        else:
            record.due_ms = now_ms() + record.relative_ms
            headers = [("TIMER_DELAY_MS", str(record.relative_ms).encode()), *record.headers]
        record.headers = headers
        producer.produce(TOPIC, record.value, record.key, partition=record.partition,
                         headers=headers, timestamp=record.timestamp_ms,
                         on_delivery=_acker(record))
    while kills:  # kills not reached while producing
        while time.monotonic() - start < kills[0]:
            producer.poll(0.05)
        kills.pop(0)
        current.kill()
        current = broker_factory(data_dir=broker.data_dir, listen=listen)
    assert producer.flush(30) == 0
    acked = [record for record in sent if record.acked]
    assert len(acked) > len(sent) // 10, "records produced between kills are acknowledged"
    if idempotent:
        assert len(acked) == len(sent)

    # Every acknowledged record read, then nothing pending: read to the end once more.
    wanted = {record.key for record in acked}
    deadline = time.monotonic() + MAX_DELAY_MS / 1000 + 60
    while not wanted <= {r.key for r in list(reader.records)}:
        assert time.monotonic() < deadline, "acknowledged records missing"
        time.sleep(0.1)
    last_due_ms = max(record.due_ms for record in sent) + 2_000
    while now_ms() < last_due_ms:
        time.sleep(0.1)
    ends = _log_ends(current.bootstrap)
    while sum(ends.values()) > len(reader.records):
        assert time.monotonic() < deadline, "records below the log end not read"
        time.sleep(0.1)
    stop_reading.set()
    reading.join(10)
    reader.close()

    report = _check(sent, reader.records)
    print(f"\ndelivery check: {report}")
    assert report["lost"] == report["duplicated"] == report["early"] == 0, report
    assert report["corrupted"] == report["unknown"] == 0, report
    assert report["failed_delivered_twice"] == 0, report


def _plan(rng: random.Random) -> list[Sent]:
    sent = []
    for index in range(RECORDS):
        delay_ms = rng.randrange(0, MAX_DELAY_MS + 1)
        relative = index % 2 == 1
        key = f"k{index:06d}".encode()
        value = rng.randbytes(rng.randrange(0, 200))
        headers = [("check", key[::-1]), ("nil", b"")]
        sent.append(Sent(key, value, headers, index % PARTITIONS, 0,
                         0 if relative else now_ms() + 2_000 + delay_ms,
                         delay_ms if relative else None))
    return sent


def _acker(record: Sent) -> Callable[[object, object], None]:
    def on_delivery(error: object, _message: object) -> None:
        record.acked = error is None

    return on_delivery


def _read_all(reader: Reader, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            reader.read_until(lambda _: stop.is_set(), timeout_s=3600)
        except AssertionError:
            return


def _log_ends(bootstrap: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


def _check(sent: list[Sent], received: list[Received]) -> dict[str, object]:
    by_key = {record.key: record for record in sent}
    seen: dict[bytes, list[Received]] = {}
    unknown = 0
    for record in received:
        if record.key in by_key:
            seen.setdefault(record.key, []).append(record)
        else:
            unknown += 1
    lost = duplicated = early = corrupted = failed_twice = 0
    lateness: list[int] = []
    for key, record in by_key.items():
        copies = seen.get(key, [])
        if record.acked and not copies:
            lost += 1
        if len(copies) > 1:
            if record.acked:
                duplicated += 1
            else:
                failed_twice += 1
        for copy in copies:
            due_ms = record.due_ms
            if record.relative_ms is not None and copy.header("TIMER_ENQUEUE_MS"):
                due_ms = int(copy.header("TIMER_ENQUEUE_MS") or b"0") + record.relative_ms
            delayed = copy.header("TIMER_ENQUEUE_MS") is not None
            if copy.received_ms < due_ms:
                early += 1
            if delayed:
                lateness.append(copy.received_ms - due_ms)
            if (copy.value, copy.partition, copy.timestamp_ms) != (
                record.value, record.partition, record.timestamp_ms
            ) or copy.headers[:len(record.headers)] != record.headers:
                corrupted += 1
    lateness.sort()

    def quantile(q: float) -> int:
        return lateness[int((len(lateness) - 1) * q)] if lateness else 0

    return {
        "sent": len(sent), "acked": sum(1 for r in sent if r.acked), "read": len(received),
        "lost": lost, "duplicated": duplicated, "early": early, "corrupted": corrupted,
        "unknown": unknown, "failed_delivered_twice": failed_twice,
        "delayed_read": len(lateness), "late_over_1s": sum(1 for x in lateness if x > 1_000),
        "late_p50_ms": quantile(0.5), "late_p99_ms": quantile(0.99),
        "late_max_ms": lateness[-1] if lateness else 0,
    }
