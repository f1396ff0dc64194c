"""Transactional produce beside idempotent produce, and read_committed beside read_uncommitted
consume, against one `tidelog serve` (confluent-kafka). Short by design (well under a minute):

    PYTHONPATH=src python bench/txn_bench.py --messages 100000 --size 100 --rounds 3

Each transactional run commits transactions of N messages (100, 1,000, 10,000); the baseline
is an idempotent producer (acks=all) with the same linger and batch settings. Prints a
Markdown table of messages/s and the ratio to the baseline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

_PRODUCER = {"linger.ms": 5, "batch.num.messages": 10000, "queue.buffering.max.messages": 500000}


def start_broker(data_dir: str) -> tuple[subprocess.Popen[bytes], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tidelog.cli.main", "serve", "--data-dir", data_dir,
         "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    if not line.startswith("tidelog ready on "):
        raise SystemExit(f"broker did not start: {line!r}")
    return process, line.strip().rpartition(" ")[2]


def produce(bootstrap: str, topic: str, messages: int, size: int, txn_size: int) -> float:
    """Messages/s; txn_size 0: idempotent, no transactions."""
    settings = {"bootstrap.servers": bootstrap, **_PRODUCER}
    if txn_size:
        settings["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    else:
        settings["enable.idempotence"] = True
    producer = Producer(settings)
    if txn_size:
        producer.init_transactions(30)
    payload = b"x" * size
    start = time.perf_counter()
    sent = 0
    while sent < messages:
        if txn_size:
            producer.begin_transaction()
        for _ in range(txn_size or messages):
            while True:
                try:
                    producer.produce(topic, payload)
                    break
                except BufferError:
                    producer.poll(0.01)
            sent += 1
        if txn_size:
            producer.commit_transaction(60)
    producer.flush(60)
    return messages / (time.perf_counter() - start)


def consume(bootstrap: str, topic: str, isolation: str, expected: int) -> float:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"b-{uuid.uuid4().hex[:6]}",
        "isolation.level": isolation, "enable.auto.commit": False,
        "fetch.max.bytes": 50 << 20,
    })
    consumer.assign([CkTopicPartition(topic, 0, 0)])
    count = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 60
    while count < expected and time.monotonic() < deadline:
        for message in consumer.consume(10000, 0.5):
            if not message.error():
                count += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=60000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        process, bootstrap = start_broker(data_dir)
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            runs = [("idempotent, no transaction", 0), ("transactions of 100", 100),
                    ("transactions of 1,000", 1000), ("transactions of 10,000", 10000)]
            topics = {name: f"bench-{i}" for i, (name, _) in enumerate(runs)}
            for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics.values()]
                                              ).values():
                future.result(30)
            produce(bootstrap, topics[runs[0][0]], 5000, args.size, 0)  # warm-up, not counted
            samples: dict[str, list[float]] = {name: [] for name, _ in runs}
            for _ in range(args.rounds):  # interleaved rounds: all runs see the same load
                for name, txn_size in runs:
                    samples[name].append(
                        produce(bootstrap, topics[name], args.messages, args.size, txn_size)
                    )
            rates = {name: statistics.median(values) for name, values in samples.items()}
            base = rates[runs[0][0]]
            print(f"| produce ({args.messages} x {args.size} B, 1 partition, median of "
                  f"{args.rounds}) | messages/s | vs idempotent |")
            print("|---|---|---|")
            for name, rate in rates.items():
                print(f"| {name} | {rate:,.0f} | {rate / base:.0%} |")
            topic = topics["transactions of 1,000"]
            total = args.messages * args.rounds
            committed = consume(bootstrap, topic, "read_committed", total)
            uncommitted = consume(bootstrap, topic, "read_uncommitted", total)
            print("\n| consume (the topic of 1,000-message transactions) | messages/s |")
            print("|---|---|")
            print(f"| read_committed | {committed:,.0f} |")
            print(f"| read_uncommitted | {uncommitted:,.0f} |")
            print(f"\nload average: {os.getloadavg()[0]:.1f}")
        finally:
            process.terminate()
            process.wait(30)


if __name__ == "__main__":
    main()
