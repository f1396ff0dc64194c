"""Crash loop with simulated power loss: SIGKILL a broker, drop its unsynced bytes, restart.

One cycle: fork a broker (zygote.py, under the journaling shim of shim.py), run an idempotent
acks=all confluent-kafka producer sending unique values to P partitions, SIGKILL the broker
after a random number of acknowledgements (and a random number of extra sends), then apply a
power-loss mutation to every file the journal shows unsynced writes for:

- truncate: the file goes back to its length at its last successful fsync;
- prefix:   a random prefix of the unsynced writes survives, the next one possibly torn;
- garbage:  the file keeps its length but a random tail of the unsynced range is zeros or
            random bytes (metadata persisted, data pages not: ext4 data=writeback).

In every mode, a file created since its directory's last fsync loses its name (is deleted)
with probability 1/2: POSIX makes a new directory entry durable only through an fsync of the
directory, as LazyFS models it.

Index files (.index/.timeindex, written through mmap, so not journaled) are derived data: in
each cycle each one is kept, deleted, or has a random page-aligned tail zeroed (lost dirty
mmap pages). Recovery must rebuild them.

Before mutating, the harness reads the *synced* prefix of every segment (.log) file and
collects the values in it: those records survived any power loss, so they must be served after
recovery, in every durability mode. After the last cycle a checker reads every partition with
raw Fetch requests and counts: lost (acknowledged, or synced, and not served), duplicated
(one value at two offsets), reordered (one producer session's values out of send order in a
partition), corrupt (a served batch failing its CRC or decoding) and offset gaps.

Run it longer with `scripts/soak-power-loss` (TIDELOG_POWER_LOSS_CRASHES, default 2000).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from broker.raw import RawClient, request_module
from reliability.shim import JOURNAL_ENV, build_shim
from tidelog.errors import TidelogError
from tidelog.records.batch import iter_batches
from tidelog.records.record import iter_records

FETCH = 1
TOPIC = "powerloss"
MUTATIONS = ("truncate", "prefix", "garbage")
INDEX_SUFFIXES = (".index", ".timeindex")
READY_PREFIX = "tidelog ready on "
PAGE = 4096


# --- the journal and the mutation ------------------------------------------------------------
@dataclass
class FileJournal:
    """What one inode went through since its last successful fsync, as the shim saw it."""

    synced: int | None = None  # length at the last fsync (or when first touched this run)
    ops: list[tuple[str, int, int]] = field(default_factory=list)  # (W, off, len) / (T, size, 0)


def read_journal(path: Path) -> dict[tuple[int, int], FileJournal]:
    files: dict[tuple[int, int], FileJournal] = defaultdict(FileJournal)
    if not path.exists():
        return files
    for line in path.read_text("ascii", "replace").splitlines():
        parts = line.split()
        if len(parts) < 4 or parts[0] not in ("W", "T", "S"):
            continue  # a line cut by the SIGKILL
        try:
            numbers = [int(part) for part in parts[1:]]
        except ValueError:
            continue
        key = (numbers[0], numbers[1])
        state = files[key]
        if parts[0] == "S":
            state.synced, state.ops = numbers[2], []
            continue
        if len(numbers) < 4 + (parts[0] == "W"):
            continue
        if state.synced is None and not state.ops:
            # Bytes present before this run touched the file survived the previous crash.
            state.synced = numbers[-1]
        if parts[0] == "W":
            state.ops.append(("W", numbers[2], numbers[3]))
        else:
            state.ops.append(("T", numbers[2], 0))
    return files


def undurable_creations(path: Path) -> set[tuple[int, int]]:
    """Files created (C lines) whose directory was not fsynced (D line) afterwards: a power
    loss may take their names, and so the whole file, away."""
    pending: dict[tuple[int, int], tuple[int, int]] = {}  # file -> its directory
    if not path.exists():
        return set()
    for line in path.read_text("ascii", "replace").splitlines():
        parts = line.split()
        try:
            numbers = [int(part) for part in parts[1:]]
        except ValueError:
            continue
        if parts[:1] == ["C"] and len(numbers) == 4:
            pending[(numbers[0], numbers[1])] = (numbers[2], numbers[3])
        elif parts[:1] == ["D"] and len(numbers) == 2:
            synced_dir = (numbers[0], numbers[1])
            pending = {f: d for f, d in pending.items() if d != synced_dir}
    return set(pending)


def inodes_under(directory: Path) -> dict[tuple[int, int], Path]:
    found: dict[tuple[int, int], Path] = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = Path(root) / name
            try:
                stat = path.lstat()
            except FileNotFoundError:
                continue
            found[(stat.st_dev, stat.st_ino)] = path
    return found


def _length_after(journal: FileJournal, kept_ops: int, rng: random.Random) -> int:
    """File length if the first `kept_ops` unsynced operations survived (the next write torn)."""
    length = journal.synced or 0
    for kind, first, second in journal.ops[:kept_ops]:
        length = max(length, first + second) if kind == "W" else first
    if kept_ops < len(journal.ops):
        kind, first, second = journal.ops[kept_ops]
        if kind == "W" and first <= length:  # torn: part of the next append reached the disk
            length = max(length, first + rng.randint(0, second))
    return length


@dataclass
class MutationStats:
    files: int = 0
    bytes_dropped: int = 0
    bytes_garbled: int = 0
    indexes_deleted: int = 0
    indexes_zeroed: int = 0
    files_unlinked: int = 0


def apply_power_loss(
    data_dir: Path, journal_path: Path, mode: str, rng: random.Random, stats: MutationStats
) -> None:
    """Drop or scramble exactly the bytes written since each file's last successful fsync."""
    journal = read_journal(journal_path)
    undurable = undurable_creations(journal_path)
    for key, path in inodes_under(data_dir).items():
        if key in undurable and rng.random() < 0.5:
            path.unlink()  # its directory entry never reached the disk
            stats.files_unlinked += 1
            continue
        if path.suffix in INDEX_SUFFIXES:
            _damage_index(path, rng, stats)
            continue
        state = journal.get(key)
        if state is None or not state.ops or state.synced is None:
            continue
        size = path.stat().st_size
        synced = min(state.synced, size)
        if mode == "truncate":
            keep = synced
        else:
            keep = min(size, _length_after(state, rng.randint(0, len(state.ops)), rng))
        stats.files += 1
        with path.open("r+b") as handle:
            if mode == "garbage" and keep < size:
                # Length persisted, data did not: [keep, size) holds zeros or junk.
                junk = bytes(size - keep) if rng.random() < 0.5 else rng.randbytes(size - keep)
                handle.seek(keep)
                handle.write(junk)
                stats.bytes_garbled += size - keep
            elif keep < size:
                handle.truncate(keep)
                stats.bytes_dropped += size - keep
    journal_path.unlink(missing_ok=True)


