"""`tidelog consume TOPIC`: print messages, like kafka-console-consumer.

Without `--group` the tool assigns the partitions itself (no group, nothing committed). With
`--group G` it subscribes in that group and commits automatically, as kafka-console-consumer
does; `--from-beginning` then applies only when the group has no committed offset
(auto.offset.reset=earliest), while `--offset` / `--timestamp` override committed positions.

Output: `raw` writes each value followed by a newline (with `--print-key`, the key and
`--key-separator` first); `json` writes one object per line with topic, partition, offset,
timestamp (ms), key, value and headers (UTF-8 text, or `{"base64": ...}` for other bytes).
"""

from __future__ import annotations

import base64
import json
import sys
import time
from datetime import datetime
from typing import Any

import click

from tidelog.cli.client import (
    ToolError,
    base_config,
    bootstrap_option,
    check_reachable,
    kafka_error_text,
    stderr,
    topic_partitions,
)

JOIN_TIMEOUT_S = 60.0


def _text(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def _timestamp_ms(text: str) -> int:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not an ISO 8601 time (e.g. 2024-05-01T12:00:00+00:00)",
            param_hint="'--timestamp'",
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # a naive time means local time, as the shell user sees it
    return int(moment.timestamp() * 1000)


def _start_offsets(
    consumer: Any,
    topic: str,
    partitions: list[int],
    offset: int | None,
    timestamp_ms: int | None,
    from_beginning: bool,
) -> list[Any]:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

    if timestamp_ms is not None:
        wanted = [TopicPartition(topic, p, timestamp_ms) for p in partitions]
        found = consumer.offsets_for_times(wanted, timeout=10.0)
        # -1: no message at or after the time; start at the end like Kafka's tools
        return [
            TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END)
            for tp in found
        ]
    if offset is not None:
        return [TopicPartition(topic, p, offset) for p in partitions]
    start = OFFSET_BEGINNING if from_beginning else OFFSET_END
    return [TopicPartition(topic, p, start) for p in partitions]


class _Printer:
    def __init__(self, output_format: str, print_key: bool, key_separator: str) -> None:
        self._json = output_format == "json"
        self._print_key = print_key
        self._separator = key_separator.encode()
        self._out = sys.stdout.buffer

    def write(self, message: Any) -> None:
        if self._json:
            _, timestamp = message.timestamp()
            record = {
                "topic": message.topic(),
                "partition": message.partition(),
                "offset": message.offset(),
                "timestamp": timestamp,
                "key": _text(message.key()),
                "value": _text(message.value()),
                "headers": [[k, _text(v)] for k, v in (message.headers() or [])],
            }
            self._out.write(json.dumps(record, ensure_ascii=False).encode() + b"\n")
            return
        if self._print_key:
            self._out.write((message.key() or b"null") + self._separator)
        self._out.write((message.value() or b"") + b"\n")

    def flush(self) -> None:
        self._out.flush()


@click.command("consume")
@click.argument("topic")
@bootstrap_option
@click.option("--group", "-g", help="Consume in this group (commits automatically).")
@click.option("--from-beginning", is_flag=True, help="Start at the earliest offset.")
@click.option("--offset", type=click.IntRange(min=0), help="Start at this offset.")
@click.option("--timestamp", help="Start at the first message at or after this ISO time.")
@click.option("--partition", "-p", "partition", type=int, help="Read only this partition.")
@click.option("--max-messages", "-n", type=click.IntRange(min=1), help="Stop after N messages.")
@click.option(
    "--timeout-ms", type=click.IntRange(min=1), help="Stop when no message arrives for this long."
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["raw", "json"]),
    default="raw",
    show_default=True,
)
@click.option("--print-key", is_flag=True, help="raw format: print the key before the value.")
@click.option("--key-separator", default="\t", show_default="TAB")
def consume_command(
    topic: str,
    bootstrap: str,
    group: str | None,
    from_beginning: bool,
    offset: int | None,
    timestamp: str | None,
    partition: int | None,
    max_messages: int | None,
    timeout_ms: int | None,
    output_format: str,
    print_key: bool,
    key_separator: str,
) -> None:
    """Print messages of TOPIC to stdout."""
    from confluent_kafka import Consumer, KafkaError

    if sum((from_beginning, offset is not None, timestamp is not None)) > 1:
        raise click.UsageError("use only one of --from-beginning, --offset, --timestamp")
    timestamp_ms = _timestamp_ms(timestamp) if timestamp is not None else None
    check_reachable(bootstrap)
    settings: dict[str, Any] = {
        "auto.offset.reset": "earliest" if from_beginning else "latest",
        "enable.partition.eof": False,
    }
    if group:
        settings.update({"group.id": group, "enable.auto.commit": True})
    else:
        settings.update(
            {"group.id": f"tidelog-console-{time.time_ns()}", "enable.auto.commit": False}
        )
    consumer = Consumer(base_config(bootstrap, **settings))
    printer = _Printer(output_format, print_key, key_separator)
    count = 0
    try:
        partitions = topic_partitions(bootstrap, topic)
        if partition is not None:
            if partition not in partitions:
                raise ToolError(f"topic {topic!r} has no partition {partition}")
            partitions = [partition]
        explicit_start = offset is not None or timestamp_ms is not None
        idle_s = timeout_ms / 1000 if timeout_ms else None
        # --timeout-ms counts from the assignment: a group join may take seconds
        # (group.initial.rebalance.delay.ms) before the first message can arrive.
        idle_deadline: list[float | None] = [None]
        joined = time.monotonic()
        if group and partition is None:

            def on_assign(c: Any, assigned: list[Any]) -> None:
                if idle_s is not None:
                    idle_deadline[0] = time.monotonic() + idle_s
                if explicit_start:
                    c.assign(
                        _start_offsets(
                            c,
                            topic,
                            [tp.partition for tp in assigned],
                            offset,
                            timestamp_ms,
                            from_beginning,
                        )
                    )

            consumer.subscribe([topic], on_assign=on_assign)
        else:
            consumer.assign(
                _start_offsets(consumer, topic, partitions, offset, timestamp_ms, from_beginning)
            )
            if idle_s is not None:
                idle_deadline[0] = time.monotonic() + idle_s
        while max_messages is None or count < max_messages:
            message = consumer.poll(0.2)
            if message is None:
                deadline = idle_deadline[0]
                if deadline is not None and time.monotonic() >= deadline:
                    break
                if deadline is None and idle_s and time.monotonic() - joined > JOIN_TIMEOUT_S:
                    raise ToolError(
                        f"no partitions assigned in group {group!r} after {JOIN_TIMEOUT_S:g}s"
                    )
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise ToolError(f"topic {topic!r} does not exist")
                if error.fatal() or not error.retriable():
                    raise ToolError(f"consume failed: {kafka_error_text(error)}")
                continue
            printer.write(message)
            count += 1
            if idle_s is not None:
                idle_deadline[0] = time.monotonic() + idle_s
        printer.flush()
    except KeyboardInterrupt:
        printer.flush()
    finally:
        consumer.close()  # in a group: commits the final position (auto commit) and leaves
    stderr.print(f"consumed {count:,} messages")
