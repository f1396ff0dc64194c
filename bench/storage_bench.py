"""Storage engine benchmark: append (page cache and sync) against a raw sequential write of the
same bytes at the same fsync cadence, read through FileSlice + sendfile, recovery of an unclean
log, and the clean open of a multi-GiB data dir. Prints a Markdown section for
docs/benchmarks.md. Everything is written under a temp dir and deleted at the end.

    .venv/bin/python bench/storage_bench.py --mib 512 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from tidelog.records.batch import RecordBatch
from tidelog.records.builder import NewRecord, build_batch
from tidelog.storage.config import LogConfig
from tidelog.storage.log import PartitionLog
from tidelog.storage.manager import CLEAN_SHUTDOWN_MARKER, LogManager
from tidelog.types import TopicPartition

MIB = 1 << 20
RECORD_BYTES = 250
TP = TopicPartition("bench", 0)


def one_mib_batch() -> tuple[bytearray, int]:
    """A ~1 MiB uncompressed batch of 250-byte records; returns (buffer, record count)."""
    value = os.urandom(RECORD_BYTES)
    count = MIB // (RECORD_BYTES + 10)
    buffer = build_batch([NewRecord(value, timestamp_ms=1) for _ in range(count)], now_ms=1)
    return buffer, count


def raw_write(path: Path, data: bytes, count: int, *, fsync: bool) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        start = time.perf_counter()
        for _ in range(count):
            os.write(fd, data)
            if fsync:
                os.fsync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
    path.unlink()
    return elapsed


def log_append(directory: Path, buffer: bytearray, count: int) -> float:
    log = PartitionLog(TP, directory, LogConfig())
    batch = RecordBatch(memoryview(buffer))
    start = time.perf_counter()
    for _ in range(count):
        log.append([batch], now_ms=1)
    elapsed = time.perf_counter() - start
    log.close(flush=False)
    shutil.rmtree(directory)
    return elapsed


def log_append_sync(
    directory: Path, buffer: bytearray, count: int, in_flight: int = 1
) -> tuple[float, int]:
    """Each append waits for its group-commit fsync: with in_flight=1 the same cadence as
    write+fsync; with more, waiters share fsyncs."""
    manager = LogManager(directory, LogConfig(durability="sync"), now_ms=0)
    log = manager.create(TP, LogConfig(durability="sync"))
    batch = RecordBatch(memoryview(buffer))
    window = threading.Semaphore(in_flight)
    start = time.perf_counter()
    for _ in range(count):
        window.acquire()
        result = log.append([batch], now_ms=1)
        manager.request_sync(log, result.last_offset + 1, lambda error: window.release())
    for _ in range(in_flight):
        window.acquire()
    elapsed = time.perf_counter() - start
    fsyncs = manager.fsync_count
    manager.close()
    shutil.rmtree(directory)
    return elapsed, fsyncs


def fill_log(directory: Path, buffer: bytearray, mib: int, config: LogConfig) -> PartitionLog:
    log = PartitionLog(TP, directory, config)
    batch = RecordBatch(memoryview(buffer))
    for _ in range(mib):
        log.append([batch], now_ms=1)
    return log


def read_sendfile(
    log: PartitionLog, records_per_batch: int, batch_bytes: int, *, to_socket: bool
) -> tuple[float, int]:
    """Consume the whole log in 1 MiB fetches (max.partition.fetch.bytes) via sendfile, into
    /dev/null or a socketpair drained by a thread (what a consumer connection costs)."""
    drain: threading.Thread | None = None
    if to_socket:
        sender, receiver = socket.socketpair()
        sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * MIB)

        def drain_all() -> None:
            scratch = bytearray(MIB)
            while receiver.recv_into(scratch):
                pass

        drain = threading.Thread(target=drain_all)
        drain.start()
        sink = sender.fileno()
    else:
        sink = os.open(os.devnull, os.O_WRONLY)
    total = 0
    try:
        start = time.perf_counter()
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            result = log.read(offset, MIB)
            for piece in result.slices:
                sent = 0
                while sent < piece.length:
                    sent += os.sendfile(sink, piece.fd, piece.position + sent,
                                        piece.length - sent)
            total += result.size
            offset += records_per_batch * (result.size // batch_bytes)  # identical batches
        elapsed = time.perf_counter() - start
    finally:
        if drain is not None:
            sender.close()
            drain.join()
            receiver.close()
        else:
            os.close(sink)
    return elapsed, total


def median_range(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=512, help="MiB per page-cache append trial")
    parser.add_argument("--sync-mib", type=int, default=128, help="MiB per sync-mode trial")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--recovery-mib", type=int, default=1024)
    parser.add_argument("--open-gib", type=int, default=4, help="size of the clean-open dir")
    parser.add_argument("--dir", type=Path, default=None, help="parent of the temp dir")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="tidelog-bench-", dir=args.dir))
    try:
        run(args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(args: argparse.Namespace, root: Path) -> None:
    buffer, records_per_batch = one_mib_batch()
    data = bytes(buffer)
    names = ("raw", "log", "raw_sync", "log_sync", "log_sync8")
    rates: dict[str, list[float]] = {k: [] for k in names}
    fsyncs: list[int] = []
    fsyncs8: list[int] = []

    def trial(name: str, mib: int, body: Callable[[], float]) -> None:
        rates[name].append(mib * len(buffer) / MIB / body())

    # warm-up (not counted): imports, first-touch page faults, allocator
    raw_write(root / "raw", data, 16, fsync=False)
    log_append(root / "log", buffer, 16)
    for number in range(args.rounds):
        order = ["raw", "log"] if number % 2 == 0 else ["log", "raw"]
        for name in order:
            if name == "raw":
                trial("raw", args.mib, lambda: raw_write(root / "raw", data, args.mib, fsync=False))
            else:
                trial("log", args.mib, lambda: log_append(root / "log", buffer, args.mib))
        for name in order:
            if name == "raw":
                trial("raw_sync", args.sync_mib,
                      lambda: raw_write(root / "raw", data, args.sync_mib, fsync=True))
            else:
                elapsed, count = log_append_sync(root / "sync", buffer, args.sync_mib)
                fsyncs.append(count)
                rates["log_sync"].append(args.sync_mib * len(buffer) / MIB / elapsed)
                elapsed, count = log_append_sync(root / "sync", buffer, args.sync_mib, 8)
                fsyncs8.append(count)
                rates["log_sync8"].append(args.sync_mib * len(buffer) / MIB / elapsed)

    # read through FileSlice + sendfile, and recovery of an unclean log, on one 1 GiB log
    log = fill_log(root / "recovery" / TP.dir_name, buffer, args.recovery_mib, LogConfig())
    log.flush()
    read_rates: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.rounds):
        for to_socket in (False, True):
            elapsed, total = read_sendfile(log, records_per_batch, len(buffer),
                                           to_socket=to_socket)
            read_rates[to_socket].append(total / MIB / elapsed)
    log.close()
    recovery_s = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        recovered = PartitionLog(TP, root / "recovery" / TP.dir_name, LogConfig(),
                                 clean=False, recovery_point=0)
        recovery_s.append(time.perf_counter() - start)
        assert recovered.recovered_segments >= 1 and recovered.truncated_bytes == 0
        recovered.close()
    shutil.rmtree(root / "recovery")

    # clean open of a multi-GiB data dir: 8 partitions, 256 MiB segments
    open_dir = root / "open"
    manager = LogManager(open_dir, LogConfig(segment_bytes=256 * MIB), now_ms=0)
    per_partition = args.open_gib * 1024 // 8
    for partition in range(8):
        config = LogConfig(segment_bytes=256 * MIB)
        target = manager.create(TopicPartition("bench", partition), config)
        batch = RecordBatch(memoryview(buffer))
        for _ in range(per_partition):
            target.append([batch], now_ms=1)
    segments = sum(log.segment_count() for log in manager.logs())
    manager.close()
    open_s = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        reopened = LogManager(open_dir, LogConfig(), now_ms=0)
        open_s.append(time.perf_counter() - start)
        assert reopened.clean_start
        reopened.close()
        assert (open_dir / CLEAN_SHUTDOWN_MARKER).exists()

    report(args, rates, (fsyncs, fsyncs8), read_rates, recovery_s, open_s, segments, len(buffer))


def report(
    args: argparse.Namespace, rates: dict[str, list[float]],
    fsyncs: tuple[list[int], list[int]],
    read_rates: dict[bool, list[float]], recovery_s: list[float], open_s: list[float],
    segments: int, batch_bytes: int,
) -> None:
    ratio = statistics.median(rates["log"]) / statistics.median(rates["raw"])
    sync_ratio = statistics.median(rates["log_sync"]) / statistics.median(rates["raw_sync"])
    cpu = platform.processor() or platform.machine()
    print("## Storage engine\n")
    print(f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.node()} ({cpu}, "
          f"{os.cpu_count()} cores, Linux {platform.release()}, Python "
          f"{platform.python_version()}), shared with other jobs; `bench/storage_bench.py "
          f"--mib {args.mib} --sync-mib {args.sync_mib} --rounds {args.rounds}`. "
          f"Batches of {batch_bytes} bytes holding 250-byte records; median (min-max) of "
          f"{args.rounds} interleaved rounds.\n")
    print("| measurement | result | vs raw |")
    print("|---|---|---|")
    print(f"| raw `os.write`, page cache | {median_range(rates['raw'])} MiB/s | |")
    print(f"| PartitionLog.append, page cache | {median_range(rates['log'])} MiB/s "
          f"| {ratio:.0%} (goal >= 70%) |")
    print(f"| raw `os.write` + `fsync` per MiB | {median_range(rates['raw_sync'])} MiB/s | |")
    print(f"| append + request_sync, sync mode (one in flight) | "
          f"{median_range(rates['log_sync'])} MiB/s | {sync_ratio:.0%} (goal >= 50%) |")
    print(f"| read via FileSlice + sendfile to /dev/null, 1 MiB fetches | "
          f"{median_range(read_rates[False])} MiB/s | |")
    print(f"| read via FileSlice + sendfile to a socketpair (drained by a thread) | "
          f"{median_range(read_rates[True])} MiB/s | |")
    print(f"| pipelined sync mode (8 appends in flight, group commit) | "
          f"{median_range(rates['log_sync8'])} MiB/s | "
          f"{statistics.median(rates['log_sync8']) / statistics.median(rates['raw_sync']):.0%} |")
    print(f"| recovery of {args.recovery_mib} MiB unclean log (warm cache) | "
          f"{statistics.median(recovery_s) * 1000:.0f} ms "
          f"({min(recovery_s) * 1000:.0f}-{max(recovery_s) * 1000:.0f}) | |")
    print(f"| clean open of {args.open_gib} GiB dir (8 partitions, {segments} segments) | "
          f"{statistics.median(open_s) * 1000:.1f} ms "
          f"({min(open_s) * 1000:.1f}-{max(open_s) * 1000:.1f}) | |")
    print(f"\nSync mode used {statistics.median(fsyncs[0]):.0f} group-commit fsyncs per "
          f"{args.sync_mib} appends with one in flight, {statistics.median(fsyncs[1]):.0f} "
          f"with 8 in flight. /dev/null sendfile measures the storage path only (the kernel "
          f"skips the copy); the socketpair row includes a real copy into a reader.")


if __name__ == "__main__":
    main()
