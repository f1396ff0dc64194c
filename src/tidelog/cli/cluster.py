"""`tidelog cluster up|down`: a ZooKeeper and N brokers on loopback, for users and tests.

`up` starts Debian's ZooKeeper and `tidelog serve --zookeeper` processes (node ids 1..N, each
in its own session so they outlive this command), waits for each ready line, writes PID files
and prints the addresses. `down` stops what `up` started, by PID file, and only processes
that still run what we started (a recycled PID is never signalled).

Layout of DIR: zookeeper/ (data, zookeeper.pid), broker-<id>/ (data), broker-<id>.pid,
broker-<id>.log (stderr), broker-<id>.out (stdout: the ready line).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import click

from tidelog.cluster.zookeeper_server import (
    ZooKeeperConfig,
    ZooKeeperServer,
    ZooKeeperServerError,
    free_port,
    stop_from_pid_file,
)

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
DEFAULT_DIR = Path("tidelog-cluster")


def _tidelog_command() -> list[str]:
    script = Path(sys.executable).with_name("tidelog")
    return [str(script)] if script.exists() else [sys.executable, "-m", "tidelog.cli.main"]


def _wait_ready(out_path: Path, process: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        text = out_path.read_text("utf-8", "replace") if out_path.exists() else ""
        if "tidelog ready on " in text:
            return text.split("tidelog ready on ", 1)[1].split()[0]
        if process.poll() is not None:
            raise click.ClickException(f"broker exited with status {process.returncode}")
        time.sleep(0.1)
    raise click.ClickException("broker did not print its ready line in time")


def _running_broker(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"serve" in cmdline and any(b"tidelog" in part for part in cmdline)


@click.group("cluster")
def cluster_group() -> None:
    """Run a local ZooKeeper-coordinated cluster."""


@cluster_group.command("up")
@click.option("--brokers", "count", type=click.IntRange(1, 9), default=3, show_default=True)
@click.option("--dir", "directory", type=click.Path(path_type=Path), default=DEFAULT_DIR,
              show_default=True)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Passed to every broker's `tidelog serve --set`.")
def cluster_up(count: int, directory: Path, sets: tuple[str, ...]) -> None:
    """Start ZooKeeper and COUNT brokers on 127.0.0.1; prints their addresses."""
    directory.mkdir(parents=True, exist_ok=True)
    zookeeper = ZooKeeperServer(ZooKeeperConfig(directory / "zookeeper", free_port()))
    try:
        zookeeper.start()
    except ZooKeeperServerError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"zookeeper {zookeeper.connect_string} (pid {zookeeper.pid})")
    addresses = []
    for node_id in range(1, count + 1):
        out_path = directory / f"broker-{node_id}.out"
        out_path.unlink(missing_ok=True)
        command = [
            *_tidelog_command(), "serve",
            "--data-dir", str(directory / f"broker-{node_id}"),
            "--listen", f"127.0.0.1:{free_port()}",
            "--node-id", str(node_id),
            "--zookeeper", zookeeper.connect_string,
            "--metrics", "off",
            "--set", f"default.replication.factor={min(count, 3)}",
        ]
        for item in sets:
            command += ["--set", item]
        with open(out_path, "wb") as out, open(directory / f"broker-{node_id}.log", "ab") as err:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                       start_new_session=True)
        (directory / f"broker-{node_id}.pid").write_text(f"{process.pid}\n", "ascii")
        address = _wait_ready(out_path, process)
        addresses.append(address)
        click.echo(f"broker {node_id} {address} (pid {process.pid})")
    click.echo(f"bootstrap.servers={','.join(addresses)}")


@cluster_group.command("down")
@click.option("--dir", "directory", type=click.Path(path_type=Path), default=DEFAULT_DIR,
              show_default=True)
def cluster_down(directory: Path) -> None:
    """Stop the brokers and the ZooKeeper that `cluster up` started in DIR."""
    stopping = []
    for pid_file in sorted(directory.glob("broker-*.pid")):
        with contextlib.suppress(ValueError, OSError):
            pid = int(pid_file.read_text("ascii").strip())
            if _running_broker(pid):
                os.kill(pid, signal.SIGTERM)
                stopping.append(pid)
        pid_file.unlink(missing_ok=True)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for pid in stopping:
        while _running_broker(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _running_broker(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    click.echo(f"stopped {len(stopping)} brokers")
    if stop_from_pid_file(directory / "zookeeper"):
        click.echo("stopped zookeeper")
