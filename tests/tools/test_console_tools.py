"""produce / consume / dump-log / config against a live broker, including the error paths."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from .conftest import ToolBroker
from .helpers import free_port, run_tool


def test_produce_then_consume_json_with_keys_and_headers(tool_broker: ToolBroker) -> None:
    lines = b"".join(b"key-%d:value %d\n" % (i, i) for i in range(50))
    produced = run_tool(
        "produce",
        "tools-json",
        "-b",
        tool_broker.bootstrap,
        "--key-separator",
        ":",
        "--header",
        "source=test",
        "--header",
        "n=1",
        stdin=lines,
    )
    assert produced.returncode == 0, produced.stderr
    assert "produced 50 messages" in produced.stderr

    consumed = run_tool(
        "consume",
        "tools-json",
        "-b",
        tool_broker.bootstrap,
        "--from-beginning",
        "--max-messages",
        "50",
        "--format",
        "json",
    )
    assert consumed.returncode == 0, consumed.stderr
    records = [json.loads(line) for line in consumed.text.splitlines()]
    assert [r["offset"] for r in records] == list(range(50))
    assert [r["key"] for r in records] == [f"key-{i}" for i in range(50)]
    assert [r["value"] for r in records] == [f"value {i}" for i in range(50)]
    assert all(r["headers"] == [["source", "test"], ["n", "1"]] for r in records)


def test_produce_file_acks_all_compressed_then_consume_from_offset(
    tool_broker: ToolBroker, tmp_path: Path
) -> None:
    source = tmp_path / "lines.txt"
    source.write_bytes(b"".join(b"line %03d\n" % i for i in range(200)))
    produced = run_tool(
        "produce",
        "tools-file",
        "-b",
        tool_broker.bootstrap,
        "--file",
        str(source),
        "--acks",
        "all",
        "--compression",
        "zstd",
    )
    assert produced.returncode == 0, produced.stderr

    tail = run_tool(
        "consume",
        "tools-file",
        "-b",
        tool_broker.bootstrap,
        "--offset",
        "195",
        "--timeout-ms",
        "5000",  # idle time counted from the assignment: the first fetch must fit in it
        "--print-key",
        "--key-separator",
        "|",
    )
    assert tail.returncode == 0, tail.stderr
    assert tail.text.splitlines() == [f"null|line {i:03d}" for i in range(195, 200)]

    by_time = run_tool(
        "consume",
        "tools-file",
        "-b",
        tool_broker.bootstrap,
        "--timestamp",
        "2000-01-01T00:00:00+00:00",
        "-n",
        "2",
    )
    assert by_time.returncode == 0, by_time.stderr
    assert by_time.text.splitlines() == ["line 000", "line 001"]

    future = run_tool(
        "consume",
        "tools-file",
        "-b",
        tool_broker.bootstrap,
        "--timestamp",
        "2999-01-01T00:00:00",
        "--timeout-ms",
        "800",
    )
    assert future.returncode == 0
    assert future.text == ""


def test_consume_errors_are_one_line_and_non_zero(tool_broker: ToolBroker) -> None:
    unknown = run_tool("consume", "no-such-topic", "-b", tool_broker.bootstrap, "-n", "1")
    assert unknown.returncode == 1
    assert "topic 'no-such-topic' does not exist" in unknown.stderr

    closed_port = free_port()
    down = run_tool("consume", "any", "-b", f"127.0.0.1:{closed_port}", "-n", "1")
    assert down.returncode == 1
    assert f"127.0.0.1:{closed_port}" in down.stderr
    assert "tidelog serve" in down.stderr

    both = run_tool("consume", "any", "--from-beginning", "--offset", "3")
    assert both.returncode == 2
    assert "only one of" in both.stderr
    negative = run_tool("consume", "any", "--offset", "-1")
    assert negative.returncode == 2
    bad_time = run_tool("consume", "any", "--timestamp", "yesterday")
    assert bad_time.returncode == 2
    assert "ISO 8601" in bad_time.stderr


def test_produce_errors(tool_broker: ToolBroker) -> None:
    no_separator = run_tool(
        "produce",
        "tools-errors",
        "-b",
        tool_broker.bootstrap,
        "--key-separator",
        "=",
        stdin=b"k=v\nno separator here\n",
    )
    assert no_separator.returncode == 1
    assert "line 2 has no key separator" in no_separator.stderr

    bad_header = run_tool("produce", "tools-errors", "--header", "novalue", stdin=b"x\n")
    assert bad_header.returncode == 2
    assert "key=value" in bad_header.stderr

    down = run_tool("produce", "t", "-b", f"127.0.0.1:{free_port()}", stdin=b"x\n")
    assert down.returncode == 1
    assert "cannot reach a broker" in down.stderr

    bad_acks = run_tool("produce", "t", "--acks", "2", stdin=b"x\n")
    assert bad_acks.returncode == 2


def test_dump_log_reports_batches_records_and_corruption(
    tool_broker: ToolBroker, tmp_path: Path
) -> None:
    produced = run_tool(
        "produce",
        "tools-dump",
        "-b",
        tool_broker.bootstrap,
        stdin=b"".join(b"dump %d\n" % i for i in range(30)),
    )
    assert produced.returncode == 0, produced.stderr
    partition_dir = tool_broker.process.data_dir / "tools-dump-0"

    dumped = run_tool("dump-log", str(partition_dir))
    assert dumped.returncode == 0, dumped.stderr
    assert "baseOffset: 0 lastOffset: 29 count: 30" in dumped.text
    assert "isValid: true" in dumped.text
    assert "30 records, offsets 0..29, 0 invalid, 0 torn tail bytes" in dumped.text

    with_records = run_tool("dump-log", str(partition_dir), "--records")
    assert with_records.returncode == 0
    assert "| offset: 29 CreateTime:" in with_records.text
    assert "value: dump 29" in with_records.text

    # A copy with one flipped byte inside the records and a torn tail.
    segment = next(partition_dir.glob("*.log"))
    damaged = tmp_path / segment.name
    shutil.copyfile(segment, damaged)
    data = bytearray(damaged.read_bytes())
    data[70] ^= 0xFF
    damaged.write_bytes(bytes(data) + b"\x00" * 20)
    broken = run_tool("dump-log", str(damaged))
    assert broken.returncode == 1
    assert "isValid: false" in broken.text
    assert "20 torn tail bytes" in broken.text
    assert "corrupt batch" in broken.stderr

    not_a_segment = tmp_path / "notes.txt"
    not_a_segment.write_text("x")
    wrong = run_tool("dump-log", str(not_a_segment))
    assert wrong.returncode == 1
    assert "not a .log segment" in wrong.stderr
    missing = run_tool("dump-log", str(tmp_path / "missing"))
    assert missing.returncode == 2


def test_config_describe_and_set(tool_broker: ToolBroker) -> None:
    created = run_tool("produce", "tools-config", "-b", tool_broker.bootstrap, stdin=b"x\n")
    assert created.returncode == 0, created.stderr
    before = run_tool("config", "describe", "--topic", "tools-config", "-b", tool_broker.bootstrap)
    assert before.returncode == 0, before.stderr
    assert "retention.ms" not in before.text

    changed = run_tool(
        "config",
        "set",
        "--topic",
        "tools-config",
        "-b",
        tool_broker.bootstrap,
        "retention.ms=3600000",
        "segment.bytes=1048576",
    )
    assert changed.returncode == 0, changed.stderr
    after = run_tool("config", "describe", "--topic", "tools-config", "-b", tool_broker.bootstrap)
    assert "retention.ms" in after.text and "3600000" in after.text
    assert "segment.bytes" in after.text

    removed = run_tool(
        "config",
        "set",
        "--topic",
        "tools-config",
        "-b",
        tool_broker.bootstrap,
        "--delete",
        "retention.ms",
    )
    assert removed.returncode == 0, removed.stderr
    final = run_tool(
        "config", "describe", "--topic", "tools-config", "-b", tool_broker.bootstrap, "--all"
    )
    # The retention.ms row itself is back to its default (other configs, e.g.
    # message.timestamp.after.max.ms, have 3600000 as their own default).
    [row] = [line for line in final.text.splitlines() if " retention.ms " in line]
    assert "default" in row and "3600000" not in row

    broker_configs = run_tool(
        "config", "describe", "--broker", "0", "-b", tool_broker.bootstrap, "--all"
    )
    assert broker_configs.returncode == 0, broker_configs.stderr
    assert "broker 0" in broker_configs.text


def test_config_errors(tool_broker: ToolBroker) -> None:
    unknown_topic = run_tool("config", "describe", "--topic", "nope", "-b", tool_broker.bootstrap)
    assert unknown_topic.returncode == 1
    assert "does not exist" in unknown_topic.stderr
    run_tool("produce", "tools-config-errors", "-b", tool_broker.bootstrap, stdin=b"x\n")
    bad_key = run_tool(
        "config",
        "set",
        "--topic",
        "tools-config-errors",
        "-b",
        tool_broker.bootstrap,
        "no.such.config=1",
    )
    assert bad_key.returncode == 1
    assert "no.such.config" in bad_key.stderr
    neither = run_tool("config", "describe")
    assert neither.returncode == 2
    nothing = run_tool("config", "set", "--topic", "x")
    assert nothing.returncode == 2
    not_pair = run_tool("config", "set", "--topic", "x", "retention.ms")
    assert not_pair.returncode == 2


def test_consume_in_a_group_commits_and_resumes(tool_broker: ToolBroker) -> None:
    run_tool(
        "produce",
        "tools-group",
        "-b",
        tool_broker.bootstrap,
        stdin=b"".join(b"g%d\n" % i for i in range(10)),
    )
    first = run_tool(
        "consume",
        "tools-group",
        "-b",
        tool_broker.bootstrap,
        "--group",
        "cli-g",
        "--from-beginning",
        "-n",
        "6",
    )
    assert first.returncode == 0, first.stderr
    assert first.text.splitlines() == [f"g{i}" for i in range(6)]
    # Same group again: resumes from the committed offset, not from the beginning.
    rest = run_tool(
        "consume",
        "tools-group",
        "-b",
        tool_broker.bootstrap,
        "--group",
        "cli-g",
        "--from-beginning",
        "--timeout-ms",
        "5000",  # idle time counted from the assignment: the first fetch must fit in it
    )
    assert rest.returncode == 0, rest.stderr
    assert rest.text.splitlines() == [f"g{i}" for i in range(6, 10)]
