"""One real ZooKeeper per session; each test gets its own chroot and its own brokers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidelog.cluster.zookeeper_server import (
    ZooKeeperServer,
)

from .harness import Cluster


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
