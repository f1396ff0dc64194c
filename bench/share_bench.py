"""Share-group benchmark: one share consumer against one classic group consumer, same backlog.

    .venv/bin/python bench/share_bench.py [--messages 200000] [--more-consumers 2 4]

One run against a fresh `tidelog serve` (pagecache durability): produce the backlog (200,000
values of 200-300 bytes, one partition, broker_bench.py's producer), then
- classic: subscribe in a new consumer group, read everything, commit synchronously after
  every poll batch (broker_bench.consume_group);
- share:   one confluent-kafka ShareConsumer (librdkafka's share consumer, implicit
  acknowledgement: every record accepted on the next poll) in a share group reset to the
  earliest offset, read everything; the clock stops when `close()` returned (the last
  acknowledgements written).
- share x N: the same backlog read by 2 and 4 share consumers in one new group (threads).
Correctness: both read exactly `--messages` records and the same value bytes; the share run
sees no record twice. Reported: records/s of each, the ratio (the issue's goal: share >= 50%
of classic), broker CPU seconds per million records of each.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

sys.path.insert(0, str(Path(__file__).resolve().parent))
import broker_bench as seed  # a sibling script, not a package


def consume_share(bootstrap: str, count: int, consumers: int = 1) -> tuple[float, int, int]:
    """`consumers` ShareConsumers (one thread each; librdkafka does the work outside the GIL)
    in a new share group read until `count` records were received in total."""
    group = f"bench-share-{time.time_ns()}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("group", group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    seen: set[int] = set()
    totals = {"bytes": 0, "duplicates": 0}
    lock = threading.Lock()
    start = time.perf_counter()
    deadline = start + 300

    def run() -> None:
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "max.poll.records": 10_000})
        consumer.subscribe([seed.TOPIC])
        while len(seen) < count and time.perf_counter() < deadline:
            messages = consumer.poll(0.2)
            with lock:
                for message in messages:
                    if message.error():
                        raise RuntimeError(str(message.error()))
                    offset = message.offset()
                    totals["duplicates"] += offset in seen
                    seen.add(offset)
                    totals["bytes"] += len(message.value())
        # librdkafka 2.16's close() does not accept the last poll's records in implicit mode
        # (its final ShareAcknowledge is empty): they would be released and redelivered.
        consumer.commit_sync()
        consumer.close()

    threads = [threading.Thread(target=run) for _ in range(consumers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    if totals["duplicates"]:
        raise RuntimeError(f"{totals['duplicates']} records delivered twice")
    return elapsed, len(seen), totals["bytes"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    # Kafka's default (2000) bounds the records in flight per share partition, so what one
    # ShareFetch can acquire.
    parser.add_argument("--record-locks", type=int, default=2000)
    parser.add_argument("--more-consumers", type=int, nargs="*", default=[2, 4],
                        help="also read the backlog with this many share consumers (one group)")
    options = parser.parse_args()
    count = options.messages
    with tempfile.TemporaryDirectory(prefix="tidelog-share-bench-") as data_dir:
        server = seed.Server([
            sys.executable, "-m", "tidelog.cli.main", "serve", "--data-dir", data_dir,
            "--listen", "127.0.0.1:0", "--log-level", "WARNING",
            "--set", "group.initial.rebalance.delay.ms=0",
            "--set", f"group.share.partition.max.record.locks={options.record_locks}",
        ])  # fmt: skip
        try:
            pool = seed.value_pool()
            _, produced_bytes = seed.produce_per_message_mode(server.address, count, pool)
            cpu = server.cpu_seconds()
            classic_s, classic_n, classic_bytes, commits = seed.consume_group(
                server.address, count)
            classic_cpu = server.cpu_seconds() - cpu
            cpu = server.cpu_seconds()
            share_s, share_n, share_bytes = consume_share(server.address, count)
            share_cpu = server.cpu_seconds() - cpu
            several = []
            for consumers in options.more_consumers:
                cpu = server.cpu_seconds()
                seconds, n, _ = consume_share(server.address, count, consumers)
                several.append((consumers, seconds, n, server.cpu_seconds() - cpu))
        finally:
            server.stop()
    for name, n, value_bytes in (("classic", classic_n, classic_bytes),
                                 ("share", share_n, share_bytes)):
        if n != count or value_bytes != produced_bytes:
            raise RuntimeError(f"{name}: read {n} records / {value_bytes} bytes, "
                               f"produced {count} / {produced_bytes}")
    classic_rate, share_rate = count / classic_s, count / share_s
    print(f"records: {count}, {produced_bytes / count:.0f} B average value, "
          f"group.share.partition.max.record.locks={options.record_locks}")
    print(f"classic group: {classic_rate:,.0f} records/s ({classic_s:.2f} s, {commits} commits),"
          f" broker CPU {classic_cpu / count * 1e6:.2f} s per million")
    print(f"share group:   {share_rate:,.0f} records/s ({share_s:.2f} s),"
          f" broker CPU {share_cpu / count * 1e6:.2f} s per million")
    print(f"share / classic: {share_rate / classic_rate:.0%} (goal >= 50%)")
    for consumers, seconds, n, cpu in several:
        if n != count:
            raise RuntimeError(f"{consumers} share consumers read {n} records of {count}")
        print(f"{consumers} share consumers: {count / seconds:,.0f} records/s ({seconds:.2f} s),"
              f" broker CPU {cpu / count * 1e6:.2f} s per million")


if __name__ == "__main__":
    main()