def _damage_index(path: Path, rng: random.Random, stats: MutationStats) -> None:
    choice = rng.random()
    if choice < 0.2:
        path.unlink()
        stats.indexes_deleted += 1
    elif choice < 0.5:
        size = path.stat().st_size
        if size > 0:
            start = rng.randrange(0, size, PAGE) if size > PAGE else 0
            with path.open("r+b") as handle:
                handle.seek(start)
                handle.write(bytes(size - start))
            stats.indexes_zeroed += 1


def synced_values(data_dir: Path, journal_path: Path) -> set[bytes]:
    """Values of the records inside the synced prefix of every segment file: survivors of any
    power loss, which recovery must keep."""
    journal = read_journal(journal_path)
    undurable = undurable_creations(journal_path)
    values: set[bytes] = set()
    for key, path in inodes_under(data_dir).items():
        if path.suffix != ".log" or not path.parent.name.startswith(TOPIC + "-"):
            continue
        if key in undurable:
            continue  # not even its name is durable
        state = journal.get(key)
        data = path.read_bytes()
        if state is not None and state.synced is not None and state.ops:
            data = data[: state.synced]
        for batch in iter_batches(data):
            if not batch.is_valid():
                break
            values.update(bytes(r.value or b"") for r in iter_records(batch))
    return values


