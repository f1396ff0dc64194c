"""scripts/kafka itself: it fetches Apache Kafka 4.3.1, starts a KRaft broker (and a 3-node
quorum) that answers Kafka's own tools and clients, and stops it by PID. The Java programs the
other tests run against Tidelog pass here against Kafka too: their expectations are Kafka's."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import kafka_peer

from .common import run_program
from .test_java_clients import check_clients_output

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kafka_peer.KafkaPeer]:
    with kafka_peer.running_kafka(tmp_path_factory.mktemp("kafka")) as peer:
        yield peer


def pids(directory: Path) -> list[int]:
    return [int(p.read_text()) for p in sorted(directory.glob("node-*/kafka.pid"))]


def test_tool_list_names_classes_in_the_jars() -> None:
    out = subprocess.run(
        [str(kafka_peer.SCRIPT), "tool", "--list"], capture_output=True, text=True, check=True
    ).stdout
    tools = dict(line.split("\t") for line in out.strip().splitlines())
    assert tools["kafka-topics"] == "org.apache.kafka.tools.TopicCommand"
    jars = (kafka_peer.lib_dir().parent / "jars.txt").read_text().split()
    assert "kafka_2.13-4.3.1.jar" in jars and "kafka-tools-4.3.1.jar" in jars
    assert "kafka-streams-4.3.1.jar" in jars and "kafka-clients-4.3.1.jar" in jars
    version = kafka_peer.run_tool("kafka-topics", "--version").stdout.strip()
    assert version == "4.3.1"


def test_single_broker_answers_clients_and_tools(kafka: kafka_peer.KafkaPeer) -> None:
    assert kafka.bootstrap == f"127.0.0.1:{kafka.port}"
    [pid] = pids(kafka.directory)
    assert os.path.exists(f"/proc/{pid}")
    kafka_peer.run_tool(
        "kafka-topics",
        "--bootstrap-server",
        kafka.bootstrap,
        "--create",
        "--topic",
        "peer-topic",
        "--partitions",
        "2",
    )
    described = kafka_peer.run_tool(
        "kafka-topics", "--bootstrap-server", kafka.bootstrap, "--describe", "--topic", "peer-topic"
    ).stdout
    assert re.findall(r"Partition: (\d)\tLeader: 1\t", described) == ["0", "1"], described
    # The control run: the same program and checks as test_java_clients.py, on Kafka.
    check_clients_output(run_program("Clients", kafka.bootstrap, "kc", "200"), prefix="kc")


def test_three_node_quorum_then_stop_by_pid(tmp_path: Path) -> None:
    with kafka_peer.running_kafka(tmp_path / "kafka3", brokers=3) as peer:
        assert peer.bootstrap == ",".join(f"127.0.0.1:{p}" for p in peer.ports)
        kafka_peer.run_tool(
            "kafka-topics",
            "--bootstrap-server",
            peer.bootstrap,
            "--create",
            "--topic",
            "rf3",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
        )
        described = kafka_peer.run_tool(
            "kafka-topics",
            "--bootstrap-server",
            f"127.0.0.1:{peer.ports[2]}",
            "--describe",
            "--topic",
            "rf3",
        ).stdout
        rows = re.findall(
            r"Partition: \d\tLeader: (\d)\tReplicas: ([\d,]+)\tIsr: ([\d,]+)", described
        )
        assert len(rows) == 3, described
        for _leader, replicas, isr in rows:
            assert sorted(replicas.split(",")) == ["1", "2", "3"]
            assert sorted(isr.split(",")) == ["1", "2", "3"]
        quorum = kafka_peer.run_tool(
            "kafka-metadata-quorum", "--bootstrap-server", peer.bootstrap, "describe", "--status"
        ).stdout
        voters = re.search(r"CurrentVoters:\s+(.*)", quorum)
        assert voters, quorum
        assert re.findall(r'"id": (\d)', voters[1]) == ["1", "2", "3"], quorum
        assert re.findall(r"CONTROLLER://127.0.0.1:(\d+)", voters[1]) == [
            str(peer.port + 3 + i) for i in range(3)
        ], quorum
        running = pids(peer.directory)
        assert len(running) == 3
    for pid in running:  # gone (or a zombie of no one's waiting, never still running)
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    assert pids(peer.directory) == []
