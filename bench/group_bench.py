"""Consumer-group benchmark: the seed-1p consume phase in a group, sync commit per poll batch.

    .venv/bin/python bench/group_bench.py [--messages 4000000] [--rounds 3]

Per round, against a fresh `tidelog serve` (pagecache durability, initial rebalance delay 0):
produce the backlog (4,000,000 values of 200-300 bytes, one partition, broker_bench.py's producer),
then, interleaved A B / B A across rounds:
- group:  subscribe in a new group, read everything, touch every value, commit synchronously
          after every poll batch (WORKLOAD.md's consume phase); the clock stops when the last
          commit is acknowledged;
- assign: the same read without a group or commits (the ceiling the group run is held against).
Correctness per run: message count and value bytes equal what was produced, every commit
covered its batch, and a fresh consumer reads the group's final committed offset == messages.
Also reported: commits per run and broker CPU seconds per million messages for the group run.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent))
import broker_bench as seed  # a sibling script, not a package

GOAL = 520_000


def final_commit(bootstrap: str, group: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return int(consumer.committed([TopicPartition(seed.TOPIC, 0)], 15)[0].offset)
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=4_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    count = options.messages
    pool = seed.value_pool()
    group_rates: list[float] = []
    assign_rates: list[float] = []
    ratios: list[float] = []
    cpu_per_million: list[float] = []
    commit_counts: list[int] = []
    for round_index in range(options.rounds):
        with tempfile.TemporaryDirectory(prefix="tidelog-group-bench-") as data_dir:
            server = seed.start_broker(Path(data_dir))
            try:
                # Per-message produce: it retries a full queue (the backlog is not measured here).
                _, produced_bytes = seed.produce_per_message_mode(server.address, count, pool)
                order = ["group", "assign"] if round_index % 2 == 0 else ["assign", "group"]
                rates: dict[str, float] = {}
                for mode in order:
                    if mode == "group":
                        group = f"bench-{round_index}"
                        cpu_before = server.cpu_seconds()
                        elapsed, seen, value_bytes, commits = seed.consume_group(
                            server.address, count, group
                        )
                        cpu = server.cpu_seconds() - cpu_before
                        covered = final_commit(server.address, group)
                        if covered != count:
                            raise RuntimeError(f"final commit {covered} != {count}")
                        cpu_per_million.append(cpu / (count / 1e6))
                        commit_counts.append(commits)
                    else:
                        elapsed, seen, value_bytes = seed.consume_assign(server.address, count)
                    if seen != count or value_bytes != produced_bytes:
                        raise RuntimeError(f"{mode}: {seen} messages / {value_bytes} bytes")
                    rates[mode] = count / elapsed
                    print(f"round {round_index + 1} {mode}: {rates[mode]:,.0f} msg/s", flush=True)
                group_rates.append(rates["group"])
                assign_rates.append(rates["assign"])
                ratios.append(rates["group"] / rates["assign"])
            finally:
                server.stop()
    print()
    print(f"machine: {platform.machine()}, {platform.python_version()}, messages {count:,}")
    print("| figure | median (min-max) |")
    print("|---|---|")
    print(f"| group consume, sync commit per batch, msg/s | {seed.summary(group_rates)} |")
    print(f"| assign consume (no group, no commits), msg/s | {seed.summary(assign_rates)} |")
    print(f"| ratio group / assign per round | {seed.summary(ratios)} |")
    print(f"| commits per run | {seed.summary([float(c) for c in commit_counts])} |")
    print(f"| broker CPU s per million (group run) | {seed.summary(cpu_per_million)} |")
    verdict = "meets" if statistics.median(group_rates) >= GOAL else "misses"
    print(f"\ngoal {GOAL:,} msg/s: median {verdict} it")


if __name__ == "__main__":
    main()