# --- the broker under the zygote ----------------------------------------------------------------
class Zygote:
    """The fork server (zygote.py) under LD_PRELOAD; its children are the brokers."""

    def __init__(self, shim: Path, work: Path, timeout_s: float = 120.0) -> None:
        tests_dir = Path(__file__).resolve().parent.parent
        env = dict(os.environ)
        env["LD_PRELOAD"] = str(shim)
        env.pop(JOURNAL_ENV, None)  # only the brokers journal
        env["PYTHONPATH"] = os.pathsep.join(
            [str(tests_dir), *filter(None, [env.get("PYTHONPATH")])]
        )
        self.work = work
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reliability.zygote"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=(work / "zygote.log").open("ab"),
            env=env,
            text=True,
            bufsize=1,
        )
        self._expect("zygote ready", timeout_s)

    def _expect(self, prefix: str, timeout_s: float) -> str:
        import selectors

        assert self.process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            if not selector.select(timeout_s):
                raise RuntimeError(f"zygote: no {prefix!r} after {timeout_s}s")
        line = self.process.stdout.readline()
        if not line.startswith(prefix):
            raise RuntimeError(f"zygote said {line!r}, expected {prefix!r}")
        return line

    def spawn(self, argv: list[str], env: dict[str, str], stdout: Path, stderr: Path) -> int:
        assert self.process.stdin is not None
        request = {"argv": argv, "env": env, "stdout": str(stdout), "stderr": str(stderr)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return int(self._expect("pid ", 30.0).split()[1])

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()


def _dead(pid: int) -> bool:
    """Exited (a zombie has closed every file) or gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def wait_for(condition: Any, timeout_s: float, what: str, step_s: float = 0.01) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {timeout_s}s")
        time.sleep(step_s)


# --- workload and checker -----------------------------------------------------------------------
@dataclass
class History:
    acked: dict[bytes, int] = field(default_factory=dict)  # value -> partition
    unknown: set[bytes] = field(default_factory=set)  # failed or never answered
    synced: set[bytes] = field(default_factory=set)  # in a synced segment prefix at a crash
    sent: int = 0


@dataclass
class Report:
    mode: str
    crashes: int = 0
    sent: int = 0
    acked: int = 0
    served: int = 0
    lost_acked: int = 0
    lost_synced: int = 0
    duplicated: int = 0
    reordered: int = 0
    corrupt_batches: int = 0
    offset_gaps: int = 0
    unknown_present: int = 0
    unknown_absent: int = 0
    mutation: MutationStats = field(default_factory=MutationStats)
    recovery_s: list[float] = field(default_factory=list)
    seconds: float = 0.0
    seed: int = 0
    phases: Counter[str] = field(default_factory=Counter)  # seconds per phase
    examples: list[str] = field(default_factory=list)

    def summary(self) -> str:
        recovery = sorted(self.recovery_s) or [0.0]
        return (
            f"power loss [{self.mode}] seed={self.seed}: {self.crashes} crashes, "
            f"{self.sent} sent, {self.acked} acked, {self.served} served; "
            f"lost acked={self.lost_acked} lost synced={self.lost_synced} "
            f"duplicated={self.duplicated} reordered={self.reordered} "
            f"corrupt={self.corrupt_batches} offset gaps={self.offset_gaps}; "
            f"unacked present={self.unknown_present} absent={self.unknown_absent}; "
            f"mutated files={self.mutation.files} dropped={self.mutation.bytes_dropped}B "
            f"garbled={self.mutation.bytes_garbled}B unlinked new files="
            f"{self.mutation.files_unlinked} indexes deleted="
            f"{self.mutation.indexes_deleted} zeroed={self.mutation.indexes_zeroed}; "
            f"restart-to-ready p50={recovery[len(recovery) // 2]:.2f}s "
            f"max={recovery[-1]:.2f}s; {self.seconds:.1f}s ("
            + ", ".join(f"{name} {secs:.1f}s" for name, secs in self.phases.items())
            + ")"
        )


def _fetch_partition(client: RawClient, partition: int, offset: int) -> Any:
    module = request_module(FETCH, 11)
    body = module.FetchRequest(
        replica_id=-1,
        max_wait=timedelta(milliseconds=0),
        min_bytes=0,
        max_bytes=8 << 20,
        isolation_level=0,
        topics=(
            module.FetchTopic(
                topic=TOPIC,
                partitions=(
                    module.FetchPartition(
                        partition=partition,
                        fetch_offset=offset,
                        partition_max_bytes=4 << 20,
                        log_start_offset=-1,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    return client.call(FETCH, 11, body).responses[0].partitions[0]


def read_partition(
    client: RawClient, partition: int, report: Report
) -> Iterator[tuple[int, bytes]]:
    """(offset, value) of every record served, counting corrupt batches and offset gaps."""
    offset = 0
    while True:
        data = _fetch_partition(client, partition, offset)
        if data.error_code != 0:
            raise AssertionError(f"fetch {partition}@{offset}: error {data.error_code}")
        batches = list(iter_batches(data.records or b""))
        if not batches:
            if offset < data.high_watermark:
                raise AssertionError(f"no batch at {partition}@{offset} < HW {data.high_watermark}")
            return
        for batch in batches:
            if batch.base_offset != offset:
                report.offset_gaps += batch.base_offset > offset
            if not batch.is_valid():
                report.corrupt_batches += 1
                report.examples.append(f"corrupt batch {partition}@{batch.base_offset}")
            else:
                try:
                    for record in iter_records(batch):
                        yield record.offset, bytes(record.value or b"")
                except TidelogError as error:
                    report.corrupt_batches += 1
                    report.examples.append(f"undecodable {partition}@{batch.base_offset}: {error}")
            offset = batch.next_offset


def check(bootstrap: str, history: History, partitions: int, report: Report) -> None:
    where: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    with RawClient(bootstrap) as client:
        for partition in range(partitions):
            last_seq: dict[str, int] = {}
            for offset, value in read_partition(client, partition, report):
                report.served += 1
                where[value].append((partition, offset))
                session, _, seq = value.decode().rpartition("-")
                previous = last_seq.get(session)
                if previous is not None and int(seq) <= previous:
                    report.reordered += int(seq) < previous
                last_seq[session] = max(int(seq), previous if previous is not None else -1)
    report.duplicated = sum(len(places) - 1 for places in where.values() if len(places) > 1)
    lost = [value for value in history.acked if value not in where]
    report.lost_acked = len(lost)
    lost_synced = [value for value in history.synced if value not in where]
    report.lost_synced = len(lost_synced)
    report.examples += [f"lost acked {v!r}" for v in lost[:5]]
    report.examples += [f"lost synced {v!r}" for v in lost_synced[:5]]
    report.unknown_present = sum(1 for value in history.unknown if value in where)
    report.unknown_absent = len(history.unknown) - report.unknown_present
    report.sent, report.acked = history.sent, len(history.acked)


def _produce_until_crash(
    bootstrap: str, cycle: int, partitions: int, rng: random.Random, history: History,
    kill: Any,
) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": rng.choice([0, 1, 5]),
            "compression.type": rng.choice(["none", "lz4", "zstd", "gzip", "snappy"]),
            "message.timeout.ms": 20_000,
            "socket.timeout.ms": 10_000,
            "reconnect.backoff.ms": 10,
            "reconnect.backoff.max.ms": 100,
            "log_level": 2,  # the SIGKILL makes librdkafka log every disconnect
        }
    )
    outcomes: dict[bytes, bool] = {}
    acked = [0]

    def report(error: Any, message: Any) -> None:
        outcomes[message.value()] = error is None
        acked[0] += error is None

    target = rng.randint(1, 25)
    extra = rng.randint(0, 20)
    window = rng.randint(4, 40)  # unanswered sends at most: bounds each cycle's records
    session = f"c{cycle}"
    sent = 0
    deadline = time.monotonic() + 60
    try:
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"cycle {cycle}: {target} acks not within 60 s")
            if sent - len(outcomes) < window:
                value = f"{session}-{sent % partitions}-{sent}".encode()
                producer.produce(TOPIC, value=value, partition=sent % partitions,
                                 on_delivery=report)
                sent += 1
                if acked[0] >= target:
                    extra -= 1
                    if extra <= 0:
                        kill()
                        break
                producer.poll(0)
            else:
                producer.poll(0.005)
    finally:
        producer.purge()  # the broker is gone: outstanding sends end as unknown
        producer.flush(10)
    history.sent += sent
    for index in range(sent):
        value = f"{session}-{index % partitions}-{index}".encode()
        if outcomes.get(value):
            history.acked[value] = index % partitions
        else:
            history.unknown.add(value)


def run(
    work: Path,
    *,
    crashes: int,
    durability: str,
    seed: int,
    partitions: int = 3,
    shim_dir: Path | None = None,
    log: Any = None,
) -> Report:
    """The crash loop; returns the report (the caller asserts its counts)."""
    rng = random.Random(seed)
    report = Report(mode=durability, seed=seed)
    started = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    shim = build_shim(shim_dir or work / "shim")
    data_dir = work / "data"
    journal = work / "journal"
    zygote = Zygote(shim, work)
    history = History()
    settings = {
        "log.durability": durability,
        "num.partitions": str(partitions),
        "log.segment.bytes": "16384",  # rolls every few cycles: recovery across segments
        "log.index.interval.bytes": "512",
    }
    argv = ["serve", "--data-dir", str(data_dir), "--listen", "127.0.0.1:0", "--metrics", "off"]
    for key, value in settings.items():
        argv += ["--set", f"{key}={value}"]
    pid = 0
    try:
        for cycle in range(crashes + 1):
            stdout = work / f"stdout-{cycle}"
            spawn_at = time.monotonic()
            pid = zygote.spawn(argv, {JOURNAL_ENV: str(journal)}, stdout, work / "broker.log")
            wait_for(
                lambda out=stdout, child=pid: (out.exists() and out.read_text().endswith("\n"))
                or _dead(child),
                120.0,
                f"broker ready (cycle {cycle})",
            )
            line = stdout.read_text()
            if not line.startswith(READY_PREFIX):
                raise AssertionError(f"cycle {cycle}: broker did not start: {line!r}")
            report.recovery_s.append(time.monotonic() - spawn_at)
            bootstrap = line[len(READY_PREFIX) :].strip()
            if cycle == crashes:
                break  # the last start: recovered, now check
            if cycle == 0:
                from broker.test_requests import create

                with RawClient(bootstrap) as client:
                    create(client, TOPIC)

            def kill(victim: int = pid) -> None:
                os.kill(victim, signal.SIGKILL)

            mark = time.monotonic()
            report.phases["start"] += mark - spawn_at
            _produce_until_crash(bootstrap, cycle, partitions, rng, history, kill)
            wait_for(lambda victim=pid: _dead(victim), 30.0, f"broker {pid} exit")
            report.phases["produce"] += time.monotonic() - mark
            mark = time.monotonic()
            history.synced |= synced_values(data_dir, journal)
            mode = rng.choice(MUTATIONS)
            apply_power_loss(data_dir, journal, mode, rng, report.mutation)
            report.phases["mutate"] += time.monotonic() - mark
            report.crashes += 1
            if log is not None and (cycle + 1) % 10 == 0:
                log(f"cycle {cycle + 1}/{crashes}: {len(history.acked)} acked")
        mark = time.monotonic()
        check(bootstrap, history, partitions, report)
        report.phases["check"] += time.monotonic() - mark
    finally:
        if pid and not _dead(pid):
            os.kill(pid, signal.SIGTERM)
            try:
                wait_for(lambda: _dead(pid), 15.0, "broker stop")
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
        zygote.close()
    report.seconds = time.monotonic() - started
    broker_log = (work / "broker.log").read_text("utf-8", "replace") \
        if (work / "broker.log").exists() else ""
    if "Traceback (most recent call last)" in broker_log:
        report.examples.append("broker traceback:\n" + broker_log[-4000:])
    return report


def main() -> None:
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crashes", type=int,
                        default=int(os.environ.get("TIDELOG_POWER_LOSS_CRASHES", "2000")))
    parser.add_argument("--durability", choices=("sync", "pagecache"), default="sync")
    parser.add_argument("--seed", type=int, default=random.SystemRandom().randrange(2**32))
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="tidelog-powerloss-"))
    print(f"power loss soak: {args.crashes} crashes, {args.durability}, seed {args.seed}, "
          f"work dir {work}", flush=True)
    report = run(work, crashes=args.crashes, durability=args.durability, seed=args.seed,
                 log=lambda text: print(text, flush=True))
    print(report.summary())
    for example in report.examples[:20]:
        print("  " + example)
    # Page-cache mode may lose (and so reorder around) acknowledged records; nothing else.
    bad = report.lost_synced + report.corrupt_batches + report.duplicated + report.offset_gaps
    if args.durability == "sync":
        bad += report.lost_acked + report.reordered
    sys.exit(1 if bad or any("Traceback" in e for e in report.examples) else 0)


if __name__ == "__main__":
    main()
