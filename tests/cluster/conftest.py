"""A real ZooKeeper (Debian's package) for the cluster tests, shared by the whole session.

- `zookeeper` (session scope): a standalone server on a free loopback port, data in a tmp dir,
  stopped by PID at the end.
- `zk_factory` (function scope): call it to get a started KazooClient rooted at a chroot of
  this test's own, so tests never see each other's znodes. Clients are stopped at teardown.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tidelog.cluster.zookeeper_server import (
    DEBIAN_ZOOKEEPER_JAR,
    ZooKeeperConfig,
    ZooKeeperServer,
    ZooKeeperServerError,
    free_port,
)

SESSION_TIMEOUT_S = 6.0

ZkFactory = Callable[[], KazooClient]


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
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
