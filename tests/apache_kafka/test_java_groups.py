"""A Java consumer group against a real `tidelog serve`: two KafkaConsumers (kafka-clients
4.3.1) in one group with group.protocol=classic, then with group.protocol=consumer (KIP-848):
the partitions are split between them, each reads exactly its partitions' records in order,
the commits show in the AdminClient, `kafka-consumer-groups --describe` and `tidelog groups
describe`, and `kafka-consumer-groups --reset-offsets` moves them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import pytest

import kafka_peer

from .common import NO_REBALANCE_DELAY, of_kind, run_program, tidelog_broker

if TYPE_CHECKING:
    from collections.abc import Iterator

    from conftest import BrokerProcess

PARTITIONS = 4
COUNT = 400
PROTOCOLS = ("classic", "consumer")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """This module's Tidelog broker, with Kafka's shipped group.initial.rebalance.delay.ms=0."""
    yield from tidelog_broker(tmp_path_factory.mktemp("broker"), NO_REBALANCE_DELAY)


@pytest.fixture(scope="module")
def lines(broker: BrokerProcess) -> list[dict[str, Any]]:
    lines = run_program("Groups", broker.bootstrap, "jg", str(PARTITIONS), str(COUNT), *PROTOCOLS)
    assert of_kind(lines, "done"), "the program did not finish"
    return lines


def tidelog_group(broker: BrokerProcess, group: str) -> dict[str, Any]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tidelog.cli.main",
            "groups",
            "describe",
            group,
            "--bootstrap-server",
            broker.bootstrap,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def cli_describe(
    broker: BrokerProcess, *groups: str
) -> dict[tuple[str, int], tuple[int, int, int]]:
    """kafka-consumer-groups --describe: (group, partition) -> (current, log end, lag)."""
    args = ["--bootstrap-server", broker.bootstrap, "--describe"]
    for group in groups:
        args += ["--group", group]
    out = kafka_peer.run_tool("kafka-consumer-groups", *args).stdout
    rows = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[0] in groups and fields[2].isdigit():
            rows[(fields[0], int(fields[2]))] = (int(fields[3]), int(fields[4]), int(fields[5]))
    return rows


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_two_consumers_split_the_partitions(lines: list[dict[str, Any]], protocol: str) -> None:
    [split] = [s for s in of_kind(lines, "split") if s["protocol"] == protocol]
    assert split["split"], f"{protocol}: the partitions were never split between two members"
    members = {m["member"]: m for m in of_kind(lines, "member") if m["protocol"] == protocol}
    assert set(members) == {"member-0", "member-1"}
    for member in members.values():
        assert member["failure"] is None, member
        assert member["committed"], member
        assert member["assignment"], member
    assigned = members["member-0"]["assignment"] + members["member-1"]["assignment"]
    assert sorted(assigned) == list(range(PARTITIONS)), assigned

    # Every record exactly once, read by the member owning its partition, in offset order.
    by_partition: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for record in of_kind(lines, "recv"):
        if record["protocol"] == protocol:
            by_partition[record["partition"]].append(record)
    owner = {p: name for name, m in members.items() for p in m["assignment"]}
    for partition in range(PARTITIONS):
        records = by_partition[partition]
        expected = list(range(partition, COUNT, PARTITIONS))
        assert [r["offset"] for r in records] == list(range(len(expected))), partition
        assert [(r["key"], r["value"]) for r in records] == [(f"k{i}", f"v{i}") for i in expected]
        assert {r["member"] for r in records} == {owner[partition]}

    [described] = [d for d in of_kind(lines, "describe") if d["protocol"] == protocol]
    assert described["state"] == "Stable"
    assert described["type"] == ("Classic" if protocol == "classic" else "Consumer")
    seen = {m["client_id"]: m["partitions"] for m in described["members"]}
    assert seen == {f"jg-{protocol}-member-{n[-1]}": m["assignment"] for n, m in members.items()}
    [committed] = [c for c in of_kind(lines, "committed") if c["protocol"] == protocol]
    assert {k: v for k, v in committed.items() if k.isdigit()} == {
        str(p): COUNT // PARTITIONS for p in range(PARTITIONS)
    }


def test_commits_in_kafka_and_tidelog_tools(
    lines: list[dict[str, Any]], broker: BrokerProcess
) -> None:
    groups = [f"jg-{protocol}-group" for protocol in PROTOCOLS]
    per_partition = COUNT // PARTITIONS
    rows = cli_describe(broker, *groups)
    assert rows == {
        (group, p): (per_partition, per_partition, 0) for group in groups for p in range(PARTITIONS)
    }
    for group in groups:
        described = tidelog_group(broker, group)
        assert [(p["partition"], p["committed"], p["lag"]) for p in described["partitions"]] == [
            (p, per_partition, 0) for p in range(PARTITIONS)
        ]

    # --reset-offsets: an absolute offset on the classic group, a shift on the KIP-848 group.
    classic, consumer = groups
    out = kafka_peer.run_tool(
        "kafka-consumer-groups",
        "--bootstrap-server",
        broker.bootstrap,
        "--reset-offsets",
        "--group",
        classic,
        "--topic",
        "jg-classic",
        "--to-offset",
        "10",
        "--execute",
    ).stdout
    assert len(re.findall(r"jg-classic\s+\d\s+10\b", out)) == PARTITIONS, out
    out = kafka_peer.run_tool(
        "kafka-consumer-groups",
        "--bootstrap-server",
        broker.bootstrap,
        "--reset-offsets",
        "--group",
        consumer,
        "--topic",
        "jg-consumer:1,3",
        "--shift-by",
        "-30",
        "--execute",
    ).stdout
    assert len(re.findall(r"jg-consumer\s+[13]\s+70\b", out)) == 2, out
    assert [p["committed"] for p in tidelog_group(broker, classic)["partitions"]] == [10] * 4
    assert [p["committed"] for p in tidelog_group(broker, consumer)["partitions"]] == [
        100,
        70,
        100,
        70,
    ]
