"""Crash loop: a child appends in sync mode and reports each acknowledged batch; we SIGKILL it
at a random moment, drop a random part of the unacknowledged tail (what an OS crash could
lose), reopen, and check that every acknowledged batch is present, intact, with dense offsets.

TIDELOG_CRASH_CYCLES (default 200) sets the number of seeded cycles; raise it for a soak.
Every 200 cycles start a new data dir, so verification (which rereads the whole log) stays
linear in the number of cycles.
"""

from __future__ import annotations

import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tidelog.records.batch import iter_batches
from tidelog.storage.config import LogConfig
from tidelog.storage.manager import LogManager

from .crash_child import TP
from .helpers import read_all

CHILD = Path(__file__).with_name("crash_child.py")
CYCLES = int(os.environ.get("TIDELOG_CRASH_CYCLES", "200"))


class Child:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(CHILD)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self.lines.put(raw.decode().strip())
        self.lines.put("eof")

    def send(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{command}\n".encode())

    def expect(self, prefix: str, acks: list[tuple[int, int, int]]) -> str:
        """Next line starting with `prefix`; ack lines on the way are collected."""
        while True:
            line = self.lines.get(timeout=60)
            if line.startswith("ack "):
                base, last, crc = (int(v) for v in line.split()[1:])
                acks.append((base, last, crc))
                continue
            assert not line.startswith(("error", "eof")), line
            if line.startswith(prefix):
                return line

    def close(self) -> None:
        try:
            self.send("quit")
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()


def first_volatile_byte(directory: Path, durable_offset: int) -> tuple[Path, int] | None:
    """(last segment file, position of its first batch at or past durable_offset): everything
    from there on was never fsynced, so an OS crash could lose it."""
    segments = sorted(directory.glob("*.log"))
    if not segments:  # killed while creating the partition
        return None
    last = segments[-1]
    position = 0
    for batch in iter_batches(last.read_bytes()):
        if batch.base_offset >= durable_offset:
            return last, position
        position += batch.size
    return None


def verify(data_dir: Path, acks: list[tuple[int, int, int]], clean: bool) -> int:
    """Check every acknowledged batch; returns the log end offset (fsynced by the close)."""
    manager = LogManager(data_dir, LogConfig(), now_ms=0)
    try:
        log = manager.get(TP)
        assert log is not None or not acks
        if log is None:
            return 0
        stored = read_all(log)
        expected_next = stored[0].base_offset if stored else 0
        for batch in stored:  # dense offsets, every CRC good
            assert batch.base_offset == expected_next
            assert batch.is_valid()
            expected_next = batch.next_offset
        by_offset = {b.base_offset: b for b in stored}
        for base, last, crc in acks:
            batch = by_offset.get(base)
            assert batch is not None, f"acknowledged batch {base} lost"
            assert (batch.last_offset, batch.crc) == (last, crc)
        return log.log_end_offset
    finally:
        manager.close(clean=clean)


def test_crash_loop(tmp_path: Path) -> None:
    rng = random.Random(1234)
    child = Child()
    acked: list[tuple[int, int, int]] = []
    total_acked = 0
    verified_end = 0  # everything below was fsynced by the previous verify's close
    try:
        for cycle in range(CYCLES):
            data_dir = tmp_path / f"data{cycle // 200}"
            if cycle % 200 == 0:
                total_acked += len(acked)
                acked, verified_end = [], 0
            child.send(f"run {rng.randrange(2**32)} {data_dir}")
            pid = int(child.expect("pid", acked).split()[1])
            wanted = len(acked) + rng.randint(0, 6)
            deadline = time.monotonic() + 30
            while len(acked) < wanted and time.monotonic() < deadline:
                line = child.lines.get(timeout=30)
                assert line.startswith("ack "), line
                acked.append(tuple(int(v) for v in line.split()[1:]))  # type: ignore[arg-type]
            time.sleep(rng.random() * 0.003)
            os.kill(pid, signal.SIGKILL)
            child.send(f"reap {pid}")
            child.expect("reaped", acked)
            # Lose part of what was never acknowledged, as an OS crash may.
            directory = data_dir / TP.dir_name
            if rng.random() < 0.5 and directory.exists():
                durable = max(verified_end, acked[-1][1] + 1 if acked else 0)
                found = first_volatile_byte(directory, durable)
                if found is not None:
                    path, volatile_start = found
                    size = path.stat().st_size
                    if size > volatile_start:
                        os.truncate(path, rng.randint(volatile_start, size))
            verified_end = verify(data_dir, acked, clean=cycle % 3 == 0)
        assert total_acked + len(acked) > 0, "the child never acknowledged anything"
    finally:
        child.close()
