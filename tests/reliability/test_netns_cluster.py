"""ZooKeeper and 3 brokers, each in its own network namespace, clients in a fourth; one
partition nemesis: the partition leader isolated from everyone (ZooKeeper, the other brokers
and the client) for three ZooKeeper session timeouts, then healed. An idempotent acks=all
producer writes unique values throughout (min.insync.replicas=2); afterwards a consumer reads
the partition. Counts: lost acknowledged (must be 0), duplicated, reordered. Cleans up
namespaces and processes even when it fails. The first step of issue 16's netns harness.
"""

from __future__ import annotations

import itertools
import json
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reliability.netns import NamespacesUnavailable, Network
from tidelog.cluster.zookeeper_server import (
    DEBIAN_ZOOKEEPER_JAR,
    JVM_OPTIONS,
    MAIN_CLASS,
    ZooKeeperConfig,
)

ZK_PORT = 2181
BROKER_PORT = 9092
SESSION_TIMEOUT_MS = 3000
TOPIC = "nemesis"

WORKLOAD = r"""
import json, sys, time
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, phase = sys.argv[1], sys.argv[2]
if phase == "create":
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while True:
        try:
            admin.create_topics([NewTopic("nemesis", 1, 3, config={
                "min.insync.replicas": "2"})])["nemesis"].result(20)
            break
        except Exception as error:
            if "already exists" in str(error) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    while time.monotonic() < deadline:
        p = admin.list_topics("nemesis", timeout=10).topics["nemesis"].partitions.get(0)
        if p is not None and p.leader >= 0 and len(p.isrs) == 3:
            print(json.dumps({"leader": p.leader}), flush=True)
            sys.exit(0)
        time.sleep(0.3)
    sys.exit(1)
elif phase == "produce":
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 30000,
                         "linger.ms": 5, "log_level": 2})
    outcomes = {}
    def report(error, message):
        outcomes[message.value().decode()] = error is None
    stop_at = time.monotonic() + float(sys.argv[3])
    n = 0
    while time.monotonic() < stop_at:
        producer.produce("nemesis", value=b"v%d" % n, partition=0, on_delivery=report)
        n += 1
        producer.poll(0.02)
        if n % 25 == 0:
            print(json.dumps({"acked": sum(outcomes.values())}), flush=True)
    producer.flush(40)
    print(json.dumps({"outcomes": outcomes}), flush=True)
else:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "nemesis-check",
                         "auto.offset.reset": "earliest", "log_level": 2})
    tp = TopicPartition("nemesis", 0, 0)
    consumer.assign([tp])
    _, high = consumer.get_watermark_offsets(TopicPartition("nemesis", 0), timeout=20)
    values, deadline = [], time.monotonic() + 60
    while len(values) < high and time.monotonic() < deadline:
        message = consumer.poll(1)
        if message is not None and message.error() is None:
            values.append(message.value().decode())
    consumer.close()
    print(json.dumps({"values": values, "high": high}), flush=True)
"""


def _read_json_line(process: subprocess.Popen[str], timeout_s: float) -> dict[str, object]:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            raise AssertionError(f"no output within {timeout_s}s")
    line = process.stdout.readline()
    assert line, "workload exited early"
    return dict(json.loads(line))


def _stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is not None and process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def test_isolated_leader_loses_nothing_acknowledged(tmp_path: Path) -> None:
    if not DEBIAN_ZOOKEEPER_JAR.is_file():
        pytest.fail(f"{DEBIAN_ZOOKEEPER_JAR} missing: run scripts/setup")
    nodes = ["zk", "b1", "b2", "b3", "client"]
    try:
        net = Network(nodes).__enter__()
    except NamespacesUnavailable as error:
        pytest.skip(f"network namespaces refused by this kernel: {error}")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        zk_address = net.address["zk"]
        config = ZooKeeperConfig(data_dir=tmp_path / "zk", port=ZK_PORT).render().replace(
            "clientPortAddress=127.0.0.1", f"clientPortAddress={zk_address}")
        assert f"clientPortAddress={zk_address}" in config
        (tmp_path / "zk").mkdir()
        (tmp_path / "zk" / "zoo.cfg").write_text(config)
        processes.append(net.popen(
            "zk", ["java", *JVM_OPTIONS, "-cp", str(DEBIAN_ZOOKEEPER_JAR), MAIN_CLASS,
                   str(tmp_path / "zk" / "zoo.cfg")],
            stdout=(tmp_path / "zk.log").open("wb"), stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL))
        brokers = {}
        for node_id in (1, 2, 3):
            address = f"{net.address[f'b{node_id}']}:{BROKER_PORT}"
            brokers[node_id] = address
            process = net.popen(f"b{node_id}", [
                sys.executable, "-m", "tidelog.cli.main", "serve",
                "--data-dir", str(tmp_path / f"b{node_id}"), "--listen", address,
                "--node-id", str(node_id), "--zookeeper", f"{zk_address}:{ZK_PORT}",
                "--metrics", "off",
                "--set", f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
                "--set", "replica.lag.time.max.ms=2000",
                "--set", "default.replication.factor=3",
                "--set", "log.durability=sync",
            ], stdout=subprocess.PIPE, stderr=(tmp_path / f"b{node_id}.log").open("wb"),
                stdin=subprocess.DEVNULL)
            processes.append(process)
        for process in processes[1:]:  # brokers wait for ZooKeeper themselves
            assert process.stdout is not None
            with selectors.DefaultSelector() as selector:
                selector.register(process.stdout, selectors.EVENT_READ)
                assert selector.select(120), "a broker did not start in its namespace"
            assert process.stdout.readline().startswith(b"tidelog ready on ")
        bootstrap = ",".join(brokers.values())

        def workload(*args: str) -> subprocess.Popen[str]:
            process = net.popen("client", [sys.executable, "-c", WORKLOAD, bootstrap, *args],
                                stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
            processes.append(process)  # type: ignore[arg-type]
            return process

        leader = int(_read_json_line(workload("create"), 90)["leader"])  # type: ignore[call-overload]
        producer = workload("produce", "20")
        deadline = time.monotonic() + 60
        while int(_read_json_line(producer, 60)["acked"]) < 50:  # type: ignore[call-overload]
            assert time.monotonic() < deadline
        net.isolate(f"b{leader}")  # the nemesis: leader cut from ZooKeeper, peers and client
        isolated_until = time.monotonic() + 3 * SESSION_TIMEOUT_MS / 1000
        while "outcomes" not in (line := _read_json_line(producer, 120)):
            if time.monotonic() > isolated_until and net.partitioned:
                net.heal()
        net.heal()
        outcomes: dict[str, bool] = line["outcomes"]  # type: ignore[assignment]
        read = _read_json_line(workload("consume"), 120)
        values: list[str] = read["values"]  # type: ignore[assignment]
        acked = [value for value, ok in outcomes.items() if ok]
        present = set(values)
        lost = [value for value in acked if value not in present]
        duplicated = len(values) - len(present)
        order = [int(value[1:]) for value in values]
        reordered = sum(1 for a, b in itertools.pairwise(order) if b < a)
        summary = (f"netns nemesis (isolate leader b{leader}): {len(outcomes)} sent, "
                   f"{len(acked)} acked, {len(values)} read; lost={len(lost)} "
                   f"duplicated={duplicated} reordered={reordered}")
        print(summary)
        assert acked, summary
        assert not lost and not duplicated and not reordered, f"{summary} lost: {lost[:10]}"
    finally:
        for process in reversed(processes):
            _stop(process)  # type: ignore[arg-type]
        net.close()
