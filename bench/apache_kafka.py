"""Apache Kafka and Tidelog brokers for the benchmarks, started on 127.0.0.1 and stopped by PID.

Kafka comes from `scripts/kafka` (Maven Central, KRaft, one combined broker+controller node);
Tidelog is `tidelog serve`. Both expose `bootstrap`, `pid` (for /proc CPU and RSS) and `stop()`.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KAFKA_SCRIPT = ROOT / "scripts" / "kafka"
TICK = os.sysconf("SC_CLK_TCK")


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int) -> int:
    """The first of `count` consecutive free ports on 127.0.0.1."""
    for _ in range(200):
        first = random.randint(20_000, 40_000)
        if all(port_free(first + i) for i in range(count)):
            return first
    raise RuntimeError("no free ports")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (all its threads) so far."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / TICK


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


class ApacheKafka:
    name = "kafka"

    def __init__(self, directory: Path, settings: dict[str, str] | None = None) -> None:
        self.dir = directory
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        port = free_ports(2)
        command = [sys.executable, str(KAFKA_SCRIPT), "start", "--dir", str(directory),
                   "--port", str(port)]
        for key, value in (settings or {}).items():
            command += ["--set", f"{key}={value}"]
        out = subprocess.run(command, capture_output=True, text=True, timeout=300,
                             stdin=subprocess.DEVNULL)
        match = re.search(r"kafka ready on (\S+)", out.stdout)
        if out.returncode != 0 or match is None:
            raise RuntimeError(f"scripts/kafka start failed:\n{out.stdout}\n{out.stderr}")
        self.bootstrap = match.group(1)
        self.pid = int((directory / "node-1" / "kafka.pid").read_text())

    @staticmethod
    def version() -> str:
        text = KAFKA_SCRIPT.read_text()
        match = re.search(r'KAFKA_VERSION = "([^"]+)"', text)
        return match.group(1) if match else "?"

    def stop(self) -> None:
        subprocess.run([sys.executable, str(KAFKA_SCRIPT), "stop", "--dir", str(self.dir)],
                       capture_output=True, timeout=120)


class TidelogBroker:
    name = "tidelog"

    def __init__(self, directory: Path, settings: dict[str, str] | None = None) -> None:
        self.dir = directory
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        command = [str(Path(sys.executable).with_name("tidelog")), "serve",
                   "--data-dir", str(directory / "data"), "--listen", "127.0.0.1:0",
                   "--metrics", "off", "--log-level", "warning"]
        for key, value in (settings or {}).items():
            command += ["--set", f"{key}={value}"]
        self.log = (directory / "serve.log").open("w")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.log,
                                        stdin=subprocess.DEVNULL, text=True,
                                        start_new_session=True)
        assert self.process.stdout is not None
        deadline = time.monotonic() + 60
        self.bootstrap = ""
        for line in self.process.stdout:
            match = re.search(r"tidelog ready on (\S+)", line)
            if match:
                self.bootstrap = match.group(1)
                break
            if time.monotonic() > deadline:
                break
        if not self.bootstrap:
            self.stop()
            raise RuntimeError("tidelog serve did not start")
        self.pid = self.process.pid

    @staticmethod
    def version() -> str:
        from importlib.metadata import version

        return version("tidelog")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.log.close()
