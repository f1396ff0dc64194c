"""Kafka's own command-line tools (4.3.1, through `scripts/kafka tool`) against a real
`tidelog serve`: kafka-topics, kafka-configs, kafka-console-producer/consumer,
kafka-get-offsets, kafka-consumer-groups and kafka-dump-log reading a Tidelog segment file.
(kafka-consumer-groups --reset-offsets is in test_java_groups.py, on a live group's commits.)"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import kafka_peer

if TYPE_CHECKING:
    from conftest import BrokerProcess


def tool(name: str, broker: BrokerProcess, *args: str, input: str | None = None) -> str:
    return kafka_peer.run_tool(
        name, "--bootstrap-server", broker.bootstrap, *args, input=input
    ).stdout


def test_topics_and_configs(broker: BrokerProcess) -> None:
    out = tool(
        "kafka-topics",
        broker,
        "--create",
        "--topic",
        "cli-topic",
        "--partitions",
        "3",
        "--config",
        "retention.ms=86400000",
    )
    assert out.strip() == "Created topic cli-topic."
    tool("kafka-topics", broker, "--create", "--topic", "cli-gone")
    tool("kafka-topics", broker, "--alter", "--topic", "cli-topic", "--partitions", "5")
    tool("kafka-topics", broker, "--delete", "--topic", "cli-gone")
    listed = tool("kafka-topics", broker, "--list").split()
    assert "cli-topic" in listed and "cli-gone" not in listed

    described = tool("kafka-topics", broker, "--describe", "--topic", "cli-topic")
    header, *partitions = described.strip().splitlines()
    assert re.match(
        r"Topic: cli-topic\tTopicId: \S{22}\tPartitionCount: 5\tReplicationFactor: 1"
        r"\tConfigs: .*retention\.ms=86400000",
        header,
    ), header
    assert [int(re.search(r"Partition: (\d+)", p)[1]) for p in partitions] == [0, 1, 2, 3, 4]  # type: ignore[index]

    out = tool(
        "kafka-configs",
        broker,
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "cli-topic",
        "--add-config",
        "retention.ms=1000000,max.message.bytes=500000",
    )
    assert out.strip() == "Completed updating config for topic cli-topic."
    tool(
        "kafka-configs",
        broker,
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "cli-topic",
        "--delete-config",
        "max.message.bytes",
    )
    out = tool(
        "kafka-configs",
        broker,
        "--describe",
        "--entity-type",
        "topics",
        "--entity-name",
        "cli-topic",
    )
    lines = out.strip().splitlines()
    assert lines[0] == "Dynamic configs for topic cli-topic are:", out
    assert [line.split()[0] for line in lines[1:]] == ["retention.ms=1000000"], out


LINES = [  # headers \t key \t value, as kafka-console-producer parses them with parse.headers
    "h1:a,h2:b\tk0\tfirst value",
    "n:1\tk1\tsecond",
    "only:one\tk2\tthird, with a comma",
    "n:3,n:3b\tk3\tfourth",
]


def test_console_producer_consumer_offsets_groups(broker: BrokerProcess) -> None:
    tool("kafka-topics", broker, "--create", "--topic", "cli-console", "--partitions", "2")
    tool(
        "kafka-console-producer",
        broker,
        "--topic",
        "cli-console",
        "--reader-property",
        "parse.key=true",
        "--reader-property",
        "parse.headers=true",
        input="\n".join(LINES) + "\n",
    )
    out = tool(
        "kafka-console-consumer",
        broker,
        "--topic",
        "cli-console",
        "--from-beginning",
        "--max-messages",
        str(len(LINES)),
        "--group",
        "cli-console-group",
        "--formatter-property",
        "print.key=true",
        "--formatter-property",
        "print.partition=true",
        "--formatter-property",
        "print.offset=true",
        "--formatter-property",
        "print.headers=true",
    )
    got = {}
    for line in out.strip().splitlines():
        partition, offset, headers, key, value = line.split("\t")
        got[key] = (partition, offset, headers, value)
    assert sorted(got) == ["k0", "k1", "k2", "k3"], out
    assert got["k0"][2:] == ("h1:a,h2:b", "first value")
    assert got["k1"][2:] == ("n:1", "second")
    assert got["k2"][2:] == ("only:one", "third, with a comma")
    assert got["k3"][2:] == ("n:3,n:3b", "fourth")
    # The default partitioner puts one key in one partition; offsets count from 0 in each.
    per_partition: dict[str, list[int]] = {}
    for key in sorted(got):
        partition, offset = got[key][0], got[key][1]
        per_partition.setdefault(partition.removeprefix("Partition:"), []).append(
            int(offset.removeprefix("Offset:"))
        )
    for offsets in per_partition.values():
        assert offsets == list(range(len(offsets))), per_partition

    # kafka-get-offsets: latest by default, earliest with --time earliest.
    ends = dict(
        line.rsplit(":", 1)
        for line in tool("kafka-get-offsets", broker, "--topic", "cli-console").split()
    )
    expected = {f"cli-console:{p}": str(len(v)) for p, v in per_partition.items()}
    for p in ("0", "1"):
        expected.setdefault(f"cli-console:{p}", "0")
    assert ends == expected
    starts = tool("kafka-get-offsets", broker, "--topic", "cli-console", "--time", "earliest")
    assert sorted(starts.split()) == ["cli-console:0:0", "cli-console:1:0"]

    # The console consumer's group committed its positions.
    out = tool("kafka-consumer-groups", broker, "--describe", "--group", "cli-console-group")
    rows = [line.split() for line in out.splitlines() if line.startswith("cli-console-group")]
    expected_rows = {("cli-console", k.rsplit(":", 1)[1], n, n, "0") for k, n in ends.items()}
    assert {(r[1], r[2], r[3], r[4], r[5]) for r in rows} == expected_rows, out
    listed = tool("kafka-consumer-groups", broker, "--list").split()
    assert "cli-console-group" in listed


def test_dump_log_reads_a_tidelog_segment(broker: BrokerProcess) -> None:
    tool("kafka-topics", broker, "--create", "--topic", "cli-dump", "--partitions", "1")
    tool(
        "kafka-console-producer",
        broker,
        "--topic",
        "cli-dump",
        "--reader-property",
        "parse.key=true",
        "--reader-property",
        "parse.headers=true",
        input="\n".join(LINES) + "\n",
    )
    tool(
        "kafka-console-producer",
        broker,
        "--topic",
        "cli-dump",
        "--compression-codec",
        "gzip",
        "--reader-property",
        "parse.key=true",
        "--reader-property",
        "key.separator=:",
        input="g0:zipped zero\ng1:zipped one\n",
    )
    segment = broker.data_dir / "cli-dump-0" / "00000000000000000000.log"
    assert segment.is_file()
    out = kafka_peer.run_tool("kafka-dump-log", "--files", str(segment), "--print-data-log").stdout
    batches = [line for line in out.splitlines() if line.startswith("baseOffset:")]
    records = [line for line in out.splitlines() if line.startswith("| offset:")]
    assert batches, out
    for batch in batches:
        assert "magic: 2" in batch and "isvalid: true" in batch, batch
    assert {re.search(r"compresscodec: (\w+)", b)[1] for b in batches} == {"none", "gzip"}  # type: ignore[index]
    assert sum(int(re.search(r" count: (\d+)", b)[1]) for b in batches) == 6  # type: ignore[index]
    parsed = []
    for record in records:
        match = re.match(
            r"\| offset: (\d+) CreateTime: \d+ keySize: (\d+) valueSize: (\d+) "
            r"sequence: -?\d+ headerKeys: \[(.*)\] key: (\S+) payload: (.*)$",
            record,
        )
        assert match, record
        parsed.append((int(match[1]), match[4], match[5], match[6]))
    assert parsed == [
        (0, "h1,h2", "k0", "first value"),
        (1, "n", "k1", "second"),
        (2, "only", "k2", "third, with a comma"),
        (3, "n,n", "k3", "fourth"),
        (4, "", "g0", "zipped zero"),
        (5, "", "g1", "zipped one"),
    ]
