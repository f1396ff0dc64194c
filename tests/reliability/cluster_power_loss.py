"""Simulated power loss of a replicated cluster (issue 16): three brokers under the journaling
shim (shim.py), `log.durability=sync`, RF 3, `min.insync.replicas=2`, no unclean election;
an idempotent acks=all producer; then, each cycle, one of:

  all   the whole cluster loses power at once: every broker SIGKILLed together, each one's
        unsynced bytes dropped or scrambled (powerloss.apply_power_loss), all restarted
  one   one broker (the leader of some partition) loses power while the other two run on;
        it restarts and must catch up

ZooKeeper is not under the shim: it stands for a coordination service that survived (its own
power domain). After the last cycle every partition is read from its leader and the checker
of powerloss.py counts lost acknowledged records, duplicates, reorderings within a producer
session, corrupt batches and offset gaps; and the replicas' files, read directly once the
brokers stopped, must agree offset by offset up to the high watermark (no divergence).
Records in a replica's fsynced prefix at a crash but never acknowledged may disappear (the
report's "lost synced"): an uncommitted tail above the high watermark is truncated when another
replica leads, as in Kafka; on a single broker (powerloss.py) they may not.

Why nothing acknowledged may be lost even when all three lose power: an acks=all record is
acknowledged once it is below the high watermark, which needs every ISR member (at least
min.insync.replicas) to have fetched it, and a follower fsyncs what it fetched before it
reports the new position (D7, `acks.all.fsync`); the leader fsyncs before it counts its own.
"""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path
from typing import Any

from broker.raw import RawClient
from reliability.powerloss import (
    MUTATIONS,
    TOPIC,
    History,
    Report,
    _produce_until_crash,
    apply_power_loss,
    read_partition,
    synced_values,
)
from reliability.shim import JOURNAL_ENV, build_shim
from replication.harness import Cluster, replica_log

BROKERS = (1, 2, 3)
SCENARIOS = ("all", "one")
SETTINGS = (
    "log.durability=sync",
    "min.insync.replicas=2",
    "unclean.leader.election.enable=false",
    "log.segment.bytes=16384",  # rolls every few cycles: recovery across segments
    "log.index.interval.bytes=512",
)


def _metadata(cluster: Cluster, partitions: int) -> dict[int, tuple[int, list[int]]]:
    topic = cluster.admin().list_topics(TOPIC, timeout=10).topics[TOPIC]
    return {p: (m.leader, list(m.isrs)) for p, m in topic.partitions.items()
            if p < partitions}


def wait_healthy(cluster: Cluster, partitions: int, timeout_s: float = 90) -> dict[int, int]:
    """partition -> leader, from one Metadata answer where every partition has a live leader
    and all three replicas in its ISR."""
    view = cluster.wait_value(
        lambda: _metadata(cluster, partitions),
        lambda m: len(m) == partitions and all(
            leader in BROKERS and sorted(isr) == list(BROKERS) for leader, isr in m.values()),
        timeout_s, "every partition led, ISR of 3")
    return {p: leader for p, (leader, _) in view.items()}


def _power_loss(cluster: Cluster, victims: list[int], work: Path, rng: random.Random,
                history: History, report: Report) -> None:
    for node in victims:  # SIGKILL all first: "at once", before any of them restarts
        cluster.kill(node, signal.SIGKILL)
    for node in victims:
        data_dir, journal = cluster.brokers[node].data_dir, work / f"journal-{node}"
        history.synced |= synced_values(data_dir, journal)
        apply_power_loss(data_dir, journal, rng.choice(MUTATIONS), rng, report.mutation)
    for node in victims:
        started = time.monotonic()
        cluster.start(node, timeout_s=120)
        report.recovery_s.append(time.monotonic() - started)


