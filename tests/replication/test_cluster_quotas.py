"""Client quotas in a ZooKeeper cluster: stored in Kafka's ZooKeeper layout (`/config/clients`,
`/config/users/<user>/clients/<client-id>`, a `/config/changes` notice per change), so every
broker applies the same quotas: altered through one broker, described by another within a
second; written into ZooKeeper directly (as Kafka's ZooKeeper-mode tools did), applied by all."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from security.quota_clients import alter, describe
from tidelog.cluster.zk_quotas import ZkQuotaStore
from tidelog.cluster.zookeeper_server import ZooKeeperServer

from .harness import Cluster

PROPAGATION_LIMIT_S = 1.0


@pytest.fixture
def two_brokers(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[tuple[Cluster, str]]:
    chroot = f"/tidelog-quotas-{uuid.uuid4().hex[:12]}"
    cluster = Cluster(zookeeper.connect_string + chroot, tmp_path)
    try:
        for node_id in (1, 2):
            cluster.add(node_id)
            cluster.start(node_id)
        yield cluster, chroot
    finally:
        cluster.stop_all()


def _wait_described(address: str, expected: dict, limit_s: float) -> float:  # type: ignore[type-arg]
    started = time.monotonic()
    while True:
        found = describe(address)[2]
        if found == expected:
            return time.monotonic() - started
        if time.monotonic() - started > limit_s:
            raise AssertionError(f"{address} describes {found}, not {expected}")
        time.sleep(0.02)


def test_quotas_live_in_zookeeper_and_every_broker_applies_them(
    two_brokers: tuple[Cluster, str], zookeeper: ZooKeeperServer
) -> None:
    cluster, chroot = two_brokers
    first, second = cluster.brokers[1].address, cluster.brokers[2].address
    started = time.monotonic()
    assert alter(first, [
        ((("client-id", "app"),), [("producer_byte_rate", 204800.0, False)]),
        ((("user", "alice"), ("client-id", None)), [("request_percentage", 12.5, False)]),
    ]) == [("", None, (("client-id", "app"),)),
           ("", None, (("client-id", None), ("user", "alice")))]
    expected = {
        (("client-id", "app"),): {"producer_byte_rate": 204800.0},
        (("client-id", None), ("user", "alice")): {"request_percentage": 12.5},
    }
    _wait_described(second, expected, PROPAGATION_LIMIT_S + time.monotonic() - started)

    client = KazooClient(hosts=zookeeper.connect_string + chroot)
    client.start(timeout=15)
    try:
        data, _ = client.get("/config/clients/app")
        assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "204800"}}
        data, _ = client.get("/config/users/alice/clients/<default>")
        assert json.loads(data) == {"version": 1, "config": {"request_percentage": "12.5"}}
        notices = [json.loads(client.get(f"/config/changes/{name}")[0])
                   for name in sorted(client.get_children("/config/changes"))]
        assert {"version": 2, "entity_path": "clients/app"} in notices
        assert {"version": 2, "entity_path": "users/alice/clients/<default>"} in notices

        # Written straight into ZooKeeper (Kafka's layout, a SCRAM credential beside it):
        # both brokers take it from the notice, the credential is not a quota.
        client.create("/config/users/bob", json.dumps({"version": 1, "config": {
            "consumer_byte_rate": "4096", "SCRAM-SHA-256": "salt=...,stored_key=..."}}).encode(),
            makepath=True)
        client.create("/config/changes/config_change_", json.dumps(
            {"version": 2, "entity_path": "users/bob"}).encode(), sequence=True)
        expected[(("user", "bob"),)] = {"consumer_byte_rate": 4096.0}
        _wait_described(first, expected, 5.0)
        _wait_described(second, expected, 5.0)

        # Removing through the other broker keeps bob's credential
        alter(second, [((("user", "bob"),), [("consumer_byte_rate", 0.0, True)])])
        del expected[(("user", "bob"),)]
        _wait_described(first, expected, 5.0)
        data, _ = client.get("/config/users/bob")
        assert json.loads(data)["config"] == {"SCRAM-SHA-256": "salt=...,stored_key=..."}

        # Notices are purged once 15 minutes old (Kafka's changeExpirationMs); quotas stay.
        store = ZkQuotaStore(client)
        notices = client.get_children("/config/changes")
        now_ms = int(time.time() * 1000)
        assert store.purge_notices(now_ms) == 0
        assert store.purge_notices(now_ms + 16 * 60 * 1000) == len(notices)
        assert client.get_children("/config/changes") == []
        _wait_described(second, expected, 5.0)
    finally:
        client.stop()
        client.close()
