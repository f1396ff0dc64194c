"""Crash-loop child for test_crash_loop.py (run as a script, not collected by pytest).

One long-lived process imports Tidelog once, then for each `run <seed> <dir>` line forks a
worker that appends to the log in sync mode and writes `ack <base> <last> <crc>` on stdout
only after the group-commit fsync fired. The test SIGKILLs the worker; `reap <pid>` collects it
and answers `reaped` once every line the worker wrote is already in the pipe.
"""

from __future__ import annotations

import os
import random
import sys
import threading
from pathlib import Path

from tidelog.records.batch import RecordBatch
from tidelog.records.builder import NewRecord, build_batch
from tidelog.storage.config import LogConfig
from tidelog.storage.manager import LogManager
from tidelog.types import TopicPartition

TP = TopicPartition("crash", 0)
CONFIG = LogConfig(segment_bytes=8192, index_interval_bytes=256, durability="sync")
MAX_UNACKED = 8


def say(line: str) -> None:
    os.write(1, (line + "\n").encode())  # one write < PIPE_BUF: atomic in the pipe


def worker(data_dir: Path, seed: int) -> None:
    rng = random.Random(seed)
    manager = LogManager(data_dir, CONFIG, now_ms=0)
    log = manager.get(TP) or manager.create(TP, CONFIG)
    window = threading.Semaphore(MAX_UNACKED)
    counter = 0
    while True:
        window.acquire()
        counter += 1
        records = [
            NewRecord(rng.randbytes(rng.randint(1, 300)), key=f"{seed}-{counter}".encode(),
                      timestamp_ms=counter)
            for _ in range(rng.randint(1, 4))
        ]
        batch = RecordBatch(memoryview(build_batch(records, now_ms=counter)))
        result = log.append([batch], now_ms=counter)
        line = f"ack {result.base_offset} {result.last_offset} {batch.crc}"

        def acked(error: BaseException | None, line: str = line) -> None:
            say(line if error is None else f"error {error!r}")
            window.release()

        manager.request_sync(log, result.last_offset + 1, acked)


def main() -> None:
    for command in sys.stdin:
        name, *args = command.split()
        if name == "run":
            pid = os.fork()
            if pid == 0:
                try:
                    worker(Path(args[1]), int(args[0]))
                except BaseException as error:
                    say(f"error {error!r}")
                os._exit(1)
            say(f"pid {pid}")
        elif name == "reap":
            os.waitpid(int(args[0]), 0)
            say("reaped")
        elif name == "quit":
            return


if __name__ == "__main__":
    main()
