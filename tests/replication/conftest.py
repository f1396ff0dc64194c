"""One real ZooKeeper per session; each test gets its own chroot and its own brokers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidelog.cluster.zookeeper_server import (
    DEBIAN_ZOOKEEPER_JAR,
    ZooKeeperConfig,
    ZooKeeperServer,
    ZooKeeperServerError,
    free_port,
)

from .harness import Cluster


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    if not DEBIAN_ZOOKEEPER_JAR.is_file():
        pytest.fail(f"{DEBIAN_ZOOKEEPER_JAR} missing: run scripts/setup (Debian zookeeper)")
    data_dir: Path = tmp_path_factory.mktemp("zookeeper")
    server: ZooKeeperServer | None = None
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


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    """Three brokers (ids 1-3) in a fresh chroot; every process is killed at teardown."""
    chroot = f"/tidelog-repl-{uuid.uuid4().hex[:12]}"
    cluster = Cluster(zookeeper.connect_string + chroot, tmp_path)
    try:
        for node_id in (1, 2, 3):
            cluster.add(node_id)
            cluster.start(node_id)
        yield cluster
    finally:
        cluster.stop_all()
