"""A cluster that never speaks plaintext: three real brokers whose replicas fetch from each
other over SASL_SSL with SCRAM-SHA-512 (`inter.broker.listener.name`, `sasl.mechanism.inter.
broker.protocol`, the broker's JAAS line), clients on a second SASL_SSL listener, the ACL
authorizer on with the broker and admin principals in `super.users`. Everything is made by the
commands users run: `tidelog certs`, `tidelog users add`.

Shown with confluent-kafka over TLS and SCRAM: Metadata on the CLIENT listener names every
broker's CLIENT port (not its inter-broker one); the ISR reaches 3 (followers authenticated and
fetched); acks=all survives a leader SIGKILL with every record read back once; a broker restarted
with the wrong inter-broker password is refused by its peers (their SCRAM check, logged) and
stays out of the ISR, and joins again once restarted with the right one.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from tidelog.cluster.zookeeper_server import ZooKeeperServer, free_port

T = TypeVar("T")
TOPIC = "payments"
BROKER_PASSWORD = "broker-secret"
ADMIN_PASSWORD = "admin-secret"
TIDELOG = str(Path(sys.executable).with_name("tidelog"))


@dataclass
class SecureNode:
    node_id: int
    data_dir: Path
    log_path: Path
    internal_port: int = field(default_factory=free_port)
    client_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def client_address(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@dataclass
class SecureCluster:
    zookeeper: str
    certs: Path
    nodes: dict[int, SecureNode] = field(default_factory=dict)

    def client_config(self, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": ",".join(n.client_address for n in self.nodes.values()
                                          if n.alive()),
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "admin", "sasl.password": ADMIN_PASSWORD,
            "ssl.ca.location": str(self.certs / "ca.pem"), **extra,
        }

    def start(self, node_id: int, broker_password: str = BROKER_PASSWORD) -> None:
        node = self.nodes[node_id]
        jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required'
                f' username="broker" password="{broker_password}";')
        settings = [
            f"listeners=INTERNAL://127.0.0.1:{node.internal_port},"
            f"CLIENT://127.0.0.1:{node.client_port}",
            "listener.security.protocol.map=INTERNAL:SASL_SSL,CLIENT:SASL_SSL",
            "inter.broker.listener.name=INTERNAL",
            "sasl.enabled.mechanisms=SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
            f"listener.name.internal.scram-sha-512.sasl.jaas.config={jaas}",
            "ssl.keystore.type=PEM", f"ssl.keystore.location={self.certs / 'broker.pem'}",
            "ssl.truststore.type=PEM", f"ssl.truststore.location={self.certs / 'ca.pem'}",
            "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
            "super.users=User:broker;User:admin",
            "zookeeper.session.timeout.ms=3000", "replica.lag.time.max.ms=2000",
            "default.replication.factor=3", "min.insync.replicas=2",
        ]
        command = [TIDELOG, "serve", "--data-dir", str(node.data_dir), "--node-id",
                   str(node_id), "--zookeeper", self.zookeeper, "--metrics", "off"]
        for setting in settings:
            command += ["--set", setting]
        with node.log_path.open("ab") as log:
            node.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log,
                                            stdin=subprocess.DEVNULL)
        assert node.process.stdout is not None
        line = node.process.stdout.readline()  # the ready line, or EOF if it exited
        if b"tidelog ready" not in line:
            self.kill(node_id)
            raise AssertionError(f"broker {node_id} did not start:\n{node.log_text()[-3000:]}")

    def kill(self, node_id: int) -> None:
        process = self.nodes[node_id].process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(20)

    def partition(self) -> tuple[int, list[int], list[int], dict[int, tuple[str, int]]]:
        """(leader, replicas, isr, brokers' advertised addresses) from one Metadata answer."""
        metadata = AdminClient(self.client_config()).list_topics(TOPIC, timeout=10)
        p = metadata.topics[TOPIC].partitions[0]
        brokers = {b.id: (b.host, b.port) for b in metadata.brokers.values()}
        return p.leader, list(p.replicas), list(p.isrs), brokers


def wait_value(read: Callable[[], T], accept: Callable[[T], bool], what: str,
               timeout_s: float = 40.0) -> T:
    deadline = time.monotonic() + timeout_s
    last = "no reading"
    while time.monotonic() < deadline:
        try:
            value = read()
        except Exception as error:  # a broker going away mid-read
            last = f"error: {error!r}"
        else:
            if accept(value):
                return value
            last = repr(value)
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} (last {last})")


