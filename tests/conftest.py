"""Shared fixtures: a real `tidelog serve` subprocess on a free port with a tmp data dir.

- `broker_factory` (function scope): call it to start brokers, e.g.
  `broker_factory(settings={"log.durability": "sync"})` or `broker_factory(data_dir=old.data_dir)`
  to restart on the same data. Every broker it started is stopped by PID at teardown.
- `broker` (module scope): one broker shared by a test module.

The broker listens on 127.0.0.1 port 0 and reports the real port in its ready line. Its stderr
goes to `<tmp>/broker-N.log`; a Python traceback in that log fails the test.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tidelog.cluster.zookeeper_server import (
    DEBIAN_ZOOKEEPER_JAR,
    ZooKeeperConfig,
    ZooKeeperServer,
    ZooKeeperServerError,
    free_port,
)

# Timings are never asserted, Hypothesis' per-example deadline (200 ms) included: on a loaded
# 2-core machine one example can take longer. Inherits the active profile (under CI, the "ci"
# profile Hypothesis loads by itself: derandomized, no database).
settings.register_profile(
    "tidelog",
    parent=settings.default,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("tidelog")

READY_PREFIX = "tidelog ready on "
START_TIMEOUT_S = 30.0


@dataclass
class BrokerProcess:
    host: str
    port: int
    data_dir: Path
    process: subprocess.Popen[bytes]
    log_path: Path
    args: list[str] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_text(self) -> str:
        return self.log_path.read_text("utf-8", "replace") if self.log_path.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 15.0) -> int:
        """Signal the broker (by PID) and wait for it; returns its exit status."""
        if self.process.poll() is None:
            os.kill(self.process.pid, sig)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return int(self.process.returncode)

    def kill(self) -> int:
        return self.stop(signal.SIGKILL)


class BrokerFactory:
    def __init__(self, tmp_dir: Path) -> None:
        self._tmp_dir = tmp_dir
        self.started: list[BrokerProcess] = []

    def __call__(
        self,
        data_dir: Path | None = None,
        *,
        settings: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        listen: str | None = "127.0.0.1:0",
    ) -> BrokerProcess:
        """`env`: extra environment variables for the broker process (e.g. LD_PRELOAD).
        `listen=None`: no --listen (the settings give `listeners`)."""
        index = len(self.started)
        if data_dir is None:
            data_dir = self._tmp_dir / f"data-{index}"
        log_path = self._tmp_dir / f"broker-{index}.log"
        args = [
            sys.executable,
            "-m",
            "tidelog.cli.main",
            "serve",
            "--data-dir",
            str(data_dir),
        ]
        if listen is not None:
            args += ["--listen", listen]
        for key, value in (settings or {}).items():
            args += ["--set", f"{key}={value}"]
        args += list(extra_args)
        with log_path.open("ab") as log_file:
            process = subprocess.Popen(
                args,
                stdout=subprocess.PIPE,
                stderr=log_file,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **env} if env else None,
            )
        broker = BrokerProcess("127.0.0.1", 0, data_dir, process, log_path, args)
        self.started.append(broker)
        line = _read_ready_line(process, START_TIMEOUT_S)
        if not line.startswith(READY_PREFIX):
            broker.kill()
            pytest.fail(f"broker did not start: {line!r}\n{broker.log_text()}")
        host, _, port = line[len(READY_PREFIX) :].strip().rpartition(":")
        broker.host, broker.port = host, int(port)
        return broker

    def stop_all(self) -> list[str]:
        """Stop every broker; returns the logs that contain a Python traceback."""
        bad = []
        for broker in self.started:
            broker.stop()
            text = broker.log_text()
            if "Traceback (most recent call last)" in text:
                bad.append(f"--- {broker.log_path} ---\n{text[-6000:]}")
        return bad


def _read_ready_line(process: subprocess.Popen[bytes], timeout_s: float) -> str:
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    line = b""
    try:
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                return f"<no ready line after {timeout_s}s>"
            chunk = os.read(process.stdout.fileno(), 1)
            if not chunk:
                return f"<exited with {process.wait()}> {line.decode(errors='replace')}"
            line += chunk
    finally:
        selector.close()
    return line.decode()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[BrokerFactory]:
    factory = BrokerFactory(tmp_path)
    try:
        yield factory
    finally:
        bad = factory.stop_all()
    if bad:
        pytest.fail("broker logged a traceback:\n" + "\n".join(bad))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    factory = BrokerFactory(tmp_path_factory.mktemp("broker"))
    try:
        yield factory()
    finally:
        bad = factory.stop_all()
    if bad:
        pytest.fail("broker logged a traceback:\n" + "\n".join(bad))


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper (Debian's package) for the whole session, stopped by PID at the end;
    the cluster and replication suites give each test its own chroot."""
    if not DEBIAN_ZOOKEEPER_JAR.is_file():
        pytest.fail(f"{DEBIAN_ZOOKEEPER_JAR} missing: run scripts/setup (Debian zookeeper)")
    data_dir: Path = tmp_path_factory.mktemp("zookeeper")
    server: ZooKeeperServer | None = None
    # A port found free can be taken before the JVM binds it; try a few.
    for _ in range(3):
        server = ZooKeeperServer(ZooKeeperConfig(data_dir=data_dir, port=free_port()))
        try:
            server.start()
            break
        except ZooKeeperServerError:
            server = None
    if server is None:
        pytest.fail("could not start ZooKeeper")
    try:
        yield server
    finally:
        server.stop()
