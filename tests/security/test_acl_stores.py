"""One contract suite for the ACL stores (broker/acl_store.FileAclStore and
cluster/zk_acls.ZkAclStore against the session's real ZooKeeper), plus the ZooKeeper layout
byte for byte as Kafka's ZooKeeper mode wrote it."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from tidelog.broker.acl_store import FileAclStore
from tidelog.cluster import zk_acls
from tidelog.cluster.zookeeper_server import ZooKeeperServer
from tidelog.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

TYPES = [ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID,
         ResourceType.USER]
OPERATIONS = [op for op in AclOperation if op >= AclOperation.ALL]


def binding(kind: ResourceType, name: str, pattern: PatternType, principal: str,
            host: str, op: AclOperation, permission: AclPermissionType) -> AclBinding:
    return AclBinding(ResourcePattern(kind, name, pattern),
                      AccessControlEntry(principal, host, op, permission))


SAMPLE = frozenset({
    binding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
            AclOperation.READ, AclPermissionType.ALLOW),
    binding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:eve", "10.0.0.1",
            AclOperation.ALL, AclPermissionType.DENY),
    binding(ResourceType.TOPIC, "ord", PatternType.PREFIXED, "User:*", "*",
            AclOperation.DESCRIBE_CONFIGS, AclPermissionType.ALLOW),
    binding(ResourceType.TOPIC, "*", PatternType.LITERAL, "User:ops", "*",
            AclOperation.DESCRIBE, AclPermissionType.ALLOW),
    binding(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:admin", "*",
            AclOperation.IDEMPOTENT_WRITE, AclPermissionType.ALLOW),
    binding(ResourceType.GROUP, "billing", PatternType.LITERAL, "User:alice", "*",
            AclOperation.READ, AclPermissionType.ALLOW),
    binding(ResourceType.TRANSACTIONAL_ID, "tx-", PatternType.PREFIXED, "User:app", "*",
            AclOperation.WRITE, AclPermissionType.ALLOW),
})


@pytest.fixture
def zk_client(zookeeper: ZooKeeperServer) -> Iterator[KazooClient]:
    chroot = f"/tidelog-acls-{uuid.uuid4().hex[:12]}"
    admin = KazooClient(hosts=zookeeper.connect_string, timeout=6.0)
    admin.start(timeout=15)
    admin.ensure_path(chroot)
    client = KazooClient(hosts=zookeeper.connect_string + chroot, timeout=6.0)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        admin.delete(chroot, recursive=True)
        admin.stop()


@pytest.fixture(params=["file", "zookeeper"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "file":
        return FileAclStore(tmp_path)
    return zk_acls.ZkAclStore(request.getfixturevalue("zk_client"))


def test_empty_store_loads_nothing(store: Any) -> None:
    assert store.load() == frozenset()


def test_save_then_load_round_trips_and_removes(store: Any) -> None:
    store.save(SAMPLE)
    assert store.load() == SAMPLE
    fewer = frozenset(b for b in SAMPLE if b.entry.principal != "User:alice")
    store.save(fewer)
    assert store.load() == fewer
    store.save(frozenset())
    assert store.load() == frozenset()


def test_random_sets_round_trip(store: Any) -> None:
    rng = random.Random(11)
    for _ in range(25):
        wanted = frozenset(
            binding(rng.choice(TYPES), rng.choice(["a", "ab", "b-c", "*", "x.y"]),
                    rng.choice([PatternType.LITERAL, PatternType.PREFIXED]),
                    rng.choice(["User:a", "User:*", "Group:g"]),
                    rng.choice(["*", "127.0.0.1", "::1"]), rng.choice(OPERATIONS),
                    rng.choice([AclPermissionType.ALLOW, AclPermissionType.DENY]))
            for _ in range(rng.randint(0, 8))
        )
        wanted = frozenset(b for b in wanted
                           if not (b.pattern.pattern_type == PatternType.PREFIXED
                                   and b.pattern.name == "*"))
        store.save(wanted)
        assert store.load() == wanted


def test_zookeeper_layout_is_kafkas(zk_client: KazooClient) -> None:
    zk_acls.ZkAclStore(zk_client).save(SAMPLE)
    data, _ = zk_client.get("/kafka-acl/Topic/orders")
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:eve", "permissionType": "Deny", "operation": "All",
         "host": "10.0.0.1"},
    ]}
    data, _ = zk_client.get("/kafka-acl-extended/prefixed/Topic/ord")
    assert json.loads(data)["acls"][0]["operation"] == "DescribeConfigs"
    data, _ = zk_client.get("/kafka-acl/Cluster/kafka-cluster")
    assert json.loads(data)["acls"][0]["operation"] == "IdempotentWrite"
    assert zk_client.exists("/kafka-acl-extended/prefixed/TransactionalId/tx-")
    literal = sorted(zk_client.get_children("/kafka-acl-changes"))
    extended = sorted(zk_client.get_children("/kafka-acl-extended-changes"))
    assert len(literal) == 4 and len(extended) == 2  # one notice per changed pattern
    notices = {zk_client.get(f"/kafka-acl-changes/{name}")[0] for name in literal}
    assert b"Topic:orders" in notices and b"Cluster:kafka-cluster" in notices
    event = json.loads(zk_client.get(f"/kafka-acl-extended-changes/{extended[0]}")[0])
    assert event["version"] == 1 and event["patternType"] == "PREFIXED"
    # saving the same set again changes nothing and announces nothing
    zk_acls.ZkAclStore(zk_client).save(SAMPLE)
    assert len(zk_client.get_children("/kafka-acl-changes")) == 4


def test_change_notices_decode_as_kafka_writes_them() -> None:
    for pattern in {b.pattern for b in SAMPLE}:
        prefix, data = zk_acls.change_notification(pattern)
        assert zk_acls.decode_change(prefix, data) == pattern
    # Kafka's LiteralAclChangeStore writes the enum's toString: TOPIC:orders
    assert zk_acls.decode_change(zk_acls.LITERAL_CHANGES, b"TOPIC:orders") == ResourcePattern(
        ResourceType.TOPIC, "orders", PatternType.LITERAL
    )
    with pytest.raises(zk_acls.ZkAclError):
        zk_acls.decode_change(zk_acls.LITERAL_CHANGES, b"no-separator")


def test_a_znode_kafka_would_not_write_is_an_error(zk_client: KazooClient) -> None:
    zk_client.create("/kafka-acl/Topic/bad", b'{"version":1,"acls":[{"principal":"x"}]}',
                     makepath=True)
    with pytest.raises(zk_acls.ZkAclError, match="/kafka-acl/Topic/bad"):
        zk_acls.ZkAclStore(zk_client).load()


def test_update_applies_a_change_to_what_is_stored(store: Any) -> None:
    """`update` changes the stored set, not the caller's copy: two writers (two brokers whose
    caches lag) each adding and removing their own entries keep each other's."""
    alice, eve, ops = sorted(b for b in SAMPLE if b.pattern.name in ("orders", "*"))
    assert store.update({alice}, ()) == {alice}
    assert store.update({eve, ops}, ()) == {alice, eve, ops}  # a writer that never saw alice
    assert store.update((), {eve}) == {alice, ops}
    assert store.update((), {eve}) == {alice, ops}  # removing the absent: no change
    assert store.load() == {alice, ops}


