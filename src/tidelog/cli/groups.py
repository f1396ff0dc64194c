"""`tidelog groups list|describe|reset-offsets|delete`: consumer groups through the Kafka protocol.

Works against any Kafka broker (confluent-kafka AdminClient and Consumer only). Lag per
partition = log end offset - committed offset.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from rich.console import Console
from rich.table import Table

from tidelog.cli.client import (
    METADATA_TIMEOUT_S,
    ToolError,
    base_config,
    bootstrap_option,
    check_reachable,
    kafka_error_text,
    topic_partitions,
)

console = Console(highlight=False)
ACTIVE_STATES = {
    "STABLE",
    "PREPARING_REBALANCE",
    "COMPLETING_REBALANCE",
    "ASSIGNING",
    "RECONCILING",
}


def _admin(bootstrap: str) -> AdminClient:
    check_reachable(bootstrap)
    admin = AdminClient(base_config(bootstrap))
    try:
        # ListGroups goes to every known broker: learn them before asking (a fresh client
        # knows none yet and would answer with an empty list).
        admin.list_topics(timeout=METADATA_TIMEOUT_S)
    except KafkaException as exc:
        raise ToolError(f"metadata request failed: {kafka_error_text(exc.args[0])}") from None
    return admin


def _wait(future: Any, what: str) -> Any:
    try:
        return future.result(METADATA_TIMEOUT_S)
    except KafkaException as exc:
        raise ToolError(f"{what} failed: {kafka_error_text(exc.args[0])}") from None
    except TimeoutError:
        raise ToolError(f"{what}: no answer within {METADATA_TIMEOUT_S:g} s") from None


def _name(value: Any) -> str:
    return str(getattr(value, "name", value))


@click.group()
def groups() -> None:
    """List, describe, reset and delete consumer groups."""


@groups.command("list")
@bootstrap_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--type",
    "group_types",
    multiple=True,
    type=click.Choice(["classic", "consumer"]),
    help="Only groups of this protocol type (ListGroups v5); repeatable.",
)
def list_groups(bootstrap: str, as_json: bool, group_types: tuple[str, ...]) -> None:
    """Every consumer group the cluster knows, with its type (classic or consumer/KIP-848)."""
    admin = _admin(bootstrap)  # keep the handle alive until the future completes
    options: dict[str, Any] = {}
    if group_types:
        options["types"] = {ConsumerGroupType[name.upper()] for name in group_types}
    result = _wait(admin.list_consumer_groups(**options), "listing groups")
    rows = sorted(
        (
            {
                "group": listing.group_id,
                "state": _name(listing.state),
                "type": _name(getattr(listing, "type", "")),
            }
            for listing in result.valid
        ),
        key=lambda row: row["group"],
    )
    if as_json:
        click.echo(json.dumps(rows))
        return
    table = Table("group", "state", "type", title=f"{len(rows)} consumer groups")
    for row in rows:
        table.add_row(row["group"], row["state"], row["type"])
    console.print(table)


def _committed(admin: AdminClient, group: str) -> dict[tuple[str, int], int]:
    request = [ConsumerGroupTopicPartitions(group)]
    result = _wait(admin.list_consumer_group_offsets(request)[group], "fetching offsets")
    return {(p.topic, p.partition): p.offset for p in result.topic_partitions if p.offset >= 0}


def _end_offsets(bootstrap: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    consumer = Consumer(base_config(bootstrap, **{"group.id": "tidelog-cli-lag"}))
    try:
        return {
            (topic, partition): consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=METADATA_TIMEOUT_S
            )[1]
            for topic, partition in partitions
        }
    finally:
        consumer.close()


@groups.command("describe")
@click.argument("group")
@bootstrap_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def describe(group: str, bootstrap: str, as_json: bool) -> None:
    """Members, assignment, committed offset, log end offset and lag per partition."""
    admin = _admin(bootstrap)
    description = _wait(admin.describe_consumer_groups([group])[group], f"describing {group!r}")
    owner: dict[tuple[str, int], str] = {}
    members = []
    for member in description.members:
        assigned = [(p.topic, p.partition) for p in member.assignment.topic_partitions]
        members.append(
            {
                "member_id": member.member_id,
                "client_id": member.client_id,
                "host": member.host,
                "partitions": [f"{t}-{p}" for t, p in sorted(assigned)],
            }
        )
        for key in assigned:
            owner[key] = member.member_id
    committed = _committed(admin, group)
    keys = sorted(set(committed) | set(owner))
    ends = _end_offsets(bootstrap, keys)
    partitions: list[dict[str, Any]] = [
        {
            "topic": topic,
            "partition": partition,
            "committed": committed.get((topic, partition)),
            "log_end_offset": ends[(topic, partition)],
            "lag": None
            if (topic, partition) not in committed
            else ends[(topic, partition)] - committed[(topic, partition)],
            "member": owner.get((topic, partition)),
        }
        for topic, partition in keys
    ]
    summary = {
        "group": group,
        "state": _name(description.state),
        "assignor": description.partition_assignor,
        "coordinator": f"{description.coordinator.host}:{description.coordinator.port}",
    }
    if as_json:
        click.echo(json.dumps({**summary, "members": members, "partitions": partitions}))
        return
    console.print(
        f"[bold]{group}[/bold]  state {summary['state']}  assignor {summary['assignor'] or '-'}"
        f"  coordinator {summary['coordinator']}"
    )
    table = Table("member", "client", "host", "partitions", title=f"{len(members)} members")
    for row in members:
        table.add_row(row["member_id"], row["client_id"], row["host"], ", ".join(row["partitions"]))
    console.print(table)
    offsets = Table("topic", "partition", "committed", "log end", "lag", "member")
    for row in partitions:
        offsets.add_row(
            row["topic"],
            str(row["partition"]),
            "-" if row["committed"] is None else str(row["committed"]),
            str(row["log_end_offset"]),
            "-" if row["lag"] is None else str(row["lag"]),
            str(row["member"] or "-"),
        )
    console.print(offsets)


def _targets(
    bootstrap: str, topic: str, partitions: list[int], how: str, value: Any
) -> dict[int, int]:
    consumer = Consumer(base_config(bootstrap, **{"group.id": "tidelog-cli-reset"}))
    try:
        marks = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=METADATA_TIMEOUT_S)
            for p in partitions
        }
        if how == "earliest":
            return {p: low for p, (low, _) in marks.items()}
        if how == "latest":
            return {p: high for p, (_, high) in marks.items()}
        if how == "offset":
            return {p: min(max(int(value), low), high) for p, (low, high) in marks.items()}
        wanted = [TopicPartition(topic, p, value) for p in partitions]
        found = consumer.offsets_for_times(wanted, timeout=METADATA_TIMEOUT_S)
        # No record at or after the time: the end of the partition, as Kafka's tool does.
        return {
            tp.partition: tp.offset if tp.offset >= 0 else marks[tp.partition][1] for tp in found
        }
    finally:
        consumer.close()


def _parse_datetime(text: str) -> int:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not an ISO date-time", param_hint="'--to-datetime'"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


@groups.command("reset-offsets")
@click.argument("group")
@click.option("--topic", required=True, help="Topic whose committed offsets to move.")
@click.option("--to-earliest", is_flag=True, help="The log start offset.")
@click.option("--to-latest", is_flag=True, help="The log end offset.")
@click.option(
    "--to-datetime", metavar="ISO", help="First offset at or after this time (UTC if no zone)."
)
@click.option("--to-offset", type=int, metavar="N", help="This offset (clamped to the log).")
@bootstrap_option
def reset_offsets(
    group: str,
    topic: str,
    to_earliest: bool,
    to_latest: bool,
    to_datetime: str | None,
    to_offset: int | None,
    bootstrap: str,
) -> None:
    """Move an EMPTY group's committed offsets for a topic."""
    chosen = [
        (flag, value)
        for flag, value in (
            ("earliest", to_earliest or None),
            ("latest", to_latest or None),
            ("datetime", to_datetime),
            ("offset", to_offset),
        )
        if value is not None
    ]
    if len(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset"
        )
    how, value = chosen[0]
    if how == "datetime":
        value = _parse_datetime(str(value))
    admin = _admin(bootstrap)
    description = _wait(admin.describe_consumer_groups([group])[group], f"describing {group!r}")
    state = _name(description.state)
    if description.members or state in ACTIVE_STATES:
        raise ToolError(
            f"group {group!r} is {state} with {len(description.members)} members; "
            "stop its consumers first (only empty groups can be reset)"
        )
    partitions = topic_partitions(bootstrap, topic)
    targets = _targets(
        bootstrap, topic, partitions, "datetime" if how == "datetime" else how, value
    )
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p, offset) for p, offset in sorted(targets.items())]
    )
    _wait(admin.alter_consumer_group_offsets([request])[group], "committing new offsets")
    table = Table("topic", "partition", "new offset", title=f"{group}: offsets reset")
    for partition, offset in sorted(targets.items()):
        table.add_row(topic, str(partition), str(offset))
    console.print(table)


@groups.command("delete")
@click.argument("group")
@bootstrap_option
def delete(group: str, bootstrap: str) -> None:
    """Delete an empty group and its committed offsets."""
    admin = _admin(bootstrap)
    _wait(admin.delete_consumer_groups([group])[group], f"deleting {group!r}")
    console.print(f"deleted group {group}")
