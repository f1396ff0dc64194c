"""`tidelog topics ...` as a user runs it: a subprocess against a live broker."""

from __future__ import annotations

import json
import socket
import subprocess
import uuid
from typing import Any

from .conftest import TIDELOG


def run(*args: str, bootstrap: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [TIDELOG, "topics", *args]
    if bootstrap is not None:
        command += ["--bootstrap", bootstrap, "--timeout", "10"]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_create_list_describe_delete(broker: Any) -> None:
    name = unique("cli")
    created = run(
        "create",
        name,
        "--partitions",
        "3",
        "--config",
        "retention.ms=60000",
        bootstrap=broker.bootstrap,
    )
    assert created.returncode == 0, created.stderr
    assert name in created.stdout

    listed = run("list", "--json", bootstrap=broker.bootstrap)
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows[name] == {"name": name, "partitions": 3, "replication_factor": 1}
    table = run("list", bootstrap=broker.bootstrap)
    assert table.returncode == 0 and name in table.stdout

    described = run("describe", name, "--json", bootstrap=broker.bootstrap)
    assert described.returncode == 0, described.stderr
    info = json.loads(described.stdout)
    assert info["name"] == name and not info["internal"]
    assert info["configs"] == {"retention.ms": "60000"}
    assert [p["partition"] for p in info["partitions"]] == [0, 1, 2]
    for partition in info["partitions"]:
        assert (partition["leader"], partition["replicas"], partition["isr"]) == (0, [0], [0])
        assert (partition["log_start_offset"], partition["log_end_offset"]) == (0, 0)
    human = run("describe", name, bootstrap=broker.bootstrap)
    assert human.returncode == 0 and "retention.ms" in human.stdout and "LOG END" in human.stdout

    deleted = run("delete", name, bootstrap=broker.bootstrap)
    assert deleted.returncode == 0, deleted.stderr
    assert "does not exist" in run("delete", name, "--if-exists", bootstrap=broker.bootstrap).stdout


def test_broker_errors_are_one_line(broker: Any) -> None:
    name = unique("cli-dup")
    assert run("create", name, "-p", "1", bootstrap=broker.bootstrap).returncode == 0
    line = one_error_line(run("create", name, "-p", "1", bootstrap=broker.bootstrap))
    assert "TOPIC_ALREADY_EXISTS" in line and name in line
    quiet = run("create", name, "-p", "1", "--if-not-exists", bootstrap=broker.bootstrap)
    assert quiet.returncode == 0 and "already exists" in quiet.stdout

    line = one_error_line(run("create", "bad/name", bootstrap=broker.bootstrap))
    assert "TOPIC_EXCEPTION" in line
    line = one_error_line(run("create", unique("cli"), "-r", "3", bootstrap=broker.bootstrap))
    assert "INVALID_REPLICATION_FACTOR" in line
    bad_config = run(
        "create", unique("cli"), "-c", "segment.bytes=tiny", bootstrap=broker.bootstrap
    )
    assert "INVALID_CONFIG" in one_error_line(bad_config)
    missing = unique("cli-missing")
    assert "UNKNOWN_TOPIC" in one_error_line(run("delete", missing, bootstrap=broker.bootstrap))
    assert "UNKNOWN_TOPIC" in one_error_line(run("describe", missing, bootstrap=broker.bootstrap))


def test_validate_only_creates_nothing(broker: Any) -> None:
    name = unique("cli-dry")
    result = run("create", name, "-p", "2", "--validate-only", bootstrap=broker.bootstrap)
    assert result.returncode == 0 and "validate only" in result.stdout
    assert "UNKNOWN_TOPIC" in one_error_line(run("describe", name, bootstrap=broker.bootstrap))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_broker_down_names_the_address_and_how_to_start_one() -> None:
    address = f"127.0.0.1:{free_port()}"
    for args in (("list",), ("create", "x", "-p", "1"), ("describe", "x"), ("delete", "x")):
        line = one_error_line(run(*args, bootstrap=address))
        assert address in line and "tidelog serve" in line


def test_bad_arguments_exit_2() -> None:
    for args in (
        ("create", "x", "--partitions", "0"),
        ("create", "x", "--partitions", "many"),
        ("create", "x", "--config", "no-equals-sign"),
        ("create",),
        ("list", "--bootstrap", "nohostport"),
        ("frobnicate",),
    ):
        result = run(*args)
        assert result.returncode == 2, (args, result)
        assert result.stderr.strip()


def test_help_texts() -> None:
    result = run("--help")
    assert result.returncode == 0
    for command in ("create", "list", "describe", "delete"):
        assert command in result.stdout
        help_text = run(command, "--help").stdout
        assert "--bootstrap" in help_text and "--timeout" in help_text
