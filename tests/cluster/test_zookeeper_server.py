"""Starting and stopping Debian's ZooKeeper: config, readiness, PID handling, restart on data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tidelog.cluster.zookeeper_server import (
    ZooKeeperConfig,
    ZooKeeperServer,
    ZooKeeperServerError,
    four_letter_word,
    free_port,
    stop_from_pid_file,
)


def test_session_server_is_standalone_on_loopback(zookeeper: ZooKeeperServer) -> None:
    answer = four_letter_word(zookeeper.config.port, "srvr")
    assert "Mode: standalone" in answer
    assert zookeeper.pid is not None
    assert zookeeper.pid_file.read_text().strip() == str(zookeeper.pid)
    config = (zookeeper.config.data_dir / "zoo.cfg").read_text()
    assert "clientPortAddress=127.0.0.1" in config
    assert "admin.enableServer=false" in config


def test_restart_keeps_data_and_pid_file_stop(tmp_path: Path) -> None:
    server = ZooKeeperServer(ZooKeeperConfig(data_dir=tmp_path / "zk", port=free_port()))
    server.start()
    try:
        client = KazooClient(hosts=server.connect_string, timeout=6.0)
        client.start(timeout=15)
        client.create("/kept", b"value")
        client.stop()
        client.close()
        pid = server.pid
        assert pid is not None
        server.stop()
        assert not Path(f"/proc/{pid}").exists() or _is_zombie(pid)
        assert not server.pid_file.exists()

        server.start()  # same data dir: the znode survives
        client = KazooClient(hosts=server.connect_string, timeout=6.0)
        client.start(timeout=15)
        assert client.get("/kept")[0] == b"value"
        client.stop()
        client.close()
        # `tidelog cluster down` stops it from another process, by the PID file.
        assert stop_from_pid_file(server.config.data_dir) is True
        assert server.stop() is not None  # reaps the child; already stopped
        assert stop_from_pid_file(server.config.data_dir) is False
    finally:
        server.stop()


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return False


def test_pid_file_naming_a_foreign_process_is_not_killed(tmp_path: Path) -> None:
    (tmp_path / "zookeeper.pid").write_text(f"{os.getpid()}\n")
    assert stop_from_pid_file(tmp_path) is False
    assert not (tmp_path / "zookeeper.pid").exists()


def test_start_failures_are_typed(tmp_path: Path) -> None:
    with pytest.raises(ZooKeeperServerError):
        ZooKeeperServer(ZooKeeperConfig(tmp_path, free_port()), java="/nonexistent/java").start()
    with pytest.raises(ZooKeeperServerError):
        ZooKeeperServer(ZooKeeperConfig(tmp_path, free_port()), jar=tmp_path / "no.jar").start()
    with pytest.raises(ZooKeeperServerError):
        ZooKeeperConfig(tmp_path, 0).render()
    with pytest.raises(ZooKeeperServerError):
        four_letter_word(1, "toolong")
