"""Cluster tests use the session-wide real ZooKeeper of tests/conftest.py.

- `zk_factory` (function scope): call it to get a started KazooClient rooted at a chroot of
  this test's own, so tests never see each other's znodes. Clients are stopped at teardown.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from tidelog.cluster.zookeeper_server import (
    ZooKeeperServer,
)

SESSION_TIMEOUT_S = 6.0

ZkFactory = Callable[[], KazooClient]


@pytest.fixture
def zk_factory(zookeeper: ZooKeeperServer) -> Iterator[ZkFactory]:
    chroot = f"/tidelog-test-{uuid.uuid4().hex[:12]}"
    admin = KazooClient(hosts=zookeeper.connect_string, timeout=SESSION_TIMEOUT_S)
    admin.start(timeout=15)
    admin.ensure_path(chroot)
    clients: list[KazooClient] = [admin]

    def make() -> KazooClient:
        client = KazooClient(hosts=zookeeper.connect_string + chroot, timeout=SESSION_TIMEOUT_S)
        client.start(timeout=15)
        clients.append(client)
        return client

    try:
        yield make
    finally:
        for client in reversed(clients[1:]):
            client.stop()
            client.close()
        admin.delete(chroot, recursive=True)
        admin.stop()
        admin.close()
