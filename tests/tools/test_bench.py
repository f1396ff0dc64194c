"""`tidelog bench` completes its quick workload against a live broker with its counts checked."""

from __future__ import annotations

import json

from tidelog.cli.perf import ValuePool, percentiles_ms

from .conftest import ToolBroker
from .helpers import free_port, run_tool


def test_bench_produce_quick_counts_check(tool_broker: ToolBroker) -> None:
    run = run_tool(
        "bench",
        "produce",
        "--quick",
        "--json",
        "-b",
        tool_broker.bootstrap,
        "--topic",
        "bench-quick",
        timeout_s=180,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["ok"] is True
    assert result["messages"] == 200_000
    assert all(result["checks"].values())
    assert result["bytes"] == ValuePool.generate(200, 300).total_bytes(200_000)
    assert set(result["latency_ms"]) == {"p50", "p95", "p99", "max"}
    assert result["msg_per_s"] > 0


def test_bench_e2e_counts_check(tool_broker: ToolBroker) -> None:
    run = run_tool(
        "bench", "e2e", "-n", "20000", "--json", "-b", tool_broker.bootstrap, "--topic", "bench-e2e"
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["ok"] is True and result["messages"] == 20_000
    assert result["latency_kind"] == "send->receive"


def test_bench_errors() -> None:
    down = run_tool("bench", "produce", "--quick", "-b", f"127.0.0.1:{free_port()}")
    assert down.returncode == 1
    assert "tidelog serve" in down.stderr
    sizes = run_tool("bench", "produce", "--min-size", "300", "--max-size", "200")
    assert sizes.returncode == 2


def test_value_pool_and_percentiles() -> None:
    pool = ValuePool.generate(200, 300)
    assert all(200 <= len(v) <= 300 for v in pool.values)
    assert pool.total_bytes(len(pool.values) + 3) == (
        sum(map(len, pool.values)) + sum(len(v) for v in pool.values[:3])
    )
    assert percentiles_ms([i / 1000 for i in range(1, 101)]) == {
        "p50": 51.0,
        "p95": 96.0,
        "p99": 100.0,
        "max": 100.0,
    }


def test_bench_consume_quick_seeds_backlog_and_checks_commit(tool_broker: ToolBroker) -> None:
    run = run_tool(
        "bench",
        "consume",
        "--quick",
        "--json",
        "-b",
        tool_broker.bootstrap,
        "--topic",
        "bench-consume",
        timeout_s=180,
    )
    assert run.returncode == 0, run.stderr
    seeded, consumed = json.loads(run.stdout)
    assert seeded["mode"] == "produce" and seeded["ok"] is True
    assert consumed["mode"] == "consume" and consumed["ok"] is True
    assert consumed["messages"] == 200_000
    assert consumed["checks"] == {
        "read == requested": True,
        "final commit covers all": True,
        "bytes == expected": True,
    }
