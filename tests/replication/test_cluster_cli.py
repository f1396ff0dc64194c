"""`tidelog cluster up` / `down` as a user runs them: real processes, stopped by PID file."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

TIDELOG = str(Path(sys.executable).with_name("tidelog"))


def test_cluster_up_serves_three_brokers_and_down_stops_them(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    up = subprocess.run([TIDELOG, "cluster", "up", "--brokers", "3", "--dir", str(directory)],
                        capture_output=True, text=True, timeout=120)
    try:
        assert up.returncode == 0, up.stderr
        bootstrap = up.stdout.strip().splitlines()[-1].split("=", 1)[1]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        # The broker that answers learns of the last one to register from a ZooKeeper watch,
        # which can trail that broker's ready line.
        deadline = time.monotonic() + 30
        metadata = admin.list_topics(timeout=10)
        while sorted(metadata.brokers) != [1, 2, 3] and time.monotonic() < deadline:
            time.sleep(0.2)
            metadata = admin.list_topics(timeout=10)
        assert sorted(metadata.brokers) == [1, 2, 3]
        assert metadata.controller_id in (1, 2, 3)
    finally:
        down = subprocess.run([TIDELOG, "cluster", "down", "--dir", str(directory)],
                              capture_output=True, text=True, timeout=60)
    assert down.returncode == 0, down.stderr
    assert "stopped 3 brokers" in down.stdout and "stopped zookeeper" in down.stdout
    assert not list(directory.glob("*.pid"))
    assert not (directory / "zookeeper" / "zookeeper.pid").exists()