def run(cluster: Cluster, work: Path, *, crashes: int, seed: int, partitions: int = 3,
        log: Any = None) -> tuple[Report, int]:
    """The crash loop on a cluster with no brokers yet; (report, diverged offsets)."""
    rng = random.Random(seed)
    report = Report(mode="cluster sync", seed=seed)
    started = time.monotonic()
    shim = build_shim(work / "shim")
    cluster.extra_sets = (*cluster.extra_sets, *SETTINGS)
    for node in BROKERS:
        broker = cluster.add(node)
        broker.env = {"LD_PRELOAD": str(shim), JOURNAL_ENV: str(work / f"journal-{node}")}
        cluster.start(node, timeout_s=120)
    cluster.create_topic(TOPIC, partitions, 3, {"min.insync.replicas": "2"})
    history = History()
    scenarios: dict[str, int] = dict.fromkeys(SCENARIOS, 0)
    for cycle in range(crashes):
        leaders = wait_healthy(cluster, partitions)
        scenario = rng.choice(SCENARIOS)
        victims = list(BROKERS) if scenario == "all" else [rng.choice(list(leaders.values()))]
        scenarios[scenario] += 1
        mark = time.monotonic()

        def kill(chosen: list[int] = victims) -> None:
            for node in chosen:
                cluster.kill(node, signal.SIGKILL)

        _produce_until_crash(cluster.bootstrap(), cycle, partitions, rng, history, kill)
        _power_loss(cluster, victims, work, rng, history, report)
        report.crashes += 1
        report.phases[f"cycles [{scenario}]"] += time.monotonic() - mark
        if log is not None:
            log(f"cycle {cycle + 1}/{crashes} [{scenario} {victims}]: "
                f"{len(history.acked)} acked so far")
    report.mode = "cluster sync: " + ", ".join(f"{n} x {k}" for k, n in scenarios.items())
    leaders = wait_healthy(cluster, partitions)
    _check(cluster, leaders, history, partitions, report)
    high_watermarks = dict(_high_watermarks(cluster, leaders))
    cluster.stop_all()
    diverged = _divergence(cluster, partitions, high_watermarks)
    report.seconds = time.monotonic() - started
    return report, diverged


def _check(cluster: Cluster, leaders: dict[int, int], history: History, partitions: int,
           report: Report) -> None:
    """powerloss.check, reading each partition from its own leader."""
    where: dict[bytes, list[tuple[int, int]]] = {}
    for partition in range(partitions):
        with RawClient(cluster.brokers[leaders[partition]].address) as client:
            last_seq: dict[str, int] = {}
            for offset, value in read_partition(client, partition, report):
                report.served += 1
                where.setdefault(value, []).append((partition, offset))
                session, _, seq = value.decode().rpartition("-")
                previous = last_seq.get(session, -1)
                report.reordered += int(seq) < previous
                last_seq[session] = max(int(seq), previous)
    report.duplicated = sum(len(places) - 1 for places in where.values())
    lost = [value for value in history.acked if value not in where]
    lost_synced = [value for value in history.synced if value not in where]
    report.lost_acked, report.lost_synced = len(lost), len(lost_synced)
    report.examples += [f"lost acked {v!r}" for v in lost[:5]]
    report.unknown_present = sum(1 for value in history.unknown if value in where)
    report.unknown_absent = len(history.unknown) - report.unknown_present
    report.sent, report.acked = history.sent, len(history.acked)


def _high_watermarks(cluster: Cluster, leaders: dict[int, int]) -> list[tuple[int, int]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "powerloss-hw"})
    try:
        return [(p, consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1])
                for p in leaders]
    finally:
        consumer.close()


def _divergence(cluster: Cluster, partitions: int, high_watermarks: dict[int, int]) -> int:
    """Offsets below the high watermark where two replicas' files hold different values."""
    diverged = 0
    for partition in range(partitions):
        logs = [replica_log(cluster.brokers[n].data_dir, TOPIC, partition) for n in BROKERS]
        for offset in range(high_watermarks[partition]):
            values = {log.get(offset) for log in logs}
            diverged += len(values) > 1
    return diverged
