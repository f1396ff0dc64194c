"""`tidelog produce TOPIC`: one message per input line, like kafka-console-producer.

Lines come from stdin or `--file` (bytes, the trailing newline stripped). With
`--key-separator SEP` each line is `key SEP value` (split at the first SEP; a line without SEP is
an error naming its line number). `--header k=v` adds a header to every message. Exit status 0
only when every message was acknowledged.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import click
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from tidelog.cli.client import (
    ToolError,
    base_config,
    bootstrap_option,
    check_reachable,
    find_partitions,
    kafka_error_text,
    parse_properties,
    stderr,
)

COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
FLUSH_TIMEOUT_S = 60.0


def _lines(stream: BinaryIO) -> Iterator[bytes]:
    for line in stream:
        if line.endswith(b"\n"):
            line = line[:-1]
            if line.endswith(b"\r"):
                line = line[:-1]
        yield line


def _ensure_topic(producer: Any, bootstrap: str, topic: str) -> list[int]:
    """The topic's partitions. It must exist, or the broker must create it on the producer's
    Metadata request (auto.create.topics.enable, as kafka-console-producer relies on)."""
    partitions = find_partitions(bootstrap, topic)
    if partitions is not None:
        return partitions
    from confluent_kafka import KafkaException

    try:
        metadata = producer.list_topics(topic=topic, timeout=10.0)
    except KafkaException as exc:
        raise ToolError(f"metadata request failed: {exc.args[0]}") from None
    info = metadata.topics.get(topic)
    if info is None or info.error is not None or not info.partitions:
        raise ToolError(
            f"topic {topic!r} does not exist and the broker did not create it "
            "(create it with `tidelog topics create`)"
        )
    return sorted(info.partitions)


@click.command("produce")
@click.argument("topic")
@bootstrap_option
@click.option(
    "--file",
    "file_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read lines from this file instead of stdin.",
)
@click.option("--key-separator", help="Split each line into key and value at the first SEP.")
@click.option(
    "--header",
    "headers",
    multiple=True,
    metavar="K=V",
    help="Header added to every message (repeatable).",
)
@click.option("--acks", type=click.Choice(["0", "1", "all", "-1"]), default="1", show_default=True)
@click.option("--compression", type=click.Choice(COMPRESSIONS), default="none", show_default=True)
@click.option("--partition", type=int, default=None, help="Write to this partition only.")
@click.option(
    "-X",
    "extra",
    multiple=True,
    metavar="KEY=VALUE",
    help="Extra librdkafka producer setting (repeatable).",
)
def produce_command(
    topic: str,
    bootstrap: str,
    file_path: Path | None,
    key_separator: str | None,
    headers: tuple[str, ...],
    acks: str,
    compression: str,
    partition: int | None,
    extra: tuple[str, ...],
) -> None:
    """Produce one message per line of stdin (or --file) to TOPIC."""
    from confluent_kafka import Producer

    header_list = list(parse_properties(headers, "--header").items())
    if key_separator == "":
        raise click.BadParameter("must not be empty", param_hint="'--key-separator'")
    separator = key_separator.encode() if key_separator is not None else None
    check_reachable(bootstrap)
    producer = Producer(
        base_config(
            bootstrap,
            acks=acks,
            **{"compression.type": compression, "linger.ms": 5},
            **parse_properties(extra, "-X"),
        )
    )
    partitions = _ensure_topic(producer, bootstrap, topic)
    if partition is not None and partition not in partitions:
        raise ToolError(f"topic {topic!r} has no partition {partition}")

    outcome: dict[str, int] = {"delivered": 0, "failed": 0}
    first_error: list[str] = []

    def on_delivery(error: Any, message: Any) -> None:
        if error is None:
            outcome["delivered"] += 1
            return
        outcome["failed"] += 1
        if not first_error:
            first_error.append(kafka_error_text(error))

    stream: BinaryIO = file_path.open("rb") if file_path else sys.stdin.buffer
    total_bytes = file_path.stat().st_size if file_path else None
    progress = Progress(
        TextColumn("producing"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=stderr,
        transient=True,
        disable=total_bytes is None or not stderr.is_terminal,
    )
    sent = 0
    payload_bytes = 0
    started = time.perf_counter()
    try:
        with progress:
            task = progress.add_task("produce", total=total_bytes)
            for number, line in enumerate(_lines(stream), start=1):
                key: bytes | None = None
                value = line
                if separator is not None:
                    key, found, value = line.partition(separator)
                    if not found:
                        raise ToolError(f"line {number} has no key separator {key_separator!r}")
                kwargs: dict[str, Any] = {
                    "key": key,
                    "headers": header_list or None,
                    "on_delivery": on_delivery,
                }
                if partition is not None:
                    kwargs["partition"] = partition
                while True:
                    try:
                        producer.produce(topic, value, **kwargs)
                        break
                    except BufferError:
                        producer.poll(0.05)  # local queue full: let deliveries drain
                sent += 1
                payload_bytes += len(line) + 1
                if sent % 1000 == 0:
                    producer.poll(0)
                    progress.update(task, completed=payload_bytes)
            remaining = producer.flush(FLUSH_TIMEOUT_S)
    finally:
        if file_path:
            stream.close()
    elapsed = time.perf_counter() - started
    if remaining:
        raise ToolError(
            f"{remaining} of {sent} messages still unacknowledged after "
            f"{FLUSH_TIMEOUT_S:g}s (is the broker at {bootstrap} healthy?)"
        )
    if outcome["failed"]:
        raise ToolError(f"{outcome['failed']} of {sent} messages failed: {first_error[0]}")
    stderr.print(f"produced {outcome['delivered']:,} messages to {topic} in {elapsed:.2f}s")
