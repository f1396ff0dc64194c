"""Crash loop: a child appends in sync mode and reports each acknowledged batch; we SIGKILL it
at a random moment, drop a random part of the unacknowledged tail (what an OS crash could
lose), reopen, and check that every acknowledged batch is present, intact, with dense offsets.

TIDELOG_CRASH_CYCLES (default 200) sets the number of seeded cycles; raise it for a soak.
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
    def __init__(self, data_dir: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(CHILD), str(data_dir)],
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


def end_of_batch(directory: Path, base_offset: int) -> tuple[Path, int] | None:
    """(segment file, end position) of the batch at base_offset, if in the last segment."""
    last = sorted(directory.glob("*.log"))[-1]
    position = 0
    for batch in iter_batches(last.read_bytes()):
        position += batch.size
        if batch.base_offset == base_offset:
            return last, position
    return None


def verify(data_dir: Path, acks: list[tuple[int, int, int]], clean: bool) -> None:
    manager = LogManager(data_dir, LogConfig(), now_ms=0)
    try:
        log = manager.get(TP)
        assert log is not None or not acks
        if log is None:
            return
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
    finally:
        manager.close(clean=clean)


def test_crash_loop(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    rng = random.Random(1234)
    child = Child(data_dir)
    acked: list[tuple[int, int, int]] = []
    try:
        for cycle in range(CYCLES):
            child.send(f"run {rng.randrange(2**32)}")
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
            if acked and rng.random() < 0.5 and directory.exists():
                found = end_of_batch(directory, acked[-1][0])
                if found is not None:
                    path, durable_end = found
                    size = path.stat().st_size
                    if size > durable_end:
                        os.truncate(path, rng.randint(durable_end, size))
            verify(data_dir, acked, clean=cycle % 3 == 0)
        assert acked, "the child never acknowledged anything"
    finally:
        child.close()
