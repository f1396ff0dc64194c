"""Delayed delivery: produce throughput into a delay-enabled topic beside a plain topic, and the
memory of pending records. Short by design (under a minute with the defaults):

    PYTHONPATH=src python bench/delay_bench.py --messages 50000 --size 100 --rounds 3
    PYTHONPATH=src python bench/delay_bench.py --pending 1000000     # RSS of 1 M pending
    PYTHONPATH=src python bench/delay_bench.py --lag-rate 10000      # lag, 10,000 due/s

Throughput: one `tidelog serve`, one confluent-kafka producer (acks=1, linger 5 ms), the
same records into (1) a plain topic, (2) a delay-enabled topic, records without timer headers
(a substring search, no decoding), (3) the delay-enabled topic with every record due now
(`TIMER_DELAY_MS: 0`: decoded, then appended as usual), (4) a delay-enabled topic with half
the records due in 10 s (those go to `__tidelog_timer`). Prints a Markdown table.

`--pending N`: produces N records due in an hour into a delay-enabled topic and reports the
broker's resident memory (VmRSS from /proc) before and after, and per pending record, and the
time a restart takes to load them; then the in-process cost of the timing wheel alone
(tracemalloc) for the same N.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

DELAY = {"tidelog.delivery.delay.enable": "true"}


def start_broker(data_dir: str) -> tuple[subprocess.Popen[bytes], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tidelog.cli.main", "serve", "--data-dir", data_dir,
         "--listen", "127.0.0.1:0", "--metrics", "off"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    if not line.startswith("tidelog ready on "):
        raise SystemExit(f"broker did not start: {line!r}")
    return process, line.strip().rpartition(" ")[2]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def produce(bootstrap: str, topic: str, count: int, size: int, delayed_every: int,
            delay_ms: int) -> float:
    """Messages/s; every `delayed_every`-th record (0: none) is due in `delay_ms`."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1,
                         "batch.num.messages": 10000, "queue.buffering.max.messages": 1000000})
    value = b"x" * size
    due_now = [("TIMER_DELAY_MS", b"0")]
    later = [("TIMER_DELAY_MS", str(delay_ms).encode())]
    failures = 0

    def report(error: object, _message: object) -> None:
        nonlocal failures
        if error is not None:
            failures += 1

    start = time.perf_counter()
    for index in range(count):
        if delayed_every < 0:
            headers = None
        elif delayed_every and index % delayed_every == 0:
            headers = later
        else:
            headers = due_now
        while True:
            try:
                producer.produce(topic, value, headers=headers, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - start
    if failures:
        raise SystemExit(f"{failures} produce failures into {topic}")
    return count / elapsed


def throughput(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        process, bootstrap = start_broker(data_dir)
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            topics = [NewTopic("plain", 1, 1), NewTopic("delayed", 1, 1, config=DELAY),
                      NewTopic("half", 1, 1, config=DELAY)]
            for future in admin.create_topics(topics).values():
                future.result(30)
            produce(bootstrap, "plain", 10_000, args.size, -1, 0)  # warm up
            rows = [
                ("plain topic, no timer headers", "plain", -1),
                ("delay topic, no timer headers", "delayed", -1),
                ("delay topic, every record due now", "delayed", 0),
                ("delay topic, 50% due in 10 s", "half", 2),
            ]
            rates: dict[str, list[float]] = {label: [] for label, _, _ in rows}
            for _ in range(args.rounds):  # interleaved: load changes hit every row alike
                for label, topic, every in rows:
                    rates[label].append(
                        produce(bootstrap, topic, args.messages, args.size, every, 10_000))
            baseline = statistics.median(rates[rows[0][0]])
            print(f"{args.messages} records of {args.size} B, acks=1, one partition, median "
                  f"of {args.rounds} interleaved rounds\n")
            print("| topic | msg/s | vs plain |\n|---|---:|---:|")
            for label, _, _ in rows:
                rate = statistics.median(rates[label])
                print(f"| {label} | {rate:,.0f} | {rate / baseline:.2f} |")
        finally:
            process.terminate()
            process.wait(30)


def pending_memory(count: int) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        process, bootstrap = start_broker(data_dir)
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for future in admin.create_topics([NewTopic("later", 1, 1, config=DELAY)]).values():
                future.result(30)
            produce(bootstrap, "later", 1_000, 100, 1, 3_600_000)  # starts the timer service
            before = rss_mib(process.pid)
            start = time.perf_counter()
            produce(bootstrap, "later", count, 100, 1, 3_600_000)
            elapsed = time.perf_counter() - start
            after = rss_mib(process.pid)
            print(f"broker: {count:,} pending records (100 B values, due in 1 h) produced in "
                  f"{elapsed:.1f} s; VmRSS {before:.0f} -> {after:.0f} MiB, "
                  f"{(after - before) * 1024 * 1024 / count:.0f} B per pending record")
            process.terminate()
            process.wait(60)
            start = time.perf_counter()
            process, bootstrap = start_broker(data_dir)  # ready once the timer log is loaded
            print(f"restart with {count:,} pending: ready in {time.perf_counter() - start:.1f} s,"
                  f" VmRSS {rss_mib(process.pid):.0f} MiB")
        finally:
            process.terminate()
            process.wait(60)
    from tidelog.storage.timer_wheel import TimingWheel

    tracemalloc.start()
    wheel = TimingWheel(0)
    for index in range(count):
        wheel.add(3_600_000 + index % 600_000, index, index % 4)
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"wheel alone: {count:,} entries in {current / 2**20:.1f} MiB "
          f"({current / count:.1f} B each)")


def delivery_lag(rate: int, seconds: float, delay_ms: int) -> None:
    """Records due at `rate` per second: produced at that rate with a fixed delay, read by a
    consumer; lag = read time - (TIMER_ENQUEUE_MS + delay)."""
    from confluent_kafka import Consumer, TopicPartition

    with tempfile.TemporaryDirectory() as data_dir:
        process, bootstrap = start_broker(data_dir)
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for future in admin.create_topics([NewTopic("lag", 4, 1, config=DELAY)]).values():
                future.result(30)
            consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lag",
                                 "fetch.wait.max.ms": 10, "enable.auto.commit": False})
            consumer.assign([TopicPartition("lag", p, 0) for p in range(4)])
            producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
            headers = [("TIMER_DELAY_MS", str(delay_ms).encode())]
            total = int(rate * seconds)
            lags: list[int] = []
            start = time.monotonic()
            sent = 0
            while len(lags) < total and time.monotonic() - start < seconds + delay_ms / 1000 + 30:
                while sent < total and sent < (time.monotonic() - start) * rate:
                    producer.produce("lag", b"x" * 100, headers=headers, partition=sent % 4)
                    sent += 1
                producer.poll(0)
                for message in consumer.consume(1000, 0.005):
                    if message.error():
                        continue
                    read_ms = time.time() * 1000
                    enqueue = dict(message.headers() or [])["TIMER_ENQUEUE_MS"]
                    lags.append(int(read_ms - int(enqueue) - delay_ms))
            producer.flush(30)
            consumer.close()
        finally:
            process.terminate()
            process.wait(60)
    lags.sort()
    print(f"{len(lags):,} of {total:,} records due at {rate:,}/s over {seconds:.0f} s "
          f"(delay {delay_ms} ms, 4 partitions): lag p50 {lags[len(lags) // 2]} ms, "
          f"p99 {lags[len(lags) * 99 // 100]} ms, max {lags[-1]} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pending", type=int, default=0,
                        help="measure memory of this many pending records instead")
    parser.add_argument("--lag-rate", type=int, default=0,
                        help="measure delivery lag with this many records due per second")
    args = parser.parse_args()
    if args.lag_rate:
        delivery_lag(args.lag_rate, 5.0, 2_000)
    elif args.pending:
        pending_memory(args.pending)
    else:
        throughput(args)


if __name__ == "__main__":
    main()
