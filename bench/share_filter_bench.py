"""Share-group filter benchmark: one share consumer reading a backlog with no filter, a tag
filter matching 10% of the records, one matching 90%, and a SQL92 one matching 90%, in one
run (< 1 min).

    .venv/bin/python bench/share_filter_bench.py [--messages 60000] [--rounds 3]

One fresh `tidelog serve` (pagecache durability). The backlog: `--messages` values of 200-300
bytes in one partition (broker_bench.py's pool and producer settings), each with a `tag`
header, `TagA` on every tenth record and `TagB` on the others. Per round, in turn: a new
share group (earliest; `tidelog.share.filter` unset, `TagA`, `TagB`, `SQL92:tag <> 'TagA'`)
read by one confluent-kafka ShareConsumer (implicit acknowledgement, max.poll.records 10000)
until it has every matching record; the clock stops when `commit_sync()` and `close()`
returned. Checked: exactly the matching offsets, none twice. Reported per variant: median and
range over the rounds of the backlog's records per second (log records passed, delivered or
filtered), of the records delivered per second, and broker CPU seconds per million log
records.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

sys.path.insert(0, str(Path(__file__).resolve().parent))
import broker_bench as seed  # a sibling script, not a package

VARIANTS = (("no filter", ""), ("10% (TagA)", "TagA"), ("90% (TagB)", "TagB"),
            ("90% (SQL92)", "SQL92:tag <> 'TagA'"))


def produce(bootstrap: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **seed.PRODUCER_CONFIG})
    pool = seed.value_pool()
    for i in range(count):
        while True:
            try:
                producer.produce(seed.TOPIC, value=pool[i % len(pool)], partition=0,
                                 headers=[("tag", b"TagA" if i % 10 == 0 else b"TagB")])
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(60) != 0:
        raise RuntimeError("records left unsent")


def consume(bootstrap: str, expression: str, expected: set[int]) -> float:
    group = f"bench-filter-{time.time_ns()}"
    configs = [ConfigEntry("share.auto.offset.reset", "earliest",
                           incremental_operation=AlterConfigOpType.SET)]
    if expression:
        configs.append(ConfigEntry("tidelog.share.filter", expression,
                                   incremental_operation=AlterConfigOpType.SET))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("group", group, incremental_configs=configs)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "max.poll.records": 10_000})
    consumer.subscribe([seed.TOPIC])
    seen: set[int] = set()
    start = time.perf_counter()
    deadline = start + 120
    while len(seen) < len(expected) and time.perf_counter() < deadline:
        for message in consumer.poll(0.2):
            if message.error():
                raise RuntimeError(str(message.error()))
            if message.offset() in seen:
                raise RuntimeError(f"offset {message.offset()} delivered twice")
            seen.add(message.offset())
    consumer.commit_sync()
    consumer.close()
    elapsed = time.perf_counter() - start
    if seen != expected:
        raise RuntimeError(f"{expression or 'no filter'}: got {len(seen)} records, "
                           f"{len(seen - expected)} not matching, {len(expected - seen)} missing")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=60_000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    count = options.messages
    matching = {"": set(range(count)), "TagA": set(range(0, count, 10))}
    matching["TagB"] = matching["SQL92:tag <> 'TagA'"] = matching[""] - matching["TagA"]
    seconds: dict[str, list[float]] = {name: [] for name, _ in VARIANTS}
    cpu: dict[str, list[float]] = {name: [] for name, _ in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="tidelog-share-filter-bench-") as data_dir:
        server = seed.Server([
            sys.executable, "-m", "tidelog.cli.main", "serve", "--data-dir", data_dir,
            "--listen", "127.0.0.1:0", "--log-level", "WARNING",
            "--set", "group.initial.rebalance.delay.ms=0",
        ])  # fmt: skip
        try:
            produce(server.address, count)
            for _ in range(options.rounds):
                for name, expression in VARIANTS:
                    before = server.cpu_seconds()
                    seconds[name].append(consume(server.address, expression,
                                                 matching[expression]))
                    cpu[name].append(server.cpu_seconds() - before)
        finally:
            server.stop()
    print(f"records: {count} (tag header on each: TagA 10%, TagB 90%), one partition, "
          f"{options.rounds} rounds, variants interleaved")
    for name, expression in VARIANTS:
        log_rates = [count / s for s in seconds[name]]
        delivered = [len(matching[expression]) / s for s in seconds[name]]
        print(f"{name:12} backlog {statistics.median(log_rates):>9,.0f} records/s "
              f"({min(log_rates):,.0f}-{max(log_rates):,.0f}), delivered "
              f"{statistics.median(delivered):>9,.0f}/s "
              f"({min(delivered):,.0f}-{max(delivered):,.0f}), broker CPU "
              f"{statistics.median(cpu[name]) / count * 1e6:.2f} s per million")


if __name__ == "__main__":
    main()
