#!/usr/bin/env python3
"""Tidelog beside Apache Kafka on the seed workload (../shared/bench/WORKLOAD.md), interleaved.

    .venv/bin/python bench/kafka_bench.py                      # 4,000,000 messages, 3 rounds
    .venv/bin/python bench/kafka_bench.py --quick --rounds 2   # 200,000 messages
    .venv/bin/python bench/kafka_bench.py --only seed          # without Kafka's perf tools

One Tidelog (`tidelog serve`) and one Apache Kafka (scripts/kafka: 4.3.1, KRaft, one node) run
for the whole benchmark on 127.0.0.1. Each round runs, for both brokers in turn (A B, then B A
in the next round, so drift hits both alike):

- seed produce + consume for every (durability, client settings) cell:
  durability `acks1`: acks=1, page-cache durability (both brokers' default: Kafka acknowledges
  before any fsync, `flush.messages` is unbounded by default); `strict`: the strictest
  durability each offers for a single node: Kafka topic `flush.messages=1` (fsync of every
  append before the acknowledgement) vs Tidelog topic `durability=sync` (acknowledged after a
  group-committed fsync); still acks=1 (one node: acks=all would mean the same).
  client settings `default`: confluent-kafka with librdkafka's defaults (only acks=1, and the
  group / offset-reset / manual-commit settings the workload needs); `tuned`: the settings
  docs/benchmarks.md uses (producer linger.ms=5, batch.size=1000000,
  queue.buffering.max.messages=1000000; consumer fetch.queue.backoff.ms=1,
  fetch.wait.max.ms=10, max.partition.fetch.bytes=10 MiB, fetch.max.bytes=50 MiB).
  Produce: clock from the first send to the last delivery report. Consume: a new group
  subscribes, touches every value, commits synchronously after every consume() batch (up to
  10,000); clock from the first message to the last commit's reply.
- Kafka's own `kafka-producer-perf-test` (--record-size 250, --throughput -1, acks=1, its
  default producer settings) and `kafka-consumer-perf-test` (same topic, a new group).

Every phase is checked (acked / read count, value bytes, final commit covers all, the perf
tools' record counts); broker CPU seconds per million messages come from /proc/PID/stat around
each phase, peak RSS from VmHWM at the end. Writes the "## Apache Kafka" section of
docs/benchmarks.md, docs/benchmarks-kafka.png and bench/results/kafka.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from apache_kafka import KAFKA_SCRIPT, ApacheKafka, TidelogBroker, cpu_seconds, peak_rss_mib

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
CHART = ROOT / "docs" / "benchmarks-kafka.png"
SECTION = "## Apache Kafka"
IDLE_TIMEOUT_S = 60.0

TUNED_PRODUCER = {"linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000}
TUNED_CONSUMER = {"fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760,
                  "fetch.queue.backoff.ms": 1, "fetch.wait.max.ms": 10}
STRICT_TOPIC = {"kafka": {"flush.messages": "1"}, "tidelog": {"durability": "sync"}}


def make_values(count: int, seed: int = 1) -> list[bytes]:
    """Values of uniform random size in [200, 300], drawn from a pre-generated pool."""
    rng = random.Random(seed)
    pool = [rng.randbytes(rng.randint(200, 300)) for _ in range(4096)]
    return [pool[i % len(pool)] for i in range(count)]


def create_topic(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)


def delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(30)


def high_watermark(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka-bench-marks"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        consumer.close()


def produce(bootstrap: str, topic: str, values: list[bytes], tuned: bool) -> dict[str, Any]:
    from confluent_kafka import Producer

    state = {"acked": 0, "bytes": 0, "failed": 0}

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            state["failed"] += 1
        else:
            state["acked"] += 1
            state["bytes"] += len(message)

    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "1",
                              "on_delivery": delivered}
    if tuned:
        config.update(TUNED_PRODUCER)
    producer = Producer(config)
    send, poll = producer.produce, producer.poll
    started = time.perf_counter()
    for index, value in enumerate(values):
        while True:
            try:
                send(topic, value)
                break
            except BufferError:
                poll(0.01)
        if index % 2000 == 1999:
            poll(0)
    while producer.flush(1.0):
        if time.perf_counter() - started > IDLE_TIMEOUT_S + len(values) / 10_000:
            break
    seconds = time.perf_counter() - started
    count = len(values)
    return {"seconds": seconds, "count": state["acked"], "checks": {
        "acked == sent": state["acked"] == count and state["failed"] == 0,
        "bytes == sent": state["bytes"] == sum(map(len, values)),
        "high watermark == sent": high_watermark(bootstrap, topic) == count}}


def consume(bootstrap: str, topic: str, values: list[bytes], tuned: bool) -> dict[str, Any]:
    from confluent_kafka import Consumer

    config: dict[str, Any] = {"bootstrap.servers": bootstrap,
                              "group.id": f"kafka-bench-{time.time_ns()}",
                              "auto.offset.reset": "earliest", "enable.auto.commit": False}
    if tuned:
        config.update(TUNED_CONSUMER)
    consumer = Consumer(config)
    total = len(values)
    count = size = 0
    started = 0.0
    idle_since = time.perf_counter()
    try:
        consumer.subscribe([topic])
        while count < total:
            batch = consumer.consume(num_messages=min(10_000, total - count), timeout=0.5)
            now = time.perf_counter()
            if not batch:
                if now - idle_since > IDLE_TIMEOUT_S:
                    break
                continue
            started = started or now
            idle_since = now
            for message in batch:
                if message.error() is not None:
                    raise RuntimeError(f"consume failed: {message.error()}")
                size += len(message.value() or b"")
            count += len(batch)
            consumer.commit(asynchronous=False)
        seconds = time.perf_counter() - started
        committed = consumer.committed(consumer.assignment(), timeout=10)
    finally:
        consumer.close()
    final = committed[0].offset if committed else -1
    return {"seconds": seconds, "count": count, "checks": {
        "read == sent": count == total, "bytes == sent": size == sum(map(len, values)),
        "final commit covers all": final == total}}


def kafka_tool(name: str, *args: str) -> str:
    out = subprocess.run([sys.executable, str(KAFKA_SCRIPT), "tool", name, *args],
                         capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        raise RuntimeError(f"{name} failed ({out.returncode}): {out.stderr[-2000:]}")
    return out.stdout


def producer_perf(bootstrap: str, topic: str, count: int) -> dict[str, Any]:
    started = time.perf_counter()
    text = kafka_tool("kafka-producer-perf-test", "--bootstrap-server", bootstrap,
                      "--topic", topic, "--num-records", str(count), "--record-size", "250",
                      "--throughput", "-1", "--command-property", "acks=1")
    wall = time.perf_counter() - started
    # "N records sent, X records/sec (Y MB/sec), ..." (the last such line is the total)
    totals = re.findall(r"(\d+) records sent, ([\d.]+) records/sec", text)
    sent, rate = (int(totals[-1][0]), float(totals[-1][1])) if totals else (0, 0.0)
    return {"seconds": count / rate if rate else wall, "count": sent, "tool_wall_s": wall,
            "checks": {"records sent == requested": sent == count,
                       "high watermark == sent": high_watermark(bootstrap, topic) == count}}


def consumer_perf(bootstrap: str, topic: str, count: int) -> dict[str, Any]:
    started = time.perf_counter()
    text = kafka_tool("kafka-consumer-perf-test", "--bootstrap-server", bootstrap,
                      "--topic", topic, "--num-records", str(count), "--timeout", "60000",
                      "--group", f"perf-{time.time_ns()}")
    wall = time.perf_counter() - started
    lines = [line for line in text.splitlines() if line.strip()]
    header = [h.strip() for h in lines[-2].split(",")]
    row = dict(zip(header, (v.strip() for v in lines[-1].split(",")), strict=False))
    consumed = int(row.get("data.consumed.in.nMsg", "0"))
    fetch_ms = float(row.get("fetch.time.ms", "0"))
    rebalance_ms = float(row.get("rebalance.time.ms", "0"))
    # nMsg.sec counts the group join (rebalance) too; fetch.nMsg.sec excludes it.
    rate = float(row.get("nMsg.sec", "0"))
    return {"seconds": consumed / rate if rate else wall, "count": consumed,
            "fetch_s": fetch_ms / 1000, "rebalance_s": rebalance_ms / 1000, "tool_wall_s": wall,
            "checks": {"records read == requested": consumed == count}}


def measured(broker: Any, action: Any) -> dict[str, Any]:
    cpu_before = cpu_seconds(broker.pid)
    try:
        entry = action()
    except Exception as error:  # one failed phase must not lose the others' figures
        entry = {"seconds": 0.0, "count": 0, "error": f"{type(error).__name__}: {error}",
                 "checks": {"completed": False}}
    cpu = cpu_seconds(broker.pid) - cpu_before
    entry["msg_per_s"] = entry["count"] / entry["seconds"] if entry["seconds"] else 0.0
    entry["broker_cpu_s_per_m"] = cpu / max(entry["count"], 1) * 1e6
    return entry


def cells(only: set[str]) -> list[tuple[str, str]]:
    out = []
    if "seed" in only:
        out += [(d, p) for d in ("acks1", "strict") for p in ("default", "tuned")]
    if "tools" in only:
        out.append(("acks1", "kafka-perf-tools"))
    return out


def run(brokers: dict[str, Any], values: list[bytes], rounds: int,
        only: set[str]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    names = list(brokers)
    # Not measured: one produce + consume per broker first, so the JVM's JIT (Kafka) and the
    # first-use costs (both) are paid before round 1.
    warm = values[: min(len(values), 500_000)]
    for name, broker in brokers.items():
        create_topic(broker.bootstrap, "bench-warm-up", {})
        produce(broker.bootstrap, "bench-warm-up", warm, True)
        consume(broker.bootstrap, "bench-warm-up", warm, True)
        delete_topic(broker.bootstrap, "bench-warm-up")
        print(f"warmed up {name} with {len(warm):,} messages", flush=True)
    for number in range(1, rounds + 1):
        order = names if number % 2 else names[::-1]
        for durability, client in cells(only):
            for name in order:
                broker = brokers[name]
                topic = f"bench-{durability}-{client}-{number}"
                config = STRICT_TOPIC[name] if durability == "strict" else {}
                key = f"{durability}/{client}"
                cell = results.setdefault(key, {}).setdefault(name, {"produce": [],
                                                                     "consume": []})
                try:
                    create_topic(broker.bootstrap, topic, config)
                except Exception as error:
                    print(f"round {number} {key} {name}: cannot create topic: {error}")
                    continue
                if client == "kafka-perf-tools":
                    steps = [("produce", lambda b=broker, t=topic: producer_perf(
                                 b.bootstrap, t, len(values))),
                             ("consume", lambda b=broker, t=topic: consumer_perf(
                                 b.bootstrap, t, len(values)))]
                else:
                    tuned = client == "tuned"
                    steps = [("produce", lambda b=broker, t=topic, u=tuned: produce(
                                 b.bootstrap, t, values, u)),
                             ("consume", lambda b=broker, t=topic, u=tuned: consume(
                                 b.bootstrap, t, values, u))]
                for phase, action in steps:
                    entry = measured(broker, action)
                    cell[phase].append(entry)
                    ok = all(entry["checks"].values())
                    print(f"round {number} {key:24s} {name:8s} {phase:8s} "
                          f"{entry['msg_per_s']:>12,.0f} msg/s  broker CPU "
                          f"{entry['broker_cpu_s_per_m']:.2f} s/M  "
                          f"{'ok' if ok else entry}", flush=True)
                try:
                    delete_topic(broker.bootstrap, topic)
                except Exception as error:
                    print(f"round {number} {name}: could not delete {topic}: {error}")
    return results


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def table(results: dict[str, Any], rss: dict[str, float]) -> list[str]:
    lines = ["| durability / client | phase | Tidelog msg/s, median (min-max) | "
             "Kafka msg/s, median (min-max) | Tidelog / Kafka per round | "
             "broker CPU s per M msgs, Tidelog / Kafka | checks |",
             "|---|---|---|---|---|---|---|"]
    for key, cell in results.items():
        for phase in ("produce", "consume"):
            t = [e["msg_per_s"] for e in cell.get("tidelog", {}).get(phase, [])]
            k = [e["msg_per_s"] for e in cell.get("kafka", {}).get(phase, [])]
            if not t and not k:
                continue
            ratios = ", ".join(f"{a / b:.2f}" if b else "-" for a, b in zip(t, k, strict=False))
            cpu_t = _median([e["broker_cpu_s_per_m"] for e in cell.get("tidelog", {})
                             .get(phase, [])])
            cpu_k = _median([e["broker_cpu_s_per_m"] for e in cell.get("kafka", {})
                             .get(phase, [])])
            ok = all(all(e["checks"].values()) for s in cell.values() for e in s[phase])

            def fmt(rates: list[float]) -> str:
                if not rates:
                    return "-"
                return f"{_median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f})"

            label = {"acks1/default": "acks=1, page cache / client defaults",
                     "acks1/tuned": "acks=1, page cache / tuned",
                     "strict/default": "strict (fsync before ack) / client defaults",
                     "strict/tuned": "strict (fsync before ack) / tuned",
                     "acks1/kafka-perf-tools": "acks=1 / Kafka's perf tools (Java client)",
                     }.get(key, key)
            lines.append(f"| {label} | {phase} | {fmt(t)} | {fmt(k)} | {ratios} | "
                         f"{cpu_t:.2f} / {cpu_k:.2f} | {'ok' if ok else 'FAILED'} |")
    lines.append("")
    lines.append(f"Broker peak RSS over the whole run (VmHWM): Tidelog "
                 f"{rss.get('tidelog', 0):.0f} MiB, Kafka {rss.get('kafka', 0):.0f} MiB.")
    return lines


def chart(results: dict[str, Any], path: Path, messages: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, tidelog, kafka = [], [], []
    for key, cell in results.items():
        for phase in ("produce", "consume"):
            labels.append(f"{key}\n{phase}".replace("acks1/kafka-perf-tools", "Kafka tools"))
            tidelog.append(_median([e["msg_per_s"] / 1000 for e in cell.get("tidelog", {})
                                    .get(phase, [])]))
            kafka.append(_median([e["msg_per_s"] / 1000 for e in cell.get("kafka", {})
                                  .get(phase, [])]))
    fig, ax = plt.subplots(figsize=(9.6, 3.6), dpi=80)
    width = 0.4
    xs = range(len(labels))
    ax.bar([x - width / 2 for x in xs], tidelog, width, label="Tidelog")
    ax.bar([x + width / 2 for x in xs], kafka, width, label="Apache Kafka")
    ax.set_xticks(list(xs), labels, fontsize=7)
    ax.set_ylabel("k msg/s (median)")
    ax.set_title(f"seed workload beside Apache Kafka, {messages:,} messages of 200-300 B "
                 "(perf tools: 250 B)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, pil_kwargs={"optimize": True})
    plt.close(fig)


def write_section(text: str) -> None:
    """Replace this script's section of docs/benchmarks.md (other sections are others')."""
    current = DOC.read_text()
    start = current.find(SECTION + "\n")
    if start < 0:
        DOC.write_text(current.rstrip("\n") + "\n\n" + text)
        return
    end = current.find("\n## ", start + len(SECTION))
    rest = current[end + 1:] if end >= 0 else ""
    DOC.write_text(current[:start] + text + ("\n" + rest if rest else ""))


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="200,000 messages")
    parser.add_argument("--messages", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="seed,tools",
                        help="comma-separated: seed (the 4 seed cells), tools (Kafka perf tools)")
    parser.add_argument("--no-write", action="store_true", help="do not touch docs/")
    parser.add_argument("--chart-from", type=Path, metavar="JSON",
                        help="only redraw the chart from a saved bench/results/kafka.json")
    args = parser.parse_args()
    messages = args.messages or (200_000 if args.quick else 4_000_000)
    if args.chart_from:
        saved = json.loads(args.chart_from.read_text())
        chart(saved["results"], CHART, saved.get("messages", messages))
        print(f"wrote {CHART}")
        return 0
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    values = make_values(messages)
    started = datetime.datetime.now(datetime.UTC)
    load_before = loadavg()
    with tempfile.TemporaryDirectory(prefix="kafka-bench-") as scratch:
        brokers: dict[str, Any] = {}
        try:
            brokers["tidelog"] = TidelogBroker(Path(scratch) / "tidelog")
            brokers["kafka"] = ApacheKafka(Path(scratch) / "kafka")
            print(f"tidelog on {brokers['tidelog'].bootstrap} (pid {brokers['tidelog'].pid}), "
                  f"kafka on {brokers['kafka'].bootstrap} (pid {brokers['kafka'].pid})")
            results = run(brokers, values, args.rounds, only)
            rss = {name: peak_rss_mib(b.pid) for name, b in brokers.items()}
        finally:
            for broker in brokers.values():
                broker.stop()
    finished = datetime.datetime.now(datetime.UTC)
    from importlib.metadata import version

    lines = [
        SECTION, "",
        f"`.venv/bin/python bench/kafka_bench.py {' '.join(sys.argv[1:])}`: {messages:,} "
        f"messages per phase, {args.rounds} rounds, measured {started:%Y-%m-%d %H:%M}-"
        f"{finished:%H:%M} UTC on {platform.machine()} with {os.cpu_count()} cores, Linux "
        f"{platform.release()}, Python {platform.python_version()}; tidelog "
        f"{TidelogBroker.version()}, Apache Kafka {ApacheKafka.version()} (KRaft, one "
        f"combined node, scripts/kafka: heap -Xmx512m -Xms512m, G1), confluent-kafka "
        f"{version('confluent-kafka')}; OpenJDK {java_version()}. Load average "
        f"{load_before} before, {loadavg()} after. Both brokers run for the whole benchmark; "
        "in each round every cell runs on both, order alternating per round. See the module "
        "docstring of bench/kafka_bench.py for the exact settings.",
        "",
        "Durability: Apache Kafka acknowledges before any fsync by default (`flush.messages` "
        "and `flush.ms` are unbounded; it counts on replication, and a single node loses the "
        "unflushed tail in a power cut), the same page-cache durability as Tidelog's default "
        "`durability=pagecache`: that is the `acks=1, page cache` row. `strict` is the most "
        "each offers on one node: Kafka topic `flush.messages=1` (an fsync per appended batch, "
        "in the request path, before the acknowledgement) vs Tidelog topic `durability=sync` "
        "(the acknowledgement waits for a group-committed fsync). Client `defaults` is "
        "confluent-kafka as a user gets it (librdkafka: linger.ms=5, batch.size=1000000, "
        "batch.num.messages=10000, fetch.queue.backoff.ms=1000, fetch.wait.max.ms=500); "
        "`tuned` is the setting docs/benchmarks.md uses elsewhere. Kafka's perf tools use the "
        "Java client's defaults (acks=1 given; batch.size=16384, linger.ms=5), 250-byte "
        "records; their consume figure is the tool's `nMsg.sec` (includes the group join). "
        "Broker CPU is the broker process's user+system time during the phase (Kafka's "
        "includes its idle background threads) per million messages; medians over rounds.",
        "",
        *table(results, rss),
        "",
        "![Tidelog beside Apache Kafka](benchmarks-kafka.png)",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "kafka.json").write_text(json.dumps({"results": results, "rss_mib": rss,
                                                   "messages": messages}, indent=2))
    if not args.no_write:
        write_section(text)
        chart(results, CHART, messages)
        print(f"wrote {DOC} section {SECTION!r} and {CHART}")
    failed = any(not all(e["checks"].values()) for cell in results.values()
                 for system in cell.values() for entries in system.values() for e in entries)
    return 1 if failed else 0


def java_version() -> str:
    out = subprocess.run(["java", "-version"], capture_output=True, text=True)
    match = re.search(r'version "([^"]+)"', out.stderr)
    return match.group(1) if match else "?"


if __name__ == "__main__":
    sys.exit(main())