def test_concurrent_updates_of_one_pattern_lose_nothing(zk_client: KazooClient,
                                                        zookeeper: ZooKeeperServer) -> None:
    """Two ZooKeeper sessions (two brokers) add 20 entries each to the same znode at once:
    the versioned rewrites retry, and all 40 are stored, with one notice per change."""
    other = KazooClient(hosts=zookeeper.connect_string + zk_client.chroot, timeout=6.0)
    other.start(timeout=15)
    errors: list[BaseException] = []

    def writer(client: KazooClient, principal: str) -> None:
        try:
            store = zk_acls.ZkAclStore(client)
            for index in range(20):
                store.update({binding(ResourceType.TOPIC, "shared", PatternType.LITERAL,
                                      f"User:{principal}{index}", "*", AclOperation.READ,
                                      AclPermissionType.ALLOW)}, ())
        except BaseException as error:  # reported below
            errors.append(error)

    try:
        threads = [threading.Thread(target=writer, args=(zk_client, "a")),
                   threading.Thread(target=writer, args=(other, "b"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        other.stop()
    assert errors == []
    stored = zk_acls.ZkAclStore(zk_client).load()
    assert len(stored) == 40
    assert len(zk_client.get_children("/kafka-acl-changes")) == 40


def test_expired_notices_are_purged(zk_client: KazooClient) -> None:
    store = zk_acls.ZkAclStore(zk_client)
    store.ensure_change_paths()
    store.update(SAMPLE, ())
    count = len(zk_client.get_children("/kafka-acl-changes")) + len(
        zk_client.get_children("/kafka-acl-extended-changes"))
    assert count == len({b.pattern for b in SAMPLE})
    assert store.purge_notices(now_ms=0) == 0  # nothing is 15 minutes old yet
    later = 2**62  # far past every notice's creation time
    assert store.purge_notices(now_ms=later) == count
    assert zk_client.get_children("/kafka-acl-changes") == []
    assert store.load() == SAMPLE  # the ACLs themselves stay


def test_change_notices_are_applied_pattern_by_pattern(zk_client: KazooClient) -> None:
    """AclChanges (each broker's listener) follows another writer's changes from the notices
    alone, re-reading only the patterns they name; a reload gives the same set."""
    writer = zk_acls.ZkAclStore(zk_client)
    writer.ensure_change_paths()
    listener = zk_acls.AclChanges(zk_acls.ZkAclStore(zk_client))
    first, *rest = sorted(SAMPLE)
    writer.update({first}, ())
    assert listener.reload() == {first}
    assert listener.process() is None  # nothing new
    writer.update(rest, ())
    assert listener.process() == SAMPLE
    writer.update((), {first})
    assert listener.process() == SAMPLE - {first}
    # a notice naming a pattern whose znode is gone: the pattern is read again, empty
    zk_client.delete(zk_acls.znode_path(rest[0].pattern))
    zk_client.create(*zk_acls.change_notification(rest[0].pattern), sequence=True)
    expected = frozenset(b for b in SAMPLE - {first} if b.pattern != rest[0].pattern)
    assert listener.process() == expected
    assert zk_acls.AclChanges(writer).reload() == expected


def test_tidelog_acls_add_writes_into_zookeeper(zk_client: KazooClient,
                                                zookeeper: ZooKeeperServer) -> None:
    """`tidelog acls add --authorizer-properties zookeeper.connect=...` (kafka-acls' ZooKeeper
    mode): Kafka's znodes and a notice per pattern, no broker involved."""
    tidelog = str(Path(sys.executable).with_name("tidelog"))
    connect = f"zookeeper.connect={zookeeper.connect_string}{zk_client.chroot}"
    done = subprocess.run(
        [tidelog, "acls", "add", "--authorizer-properties", connect,
         "--deny-principal", "User:eve", "--deny-host", "10.0.0.1", "--operation", "Write",
         "--topic", "ord", "--resource-pattern-type", "prefixed"],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert zk_acls.ZkAclStore(zk_client).load() == {
        binding(ResourceType.TOPIC, "ord", PatternType.PREFIXED, "User:eve", "10.0.0.1",
                AclOperation.WRITE, AclPermissionType.DENY)}
    assert len(zk_client.get_children("/kafka-acl-extended-changes")) == 1
    refused = subprocess.run(
        [tidelog, "acls", "add", "--authorizer-properties", "zookeeper.session=1",
         "--allow-principal", "User:a", "--topic", "t"],
        capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2, refused.stderr
    assert "zookeeper.connect" in refused.stderr
