"""The /metrics and /health endpoint of a live broker, the metrics plumbing, and log formats."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import BrokerFactory
from tidelog.broker.logformat import JsonFormatter, PlainFormatter
from tidelog.broker.metrics.http import (
    HealthTarget,
    MetricsServer,
    check_data_dir,
    check_listener,
    parse_metrics_address,
)
from tidelog.broker.metrics.registry import BrokerMetrics, GroupOffset, GroupStats, render

from .conftest import ToolBroker
from .helpers import free_port, run_tool

_SAMPLE = re.compile(r"^(\w+)(?:\{(.*)\})? (\S+)$")


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Prometheus text -> {(name, labels): value}."""
    out = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None:
            continue
        name, labels, value = match.groups()
        pairs = frozenset(re.findall(r'(\w+)="([^"]*)"', labels or ""))
        out[(name, pairs)] = float(value)
    return out


def value(
    parsed: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return parsed[(name, frozenset(labels.items()))]


def test_metrics_match_what_was_produced_and_consumed(tool_broker: ToolBroker) -> None:
    topic = "metrics-traffic"
    count = 2_000
    values = [b"v" * (10 + i % 50) for i in range(count)]
    producer = Producer({"bootstrap.servers": tool_broker.bootstrap, "linger.ms": 20})
    for payload in values:
        producer.produce(topic, payload)
    assert producer.flush(30) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": tool_broker.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    received = 0
    while received < count:
        message = consumer.poll(10)
        assert message is not None and message.error() is None
        received += 1
    consumer.close()

    status, text = tool_broker.get("/metrics")
    assert status == 200
    parsed = samples(text)
    partition = {"topic": topic, "partition": "0"}
    assert value(parsed, "tidelog_messages_in_total", **partition) == count
    assert value(parsed, "tidelog_log_end_offset", **partition) == count
    assert value(parsed, "tidelog_log_start_offset", **partition) == 0
    on_disk = value(parsed, "tidelog_log_size_bytes", **partition)
    segment_files = (tool_broker.process.data_dir / f"{topic}-0").glob("*.log")
    assert on_disk == sum(p.stat().st_size for p in segment_files)
    # Every appended batch byte is on disk (no other writer to this topic).
    assert value(parsed, "tidelog_bytes_in_total", **partition) == on_disk
    assert value(parsed, "tidelog_log_segments", **partition) == 1
    # One consumer read the partition once from offset 0: every offset and byte served once.
    assert value(parsed, "tidelog_messages_out_total", **partition) == count
    assert value(parsed, "tidelog_bytes_out_total", **partition) == on_disk

    produce_requests = value(parsed, "tidelog_requests_total", api="Produce")
    assert produce_requests >= 1
    assert value(parsed, "tidelog_request_latency_seconds_count", api="Produce") == (
        produce_requests
    )
    assert (
        value(parsed, "tidelog_request_latency_seconds_bucket", api="Produce", le="+Inf")
        == produce_requests
    )
    assert value(parsed, "tidelog_requests_total", api="Fetch") >= 1
    assert ("tidelog_connections_open", frozenset()) in parsed
    assert "# TYPE tidelog_fsync_latency_seconds histogram" in text
    assert "# TYPE tidelog_request_errors_total counter" in text


def test_fsync_histogram_counts_sync_produces(tool_broker: ToolBroker) -> None:
    topic = "metrics-sync"
    created = run_tool(
        "topics", "create", topic, "-b", tool_broker.bootstrap, "--config", "durability=sync"
    )
    assert created.returncode == 0, created.stderr
    _, before_text = tool_broker.get("/metrics")
    before = samples(before_text).get(("tidelog_fsync_latency_seconds_count", frozenset()), 0)
    produced = run_tool(
        "produce",
        topic,
        "-b",
        tool_broker.bootstrap,
        stdin=b"".join(b"%d\n" % i for i in range(20)),
    )
    assert produced.returncode == 0, produced.stderr
    _, text = tool_broker.get("/metrics")
    after = samples(text)[("tidelog_fsync_latency_seconds_count", frozenset())]
    assert after > before


def test_health_ok_and_http_errors(tool_broker: ToolBroker) -> None:
    assert tool_broker.get("/health") == (200, "ok\n")
    status, body = tool_broker.get("/nope")
    assert status == 404 and "/metrics" in body


def test_health_names_each_failing_check(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    closed = free_port()

    async def scenario() -> tuple[bytes, bytes]:
        target = HealthTarget("127.0.0.1", closed, not_a_dir)
        server = MetricsServer(BrokerMetrics(), lambda: target, "127.0.0.1", 0)
        await server.start()
        try:
            host, port = server.address
            replies = []
            for request in (
                b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
                b"POST /metrics HTTP/1.1\r\n\r\n",
            ):
                reader, writer = await asyncio.open_connection(host, port)
                writer.write(request)
                replies.append(await reader.read())
                writer.close()
            return replies[0], replies[1]
        finally:
            await server.close()

    health, post = asyncio.run(scenario())
    assert health.startswith(b"HTTP/1.1 503")
    assert b"listener: 127.0.0.1:%d" % closed in health
    assert b"data_dir:" in health
    assert post.startswith(b"HTTP/1.1 405")


def test_check_functions(tmp_path: Path) -> None:
    assert check_data_dir(tmp_path) is None
    assert list(tmp_path.iterdir()) == []  # the probe file is removed
    failure = check_data_dir(tmp_path / "missing")
    assert failure is not None and failure.startswith("data_dir:")
    refused = asyncio.run(check_listener("127.0.0.1", free_port(), timeout_s=2))
    assert refused is not None and refused.startswith("listener:")


def test_parse_metrics_address() -> None:
    assert parse_metrics_address("off") is None
    assert parse_metrics_address("OFF") is None
    assert parse_metrics_address("127.0.0.1:9644") == ("127.0.0.1", 9644)
    assert parse_metrics_address("[::1]:0") == ("::1", 0)
    for bad in ("9644", "host:", "host:port", ":1", "h:70000"):
        with pytest.raises(ValueError, match="HOST:PORT or off"):
            parse_metrics_address(bad)


def test_group_lag_from_group_snapshot() -> None:
    metrics = BrokerMetrics()
    from tidelog.broker.metrics.registry import PartitionStats

    metrics.set_partition_source(lambda: [PartitionStats("t", 0, 5, 120, 4096, 2)])
    metrics.set_group_source(
        lambda: GroupStats({"Stable": 2, "Empty": 1}, (GroupOffset("g", "t", 0, 100),))
    )
    parsed = samples(render(metrics).decode())
    assert value(parsed, "tidelog_consumer_group_lag", group="g", topic="t", partition="0") == 20
    assert (
        value(
            parsed, "tidelog_consumer_group_committed_offset", group="g", topic="t", partition="0"
        )
        == 100
    )
    assert value(parsed, "tidelog_consumer_groups", state="Stable") == 2
    assert value(parsed, "tidelog_log_segments", topic="t", partition="0") == 2


def test_serve_metrics_options(broker_factory: BrokerFactory) -> None:
    bad = run_tool("serve", "--metrics", "nonsense", "--listen", "127.0.0.1:0")
    assert bad.returncode == 2
    assert "HOST:PORT or off" in bad.stderr

    off = broker_factory(extra_args=["--metrics", "off", "--log-format", "json"])
    assert off.stop() == 0
    lines = [json.loads(line) for line in off.log_text().splitlines() if line.strip()]
    assert lines and all({"ts", "level", "logger", "message"} <= set(entry) for entry in lines)
    assert not any("metrics on" in entry["message"] for entry in lines)


def test_log_formatters_carry_request_context() -> None:
    record = logging.LogRecord(
        "tidelog.broker.router", logging.INFO, __file__, 1, "api %d: %s", (0, "boom"), None
    )
    for name, field in {
        "client_id": "app-1",
        "api": "Produce",
        "api_version": 9,
        "correlation_id": 42,
        "client": "127.0.0.1:5555",
    }.items():
        setattr(record, name, field)
    entry = json.loads(JsonFormatter().format(record))
    assert entry["message"] == "api 0: boom"
    assert entry["client_id"] == "app-1" and entry["correlation_id"] == 42
    assert entry["api"] == "Produce"
    plain = PlainFormatter().format(record)
    assert plain.endswith(
        "api 0: boom [client_id=app-1 api=Produce api_version=9 correlation_id=42 "
        "client=127.0.0.1:5555]"
    )


def test_consumer_lag_per_group_and_partition(tool_broker: ToolBroker) -> None:
    topic = "metrics-lag"
    produced = run_tool(
        "produce",
        topic,
        "-b",
        tool_broker.bootstrap,
        stdin=b"".join(b"%d\n" % i for i in range(40)),
    )
    assert produced.returncode == 0, produced.stderr
    consumer = Consumer(
        {
            "bootstrap.servers": tool_broker.bootstrap,
            "group.id": "lag-g",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    read = 0
    while read < 25:
        message = consumer.poll(10)
        assert message is not None and message.error() is None
        read += 1
    assert message is not None
    consumer.commit(message=message, asynchronous=False)  # commits offset 25
    consumer.close()
    parsed = samples(tool_broker.get("/metrics")[1])
    labels = {"group": "lag-g", "topic": topic, "partition": "0"}
    assert value(parsed, "tidelog_consumer_group_committed_offset", **labels) == 25
    assert value(parsed, "tidelog_consumer_group_lag", **labels) == 15
    assert sum(v for (name, _), v in parsed.items() if name == "tidelog_consumer_groups") >= 1


def test_fetch_partition_errors_are_counted(tool_broker: ToolBroker) -> None:
    topic = "metrics-errors"
    run_tool("produce", topic, "-b", tool_broker.bootstrap, stdin=b"a\nb\n")
    key = (
        "tidelog_request_errors_total",
        frozenset({("api", "Fetch"), ("error", "OFFSET_OUT_OF_RANGE")}),
    )
    before = samples(tool_broker.get("/metrics")[1]).get(key, 0)
    beyond = run_tool(
        "consume", topic, "-b", tool_broker.bootstrap, "--offset", "1000", "--timeout-ms", "1500"
    )
    assert beyond.returncode == 0, beyond.stderr
    assert samples(tool_broker.get("/metrics")[1])[key] > before


def test_serve_refuses_an_explicit_metrics_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        run = run_tool(
            "serve",
            "--data-dir",
            str(tmp_path / "data"),
            "--listen",
            "127.0.0.1:0",
            "--metrics",
            f"127.0.0.1:{port}",
            timeout_s=60,
        )
    assert run.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port} for --metrics" in run.stderr
    assert b"tidelog ready" not in run.stdout
