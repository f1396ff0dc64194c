"""`tidelog groups list|describe|reset-offsets|delete` against a real broker."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .test_rebalance_clients import GROUP_SETTINGS

if TYPE_CHECKING:
    from conftest import BrokerFactory


def tidelog(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tidelog.cli.main", "groups", *args, "-b", bootstrap]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_list_describe_reset_delete(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(settings=GROUP_SETTINGS)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("cli", 2, 1)])["cli"].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    start_ms = int(time.time() * 1000)
    for number in range(40):
        producer.produce("cli", b"x", partition=number % 2, timestamp=start_ms + number * 1000)
        producer.flush(15)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "cli-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["cli"])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 30 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen += 1
    consumer.commit(asynchronous=False)

    listed = json.loads(tidelog(broker.bootstrap, "list", "--json").stdout)
    assert [(row["group"], row["state"]) for row in listed] == [("cli-group", "STABLE")]
    described = json.loads(tidelog(broker.bootstrap, "describe", "cli-group", "--json").stdout)
    assert described["state"] == "STABLE" and len(described["members"]) == 1
    lag = {row["partition"]: row["lag"] for row in described["partitions"]}
    assert sum(lag.values()) == 10
    assert all(row["log_end_offset"] == 20 for row in described["partitions"])

    refused = tidelog(
        broker.bootstrap, "reset-offsets", "cli-group", "--topic", "cli", "--to-earliest"
    )
    assert refused.returncode == 1 and "stop its consumers first" in refused.stderr
    consumer.close()

    def committed() -> dict[int, int]:
        rows = json.loads(tidelog(broker.bootstrap, "describe", "cli-group", "--json").stdout)
        return {row["partition"]: row["committed"] for row in rows["partitions"]}

    for option, expected in (
        (["--to-earliest"], {0: 0, 1: 0}),
        (["--to-latest"], {0: 20, 1: 20}),
        (["--to-offset", "7"], {0: 7, 1: 7}),
        (
            [
                "--to-datetime",
                time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(start_ms / 1000 + 10)),
            ],
            {0: 5, 1: 5},
        ),
    ):
        result = tidelog(broker.bootstrap, "reset-offsets", "cli-group", "--topic", "cli", *option)
        assert result.returncode == 0, result.stderr
        assert committed() == expected, option

    assert tidelog(broker.bootstrap, "delete", "cli-group").returncode == 0
    gone = json.loads(tidelog(broker.bootstrap, "list", "--json").stdout)
    assert all(row["group"] != "cli-group" for row in gone)
    missing = tidelog(broker.bootstrap, "delete", "cli-group")
    assert missing.returncode == 1 and "GROUP_ID_NOT_FOUND" in missing.stderr


def test_consumer_protocol_group_with_sync_durability(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(settings={**GROUP_SETTINGS, "log.durability": "sync"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("kip848", 3, 1)])["kip848"].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for number in range(30):
        producer.produce("kip848", b"y", partition=number % 3)
    assert producer.flush(15) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "kip848-group",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["kip848"])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 30 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen += 1
    committed = consumer.commit(asynchronous=False)  # answered after the fsync
    assert sorted((p.partition, p.offset) for p in committed) == [(0, 10), (1, 10), (2, 10)]
    described = json.loads(tidelog(broker.bootstrap, "describe", "kip848-group", "--json").stdout)
    assert described["state"] == "STABLE" and described["assignor"] == "uniform"
    assert [sorted(m["partitions"]) for m in described["members"]] == [
        ["kip848-0", "kip848-1", "kip848-2"]
    ]
    assert {row["lag"] for row in described["partitions"]} == {0}
    consumer.close()
    broker.kill()
    broker = broker_factory(broker.data_dir, settings=GROUP_SETTINGS)
    again = json.loads(tidelog(broker.bootstrap, "describe", "kip848-group", "--json").stdout)
    assert [row["committed"] for row in again["partitions"]] == [10, 10, 10]
