"""The network-namespace harness (netns.py), first step: a broker and a client in their own
namespaces, a partition nemesis between them (one direction, then healed): nothing acknowledged
is lost and the client recovers once the network heals. Cleans up even when it fails.
"""

from __future__ import annotations

import json
import selectors
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from reliability.netns import NamespacesUnavailable, Network

PORT = 9092

CLIENT = r"""
import json, sys, time
from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap, action, start, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if action == "produce":
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 4000,
                         "log_level": 2})
    outcomes = {}

    def report(error, message):
        outcomes[message.value().decode()] = error is None

    for n in range(start, start + count):
        producer.produce("netns", value=b"v%d" % n, on_delivery=report)
    producer.flush(15)
    print(json.dumps(outcomes))
else:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "netns-check",
                         "auto.offset.reset": "earliest", "log_level": 2})
    consumer.assign([TopicPartition("netns", 0, 0)])
    _, high = consumer.get_watermark_offsets(TopicPartition("netns", 0), timeout=10)
    values = []
    deadline = time.monotonic() + 30
    while len(values) < high and time.monotonic() < deadline:
        message = consumer.poll(1)
        if message is not None and message.error() is None:
            values.append(message.value().decode())
    consumer.close()
    print(json.dumps(values))
"""


def _client(net: Network, bootstrap: str, *args: str) -> object:
    completed = net.run("client", [sys.executable, "-c", CLIENT, bootstrap, *args],
                        capture_output=True, text=True, timeout=90)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_partition_between_client_and_broker_loses_nothing_acknowledged() -> None:
    try:
        net = Network(["broker", "client"]).__enter__()
    except NamespacesUnavailable as error:
        pytest.skip(f"network namespaces refused by this kernel: {error}")
    broker: subprocess.Popen[bytes] | None = None
    try:
        with tempfile.TemporaryDirectory(prefix="tidelog-netns-") as tmp:
            address = f"{net.address['broker']}:{PORT}"
            broker = net.popen(
                "broker",
                [sys.executable, "-m", "tidelog.cli.main", "serve", "--data-dir",
                 str(Path(tmp) / "data"), "--listen", address, "--metrics", "off",
                 "--set", "log.durability=sync"],
                stdout=subprocess.PIPE, stderr=(Path(tmp) / "broker.log").open("wb"),
                stdin=subprocess.DEVNULL,
            )
            assert broker.stdout is not None
            with selectors.DefaultSelector() as selector:
                selector.register(broker.stdout, selectors.EVENT_READ)
                assert selector.select(90), "broker did not start in its namespace"
            assert broker.stdout.readline().startswith(b"tidelog ready on ")

            before = _client(net, address, "produce", "0", "10")
            assert isinstance(before, dict) and all(before.values()), before
            net.cut("client", "broker")  # the client's packets to the broker are dropped
            during = _client(net, address, "produce", "10", "5")
            assert isinstance(during, dict) and not any(during.values()), during
            net.heal()
            after = _client(net, address, "produce", "15", "10")
            assert isinstance(after, dict) and all(after.values()), after
            acked = [v for outcome in (before, after) for v, ok in outcome.items() if ok]
            values = _client(net, address, "consume", "0", "0")
            assert isinstance(values, list)
            assert [v for v in values if v in acked] == acked
            assert not set(values) & set(during)  # never sent: the partition dropped them
    finally:
        if broker is not None and broker.poll() is None:
            broker.send_signal(signal.SIGTERM)
            try:
                broker.wait(15)
            except subprocess.TimeoutExpired:
                broker.kill()
                broker.wait(10)
        net.close()
