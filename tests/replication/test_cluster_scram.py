"""SCRAM users in a ZooKeeper cluster (Kafka's `/config/users/<user>` layout): a user created
through one broker's admin API logs in at the other broker, its znode holds Kafka's credential
string, and a deletion through the other broker stops its logins everywhere."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka import admin as kafka_admin
from kazoo.client import KazooClient

from tidelog.cluster.zookeeper_server import ZooKeeperServer, free_port


def _start(node_id: int, connect: str, root: Path) -> tuple[subprocess.Popen[bytes], int, int]:
    plain, sasl = free_port(), free_port()
    command = [
        str(Path(sys.executable).with_name("tidelog")), "serve",
        "--data-dir", str(root / f"broker-{node_id}"), "--node-id", str(node_id),
        "--zookeeper", connect, "--metrics", "off",
        "--set", f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "--set", "zookeeper.session.timeout.ms=3000",
        "--set", "connection.failed.authentication.delay.ms=10",
    ]
    with (root / f"broker-{node_id}.log").open("ab") as log:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log,
                                   stdin=subprocess.DEVNULL)
    assert process.stdout is not None
    line = process.stdout.readline()
    if b"tidelog ready" not in line:
        process.kill()
        raise AssertionError((root / f"broker-{node_id}.log").read_text())
    return process, plain, sasl


@pytest.fixture
def brokers(zookeeper: ZooKeeperServer, tmp_path: Path
            ) -> Iterator[tuple[list[tuple[int, int]], str]]:
    chroot = f"/tidelog-scram-{uuid.uuid4().hex[:12]}"
    connect = zookeeper.connect_string + chroot
    started: list[subprocess.Popen[bytes]] = []
    ports: list[tuple[int, int]] = []
    try:
        for node_id in (1, 2):
            process, plain, sasl = _start(node_id, connect, tmp_path)
            started.append(process)
            ports.append((plain, sasl))
        yield ports, chroot
    finally:
        for process in started:
            process.kill()
            process.wait(20)


def _logs_in(port: int, password: str) -> bool:
    client = kafka_admin.AdminClient({
        "bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "zed", "sasl.password": password,
    })
    try:
        client.list_topics(timeout=2)
        return True
    except confluent_kafka.KafkaException:
        return False


def _until(check: Callable[[], bool], limit_s: float = 10.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached")


def test_a_user_made_through_one_broker_logs_in_at_the_other(
    brokers: tuple[list[tuple[int, int]], str], zookeeper: ZooKeeperServer
) -> None:
    (plain1, _), (plain2, sasl2) = brokers[0]
    chroot = brokers[1]
    first = kafka_admin.AdminClient({"bootstrap.servers": f"127.0.0.1:{plain1}"})
    upsert = kafka_admin.UserScramCredentialUpsertion(
        "zed", kafka_admin.ScramCredentialInfo(kafka_admin.ScramMechanism.SCRAM_SHA_256, 4096),
        b"zed-secret", b"zed-salt-bytes!!",
    )
    for future in first.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    _until(lambda: _logs_in(sasl2, "zed-secret"))
    assert not _logs_in(sasl2, "wrong-secret")
    second = kafka_admin.AdminClient({"bootstrap.servers": f"127.0.0.1:{plain2}"})
    described = second.describe_user_scram_credentials(["zed"])["zed"].result(30)
    [info] = described.scram_credential_infos
    assert (info.mechanism, info.iterations) == (kafka_admin.ScramMechanism.SCRAM_SHA_256, 4096)

    client = KazooClient(hosts=zookeeper.connect_string + chroot)
    client.start(timeout=15)
    try:
        config = json.loads(client.get("/config/users/zed")[0])["config"]
        fields = dict(item.split("=", 1) for item in config["SCRAM-SHA-256"].split(","))
        assert sorted(fields) == ["iterations", "salt", "server_key", "stored_key"]
        assert fields["iterations"] == "4096"
    finally:
        client.stop()
        client.close()

    deletion = kafka_admin.UserScramCredentialDeletion(
        "zed", kafka_admin.ScramMechanism.SCRAM_SHA_256)
    for future in second.alter_user_scram_credentials([deletion]).values():
        future.result(30)
    _until(lambda: not _logs_in(sasl2, "zed-secret"))
    assert "zed" not in first.describe_user_scram_credentials().result(30)
