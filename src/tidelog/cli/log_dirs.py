"""`tidelog log-dirs describe`: Kafka's `kafka-log-dirs.sh --describe`.

confluent-kafka has no admin call for DescribeLogDirs, so the tool sends it (v4) itself, as
`tidelog transactions` does, to the first bootstrap broker: its log directory, each partition's
size on disk and offset lag, the filesystem's total and usable bytes.
"""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from tidelog.cli.client import ToolError, bootstrap_option, check_reachable
from tidelog.cli.transactions import _call, _module

console = Console(highlight=False)
DESCRIBE_LOG_DIRS = 35
_VERSION = 4


@click.group("log-dirs")
def log_dirs_group() -> None:
    """Log directories of a broker (kafka-log-dirs.sh)."""


@log_dirs_group.command("describe")
@bootstrap_option
@click.option("--topic", "-t", "topics", multiple=True, help="Only these topics; repeat.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--timeout", "timeout_s", type=float, default=10.0, show_default=True)
def describe_command(
    bootstrap: str, topics: tuple[str, ...], as_json: bool, timeout_s: float
) -> None:
    """Show the broker's log directory and the size of every partition in it."""
    check_reachable(bootstrap)
    module = _module(DESCRIBE_LOG_DIRS, _VERSION)
    # Null asks for every partition; a topic list needs partition numbers, so ask for all
    # and keep the named topics.
    answer = _call(
        bootstrap, DESCRIBE_LOG_DIRS, _VERSION, module.DescribeLogDirsRequest(topics=None),
        timeout_s,
    )
    if answer.error_code:
        raise ToolError(f"DescribeLogDirs failed: {answer.error_code.name}")
    rows = []
    for result in answer.results:
        for topic in result.topics:
            if topics and topic.name not in topics:
                continue
            for partition in topic.partitions:
                rows.append({
                    "log_dir": result.log_dir,
                    "topic": topic.name,
                    "partition": int(partition.partition_index),
                    "size_bytes": int(partition.partition_size),
                    "offset_lag": int(partition.offset_lag),
                })
    if as_json:
        dirs = [
            {"log_dir": r.log_dir, "error": r.error_code.name,
             "total_bytes": int(r.total_bytes), "usable_bytes": int(r.usable_bytes)}
            for r in answer.results
        ]
        click.echo(json.dumps({"log_dirs": dirs, "partitions": rows}, indent=2))
        return
    for result in answer.results:
        console.print(
            f"{result.log_dir}: {int(result.usable_bytes):,} of {int(result.total_bytes):,} "
            "bytes usable"
        )
    table = Table()
    for column in ("topic", "partition", "size_bytes", "offset_lag"):
        table.add_column(column)
    for row in sorted(rows, key=lambda r: (r["topic"], r["partition"])):
        table.add_row(row["topic"], str(row["partition"]), f"{row['size_bytes']:,}",
                      str(row["offset_lag"]))
    console.print(table)
