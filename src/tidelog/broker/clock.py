"""The only module that reads the clock (STYLE habit 2: pure code takes `now_ms`)."""

from __future__ import annotations

import time


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch (record timestamps, retention)."""
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    """Monotonic milliseconds for deadlines (long poll, timers); never goes backwards."""
    return time.monotonic_ns() // 1_000_000


def monotonic_s() -> float:
    """High-resolution monotonic seconds for measuring durations (fsync latency)."""
    return time.perf_counter()
