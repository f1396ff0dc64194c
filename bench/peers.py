#!/usr/bin/env python3
"""Seed workload against Tidelog and its peers, interleaved in one run (WORKLOAD.md).

    bench/setup-peers                      # once: Debian packages + the `bench` extra
    .venv/bin/python bench/peers.py        # 4,000,000 messages, 3 rounds
    .venv/bin/python bench/peers.py --quick --rounds 3   # 200,000 messages

Every system is started (Apache Kafka by scripts/kafka from Maven Central, the others from
their Debian packages) on 127.0.0.1 by this script (data under
bench/.peers/, removed afterwards) and stopped at the end. Each round runs every system's
produce phase then its consume phase, systems in turn (A B C D, A B C D, ...), so a noisy
neighbour hits them all alike. Counts and bytes are checked for every phase; a failed check
is shown in the table and makes the exit status 1.

Writes the "## Peers" section of docs/benchmarks.md (table: median, min-max, ratio to Tidelog
per round) and docs/benchmarks-peers.png, and the raw figures as JSON next to them in
bench/results/ (not committed).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_systems import SYSTEMS, Phase, System

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
CHART = ROOT / "docs" / "benchmarks-peers.png"
SECTION = "## Peers"


def make_values(count: int, seed: int = 1) -> list[bytes]:
    """Values of uniform random size in [200, 300], drawn from a pre-generated pool."""
    rng = random.Random(seed)
    pool = [rng.randbytes(rng.randint(200, 300)) for _ in range(4096)]
    return [pool[i % len(pool)] for i in range(count)]


def run(systems: list[System], rounds: int, values: list[bytes]) -> dict[str, Any]:
    results: dict[str, dict[str, list[dict[str, Any]]]] = {
        s.name: {"produce": [], "consume": []} for s in systems
    }
    for number in range(1, rounds + 1):
        for system in systems:
            for phase_name in ("produce", "consume"):
                entry: dict[str, Any]
                try:
                    phase: Phase = getattr(system, phase_name)(values)
                    entry = {
                        "seconds": phase.seconds,
                        "count": phase.count,
                        "bytes": phase.bytes,
                        "checks": phase.checks,
                        "msg_per_s": phase.count / phase.seconds if phase.seconds else 0,
                    }
                except Exception as error:  # one broken peer must not lose the others' figures
                    entry = {
                        "error": f"{type(error).__name__}: {error}",
                        "msg_per_s": 0,
                        "checks": {"completed": False},
                    }
                results[system.name][phase_name].append(entry)
                print(
                    f"round {number} {system.name:9s} {phase_name:8s} "
                    f"{entry['msg_per_s']:>12,.0f} msg/s "
                    f"{'ok' if all(entry['checks'].values()) else entry}",
                    flush=True,
                )
            try:
                system.drop()
            except Exception as error:
                print(f"round {number} {system.name}: could not drop the stream: {error}")
    return results


def _fmt(value: float) -> str:
    return f"{value:,.0f}"


def table(results: dict[str, Any], phase: str) -> list[str]:
    base = [r["msg_per_s"] for r in results["tidelog"][phase]] if "tidelog" in results else []
    lines = [
        f"| system | {phase} msg/s median | min - max | ratio to Tidelog per round | checks |",
        "|---|---:|---:|---|---|",
    ]
    for name, phases in results.items():
        rates = [r["msg_per_s"] for r in phases[phase]]
        ratios = ", ".join(
            f"{rate / b:.2f}" if b else "-" for rate, b in zip(rates, base, strict=False)
        )
        ok = all(all(r["checks"].values()) for r in phases[phase])
        lines.append(
            f"| {name} | {_fmt(statistics.median(rates))} | {_fmt(min(rates))} - "
            f"{_fmt(max(rates))} | {ratios} | {'ok' if ok else 'FAILED'} |"
        )
    return lines


def chart(results: dict[str, Any], path: Path, messages: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    fig, ax = plt.subplots(figsize=(6.4, 3.2), dpi=80)
    width = 0.38
    for offset, phase in ((-width / 2, "produce"), (width / 2, "consume")):
        rates = [[r["msg_per_s"] / 1000 for r in results[n][phase]] for n in names]
        medians = [statistics.median(r) for r in rates]
        low = [m - min(r) for m, r in zip(medians, rates, strict=True)]
        high = [max(r) - m for m, r in zip(medians, rates, strict=True)]
        ax.bar(
            [i + offset for i in range(len(names))],
            medians,
            width,
            label=phase,
            yerr=[low, high],
            capsize=3,
        )
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("k msg/s (median, min-max)")
    ax.set_title(f"seed workload, {messages:,} messages of 200-300 B", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, pil_kwargs={"optimize": True})
    plt.close(fig)


def write_section(text: str) -> None:
    """Replace the "## Peers" section of docs/benchmarks.md (other sections are others')."""
    current = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    start = current.find(SECTION + "\n")
    if start < 0:
        DOC.write_text(current.rstrip("\n") + "\n\n" + text)
        return
    end = current.find("\n## ", start + len(SECTION))
    rest = current[end + 1 :] if end >= 0 else ""
    DOC.write_text(current[:start] + text + ("\n" + rest if rest else ""))


def section(results: dict[str, Any], systems: list[System], messages: int, rounds: int) -> str:
    versions = ", ".join(f"{s.name} {s.version()}" for s in systems)
    cpus = os.cpu_count()
    lines = [
        SECTION,
        "",
        f"Measured {datetime.date.today().isoformat()} on {platform.machine()} with {cpus} "
        f"cores (shared, noisy), Python {platform.python_version()}; {versions}. "
        f"Command: `.venv/bin/python bench/peers.py {' '.join(sys.argv[1:])}`"
        f" ({messages:,} messages per phase, {rounds} rounds, values 200-300 random bytes, "
        "one partition/stream, systems interleaved per round). Settings: Tidelog "
        "pagecache durability, acks=1, confluent-kafka; Apache Kafka (scripts/kafka, KRaft, "
        "one node) with the same client and settings as Tidelog, which acknowledges before "
        "any fsync by default (flush.messages unbounded); Redis AOF everysec, redis-py "
        "pipelines of 1000; NATS JetStream file storage, nats-py with 1000 publishes in "
        "flight; RabbitMQ Streams via rstream. Consume: a group consumer touching every value "
        "and committing after every batch of up to 1000 (see bench/peer_systems.py). "
        "Counts and bytes checked in every phase. Other engineers' jobs shared the machine, "
        "so single rounds swing widely: read the per-round ratios, not absolute figures "
        "from different runs.",
        "",
        *table(results, "produce"),
        "",
        *table(results, "consume"),
        "",
        "![peers](benchmarks-peers.png)",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="200,000 messages")
    parser.add_argument("--messages", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--systems",
        default=",".join(SYSTEMS),
        help="comma-separated subset of " + ",".join(SYSTEMS),
    )
    parser.add_argument("--no-write", action="store_true", help="do not touch docs/")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    messages = args.messages or (200_000 if args.quick else 4_000_000)
    names = [n.strip() for n in args.systems.split(",") if n.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        parser.error(f"unknown systems: {', '.join(unknown)}")
    work_dir = ROOT / "bench" / ".peers"
    values = make_values(messages)
    systems = [SYSTEMS[n](work_dir) for n in names]
    try:
        for system in systems:
            system.start()
        results = run(systems, args.rounds, values)
        text = section(results, systems, messages, args.rounds)
    finally:
        for system in systems:
            system.stop()
        shutil.rmtree(work_dir, ignore_errors=True)
    print(text)
    out_dir = ROOT / "bench" / "results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "peers.json").write_text(json.dumps(results, indent=2))
    if not args.no_write:
        write_section(text)
        chart(results, CHART, messages)
        print(f"wrote {DOC} and {CHART} ({CHART.stat().st_size:,} bytes)")
    failed = any(
        not all(r["checks"].values())
        for phases in results.values()
        for entries in phases.values()
        for r in entries
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