@pytest.fixture
def secure_cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[SecureCluster]:
    certs = tmp_path / "certs"
    subprocess.run([TIDELOG, "certs", "--dir", str(certs)], check=True, capture_output=True,
                   timeout=60)
    chroot = f"/tidelog-secure-{uuid.uuid4().hex[:12]}"
    client = KazooClient(hosts=zookeeper.connect_string)
    client.start(timeout=15)
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()
    cluster = SecureCluster(zookeeper.connect_string + chroot, certs)
    try:
        for node_id in (1, 2, 3):
            data_dir = tmp_path / f"broker-{node_id}"
            for user, password in (("broker", BROKER_PASSWORD), ("admin", ADMIN_PASSWORD)):
                subprocess.run([TIDELOG, "users", "add", user, "--password", password,
                                "--mechanism", "SCRAM-SHA-512", "--data-dir", str(data_dir)],
                               check=True, capture_output=True, timeout=60)
            cluster.nodes[node_id] = SecureNode(node_id, data_dir,
                                                tmp_path / f"broker-{node_id}.log")
            cluster.start(node_id)
        yield cluster
    finally:
        for node_id in cluster.nodes:
            cluster.kill(node_id)
    for node in cluster.nodes.values():
        assert "Traceback" not in node.log_text(), node.log_text()[-3000:]


def _produce(cluster: SecureCluster, values: list[bytes]) -> None:
    producer = Producer(cluster.client_config(**{"acks": "all", "enable.idempotence": True}))
    errors: list[str] = []
    for value in values:
        producer.produce(TOPIC, value, on_delivery=lambda e, _m: e and errors.append(str(e)))
    assert producer.flush(60) == 0
    assert errors == []


def _consume(cluster: SecureCluster, count: int) -> list[bytes]:
    consumer = Consumer(cluster.client_config(**{
        "group.id": f"g-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"}))
    consumer.subscribe([TOPIC])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(seen) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value())
    finally:
        consumer.close()
    return seen


def test_sasl_ssl_cluster_replicates_fails_over_and_refuses_a_wrong_broker_password(
    secure_cluster: SecureCluster,
) -> None:
    cluster = secure_cluster
    admin = AdminClient(cluster.client_config())  # must outlive its futures
    admin.create_topics([NewTopic(TOPIC, 1, 3)], request_timeout=15)[TOPIC].result(timeout=20)
    leader, _, _, brokers = wait_value(
        cluster.partition, lambda v: v[0] > 0 and len(v[2]) == 3,
        "an ISR of 3 (followers fetching over SASL_SSL)")
    # Metadata on the CLIENT listener answers every broker's CLIENT port, never INTERNAL.
    assert brokers == {n: ("127.0.0.1", node.client_port) for n, node in cluster.nodes.items()}

    first = [f"before-{i}".encode() for i in range(200)]
    _produce(cluster, first)
    cluster.kill(leader)
    wait_value(cluster.partition, lambda v: v[0] not in (-1, leader) and leader not in v[2],
               "a new leader without the killed broker")
    second = [f"after-{i}".encode() for i in range(200)]
    _produce(cluster, second)

    # The killed broker comes back with the wrong inter-broker password: the leader's SCRAM
    # check refuses it (its fetcher logs the refusal), so it cannot rejoin the ISR.
    cluster.start(leader, broker_password="wrong")
    node = cluster.nodes[leader]
    wait_value(lambda: node.log_text().count("SASL SCRAM-SHA-512 as 'broker' failed"),
               lambda n: n >= 2, "two refused inter-broker authentications")
    _, _, isr, _ = cluster.partition()
    assert leader not in isr
    cluster.kill(leader)
    cluster.start(leader)
    wait_value(cluster.partition, lambda v: v[0] > 0 and sorted(v[2]) == [1, 2, 3],
               "the restarted broker back in the ISR")
    assert _consume(cluster, 400) == first + second
