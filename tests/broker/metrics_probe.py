"""Wait on a live broker's /metrics for an observable state instead of sleeping."""

from __future__ import annotations

import time
import urllib.request

from tidelog.cluster.zookeeper_server import free_port


def metrics_args() -> tuple[list[str], int]:
    """`serve` arguments for a metrics endpoint on a free port, and that port."""
    port = free_port()
    return ["--metrics", f"127.0.0.1:{port}"], port


def gauge(port: int, name: str) -> float | None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def wait_for_parked_fetches(port: int, count: int, timeout_s: float = 20.0) -> None:
    """Return once `count` fetches are parked on the broker; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    parked = None
    while time.monotonic() < deadline:
        parked = gauge(port, "tidelog_fetches_parked")
        if parked is not None and parked >= count:
            return
        time.sleep(0.01)
    raise AssertionError(f"{count} parked fetches expected within {timeout_s} s; saw {parked}")
