"""ACLs in a ZooKeeper cluster (Kafka's ZK-mode AclAuthorizer): three real brokers with the
authorizer on, real ZooKeeper, confluent-kafka clients and raw requests aimed at one broker.

Until SASL/TLS authenticate connections every connection is `User:ANONYMOUS`, the brokers'
replica fetchers included. So the brokers' principal gets CLUSTER_ACTION on the cluster through
an ACL written into ZooKeeper before the first start (`tidelog acls add --authorizer-properties
zookeeper.connect=...`, kafka-acls' ZooKeeper mode), with what the test's admin needs on the cluster
(CREATE, ALTER, DESCRIBE); topics are covered by no ACL, so a client is refused everything on
them until a test grants it. The other setup Kafka's docs name, the broker principal in
`super.users`, is `test_super_user_brokers_replicate_and_fail_over`'s.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kazoo.client import KazooClient

from broker.raw import RawClient, request_module
from security import clients
from tidelog.cluster.zookeeper_server import ZooKeeperServer
from tidelog.errors import ErrorCode

from .harness import Cluster
from .raw_requests import METADATA, call

TOPIC = "orders"
ANONYMOUS = "User:ANONYMOUS"
AUTHORIZER = "authorizer.class.name=kafka.security.authorizer.AclAuthorizer"
DELETE_RECORDS, CREATE_ACLS, DELETE_ACLS = 21, 30, 31
# Kafka's codes: resource TOPIC 2, pattern LITERAL 3, operation ALL 2, permission ALLOW 3.
TOPIC_ALL_FOR_ANONYMOUS = {
    "resource_type": 2, "resource_name": TOPIC, "resource_pattern_type": 3,
    "principal": ANONYMOUS, "host": "*", "operation": 2, "permission_type": 3,
}
PROPAGATION_LIMIT_S = 1.0


def _start(zookeeper: ZooKeeperServer, root: Path, sets: tuple[str, ...],
           seeds: tuple[tuple[str, ...], ...]) -> Cluster:
    """Three brokers in a fresh chroot, after `tidelog acls add --authorizer-properties
    zookeeper.connect=...` wrote each of `seeds` (kafka-acls' flags) into ZooKeeper."""
    chroot = f"/tidelog-acls-{uuid.uuid4().hex[:12]}"
    client = KazooClient(hosts=zookeeper.connect_string)
    client.start(timeout=15)
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()
    connect = zookeeper.connect_string + chroot
    for seed in seeds:
        done = subprocess.run(
            [str(Path(sys.executable).with_name("tidelog")), "acls", "add",
             "--authorizer-properties", f"zookeeper.connect={connect}", *seed],
            capture_output=True, text=True, timeout=60, check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.count("Added") >= 1, done.stdout
    cluster = Cluster(connect, root, extra_sets=(AUTHORIZER, *sets))
    try:
        for node_id in (1, 2, 3):
            cluster.add(node_id)
            cluster.start(node_id)
    except BaseException:
        cluster.stop_all()
        raise
    return cluster


@pytest.fixture
def acl_cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    seeds = (
        # the brokers' follower fetches (CLUSTER_ACTION), and the test's admin
        ("--allow-principal", ANONYMOUS, "--cluster", "--operation", "ClusterAction",
         "--operation", "Create", "--operation", "Alter", "--operation", "Describe"),
        # consumer groups are not the subject here
        ("--allow-principal", ANONYMOUS, "--group", "*", "--operation", "All"),
    )
    cluster = _start(zookeeper, tmp_path, (), seeds)
    try:
        yield cluster
    finally:
        cluster.stop_all()


def _topic_error(address: str) -> str:
    """Metadata v12 for TOPIC asked of this one broker: the topic's error name."""
    module = request_module(METADATA, 12)
    body = module.MetadataRequest(
        topics=(module.MetadataRequestTopic(name=TOPIC, topic_id=None),),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False,
    )
    return ErrorCode(int(call(address, METADATA, 12, body).topics[0].error_code)).name


def _wait_everywhere(cluster: Cluster, expected: str, since: float) -> dict[int, float]:
    """Seconds from `since` until each broker answers `expected` for TOPIC (20 s deadline)."""
    seen: dict[int, float] = {}
    deadline = time.monotonic() + 20
    last: dict[int, str] = {}
    while len(seen) < len(cluster.brokers) and time.monotonic() < deadline:
        for node_id, broker in cluster.brokers.items():
            if node_id not in seen:
                last[node_id] = _topic_error(broker.address)
                if last[node_id] == expected:
                    seen[node_id] = time.monotonic() - since
        time.sleep(0.005)
    assert len(seen) == len(cluster.brokers), f"still answering {last}, wanted {expected}"
    return seen


def _delete_records(address: str) -> str:
    """DeleteRecords v2 of partition 0 up to offset 0, asked of this one broker."""
    with RawClient(address) as client:
        module = request_module(DELETE_RECORDS, 2)
        response = client.call(DELETE_RECORDS, 2, module.DeleteRecordsRequest(
            topics=(module.DeleteRecordsTopic(name=TOPIC, partitions=(
                module.DeleteRecordsPartition(partition_index=0, offset=0),)),),
            timeout=timedelta(seconds=5)))
    return ErrorCode(int(response.topics[0].partitions[0].error_code)).name


def _create_acl(address: str) -> list[str]:
    with RawClient(address) as client:
        module = request_module(CREATE_ACLS, 3)
        response = client.call(CREATE_ACLS, 3, module.CreateAclsRequest(
            creations=(module.AclCreation(**TOPIC_ALL_FOR_ANONYMOUS),)))
    return [ErrorCode(int(r.error_code)).name for r in response.results]


def _delete_acl(address: str) -> tuple[str, int]:
    """DeleteAcls v3 of the topic ACL through this one broker: (error, ACLs deleted)."""
    with RawClient(address) as client:
        module = request_module(DELETE_ACLS, 3)
        fields: dict[str, Any] = {
            "resource_type_filter": 2, "resource_name_filter": TOPIC,
            "pattern_type_filter": 3, "principal_filter": ANONYMOUS, "host_filter": "*",
            "operation": 2, "permission_type": 3,
        }
        response = client.call(DELETE_ACLS, 3, module.DeleteAclsRequest(
            filters=(module.DeleteAclsFilter(**fields),)))
    result = response.filter_results[0]
    return ErrorCode(int(result.error_code)).name, len(result.matching_acls)


def _produce(cluster: Cluster, values: list[bytes]) -> list[str]:
    """Each message's delivery error name ("" when written)."""
    outcome: list[str] = []
    producer = Producer({
        "bootstrap.servers": cluster.bootstrap(), "acks": "all", "message.timeout.ms": 20_000,
        "enable.idempotence": False,
    })
    for value in values:
        producer.produce(TOPIC, value, on_delivery=lambda err, _msg: outcome.append(
            "" if err is None else err.name()))
    assert producer.flush(30) == 0
    return outcome


def _consume(cluster: Cluster, count: int) -> list[bytes]:
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap(), "group.id": f"g-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })
    got: list[bytes] = []
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    return got


def test_an_acl_change_reaches_every_broker_within_a_second(acl_cluster: Cluster) -> None:
    cluster = acl_cluster
    cluster.create_topic(TOPIC, partitions=1, replication=3)  # CREATE on the cluster

    # No ACL on the topic: refused on every broker (Metadata asked of each one), and a real
    # producer and a raw consumer Fetch are refused.
    for broker in cluster.brokers.values():
        assert _topic_error(broker.address) == "TOPIC_AUTHORIZATION_FAILED"
        assert clients.produce(broker.address, TOPIC) == "TOPIC_AUTHORIZATION_FAILED"
        assert clients.fetch_raw(broker.address, TOPIC) == "TOPIC_AUTHORIZATION_FAILED"
        assert clients.init_producer_id_raw(broker.address) == "CLUSTER_AUTHORIZATION_FAILED"
        assert _delete_records(broker.address) == "TOPIC_AUTHORIZATION_FAILED"  # leader or not
    # The cluster-mode admin handlers refuse as the single node's do (authorization.REQUIRED).
    bootstrap = cluster.bootstrap()
    assert clients.delete_topic(bootstrap, TOPIC) == "TOPIC_AUTHORIZATION_FAILED"
    assert clients.create_partitions(bootstrap, TOPIC) == "TOPIC_AUTHORIZATION_FAILED"
    assert clients.describe_configs(bootstrap, TOPIC) == "TOPIC_AUTHORIZATION_FAILED"
    assert clients.alter_configs(bootstrap, TOPIC) == "TOPIC_AUTHORIZATION_FAILED"

    # Added through broker 1: every broker enforces it within a second.
    added_at = time.monotonic()
    assert _create_acl(cluster.brokers[1].address) == ["NONE"]
    applied = _wait_everywhere(cluster, "NONE", added_at)
    print(f"\nACL added via broker 1, applied after (s): {applied}")
    assert max(applied.values()) < PROPAGATION_LIMIT_S, applied

    # The followers' fetches are authorized (CLUSTER_ACTION): the ISR fills; then a
    # replicated produce (acks=all) and a group consume work.
    cluster.wait_for_partition(TOPIC, lambda view: len(view[2]) == 3, what="ISR of 3")
    values = [f"m{i}".encode() for i in range(50)]
    assert _produce(cluster, values) == [""] * len(values)
    assert _consume(cluster, len(values)) == values

    # Removed through broker 2: every broker refuses again within a second.
    removed_at = time.monotonic()
    assert _delete_acl(cluster.brokers[2].address) == ("NONE", 1)
    revoked = _wait_everywhere(cluster, "TOPIC_AUTHORIZATION_FAILED", removed_at)
    print(f"ACL removed via broker 2, applied after (s): {revoked}")
    assert max(revoked.values()) < PROPAGATION_LIMIT_S, revoked
    for broker in cluster.brokers.values():
        assert clients.produce(broker.address, TOPIC) == "TOPIC_AUTHORIZATION_FAILED"


def test_replication_and_failover_with_the_authorizer_on(acl_cluster: Cluster) -> None:
    cluster = acl_cluster
    assert _create_acl(cluster.brokers[3].address) == ["NONE"]
    cluster.create_topic(TOPIC, partitions=1, replication=3)
    leader, _, _ = cluster.wait_for_partition(
        TOPIC, lambda view: len(view[2]) == 3, what="ISR of 3")
    _wait_everywhere(cluster, "NONE", time.monotonic())
    first = [f"before-{i}".encode() for i in range(100)]
    assert _produce(cluster, first) == [""] * len(first)

    cluster.kill(leader)  # SIGKILL: the controller elects a follower that fetched everything
    new_leader, _, _ = cluster.wait_for_partition(
        TOPIC, lambda view: view[0] != leader and cluster.brokers[view[0]].alive(),
        what="a new leader")
    assert new_leader != leader
    second = [f"after-{i}".encode() for i in range(100)]
    assert _produce(cluster, second) == [""] * len(second)
    assert _consume(cluster, len(first) + len(second)) == first + second

    cluster.start(leader)  # the old leader rejoins as a follower (CLUSTER_ACTION again)
    cluster.wait_for_partition(TOPIC, lambda view: len(view[2]) == 3, what="ISR of 3 again")


def test_super_user_brokers_replicate_and_fail_over(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    """Kafka's usual setup: the inter-broker principal (User:ANONYMOUS over PLAINTEXT) in
    super.users and no ACL at all. Every PLAINTEXT client is then a super user too."""
    cluster = _start(zookeeper, tmp_path, (f"super.users={ANONYMOUS}",), ())
    try:
        cluster.create_topic(TOPIC, partitions=1, replication=3)
        leader, _, _ = cluster.wait_for_partition(
            TOPIC, lambda view: len(view[2]) == 3, what="ISR of 3")
        values = [f"m{i}".encode() for i in range(20)]
        assert _produce(cluster, values) == [""] * len(values)
        cluster.kill(leader)
        cluster.wait_for_partition(
            TOPIC, lambda view: view[0] != leader and cluster.brokers[view[0]].alive(),
            what="a new leader")
        assert _consume(cluster, len(values)) == values
    finally:
        cluster.stop_all()

