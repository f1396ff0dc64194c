"""`tidelog groups describe-share|reset-share-offsets`: share groups (KIP-932) through the Kafka
protocol.

confluent-kafka's AdminClient has no share-group calls yet, so these speak the protocol
directly (kio schemas over a socket): FindCoordinator for the group, then ShareGroupDescribe,
DescribeShareGroupOffsets v1 (share-partition start offset and lag) and
AlterShareGroupOffsets, and ListGroups v5 with the `share` type filter (librdkafka's
list_consumer_groups leaves share groups out, as Kafka's kafka-consumer-groups does). They
work against Kafka 4.x too.
"""

from __future__ import annotations

import io
import json
import socket
import struct
import sys
from typing import Any

import click
from confluent_kafka import Consumer, TopicPartition
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32
from rich.console import Console
from rich.table import Table

from tidelog.cli.client import (
    METADATA_TIMEOUT_S,
    ToolError,
    base_config,
    bootstrap_option,
    check_reachable,
    topic_partitions,
)
from tidelog.errors import ErrorCode
from tidelog.protocol.api_keys import ApiKey

console = Console(highlight=False)
MAX_FRAME_BYTES = 64 * 1024 * 1024


class _Connection:
    """One blocking connection; requests answered in order."""

    def __init__(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=METADATA_TIMEOUT_S)
        self.correlation_id = 0

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        request_cls = load_request_schema(api_key, version)
        self.correlation_id += 1
        header = request_cls.__header_schema__(
            request_api_key=i16(api_key), request_api_version=i16(version),
            correlation_id=i32(self.correlation_id), client_id="tidelog-cli",
        )
        buffer = io.BytesIO()
        entity_writer(type(header))(buffer, header)
        entity_writer(request_cls)(buffer, request_cls(**fields))
        payload = buffer.getvalue()
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", self._read(4))
        if not 0 < size <= MAX_FRAME_BYTES:
            raise ToolError(f"bad response frame size {size}")
        frame = self._read(size)
        response_cls = load_response_schema(api_key, version)
        body, _ = entity_reader(response_cls)(frame, 5 if response_cls.__flexible__ else 4)
        return body

    def _read(self, count: int) -> bytes:
        chunks = []
        while count:
            chunk = self.sock.recv(count)
            if not chunk:
                raise ToolError("the broker closed the connection")
            chunks.append(chunk)
            count -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self.sock.close()


def _request_module(api_key: int, version: int) -> Any:
    return sys.modules[load_request_schema(api_key, version).__module__]


def _coordinator(bootstrap: str, group: str) -> _Connection:
    check_reachable(bootstrap.split(",")[0])
    first = _Connection(bootstrap.split(",")[0])
    try:
        answer = first.call(ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=(group,))
    finally:
        first.close()
    found = answer.coordinators[0]
    if found.error_code != 0:
        raise ToolError(f"finding the coordinator of {group!r}: {_error(found.error_code)}")
    return _Connection(f"{found.host}:{found.port}")


def _error(code: int) -> str:
    try:
        return ErrorCode(int(code)).name
    except ValueError:
        return str(int(code))


@click.command("list-share")
@bootstrap_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_share(bootstrap: str, as_json: bool) -> None:
    """Every share group the broker coordinates (ListGroups v5, type `share`)."""
    check_reachable(bootstrap.split(",")[0])
    connection = _Connection(bootstrap.split(",")[0])
    try:
        answer = connection.call(ApiKey.LIST_GROUPS, 5, states_filter=(), types_filter=("share",))
    finally:
        connection.close()
    if answer.error_code != 0:
        raise ToolError(f"listing share groups: {_error(answer.error_code)}")
    rows = sorted(({"group": g.group_id, "state": g.group_state, "type": g.group_type}
                   for g in answer.groups), key=lambda row: row["group"])
    if as_json:
        click.echo(json.dumps(rows))
        return
    table = Table("group", "state", "type", title=f"{len(rows)} share groups")
    for row in rows:
        table.add_row(row["group"], row["state"], row["type"])
    console.print(table)


@click.command("describe-share")
@click.argument("group")
@bootstrap_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def describe_share(group: str, bootstrap: str, as_json: bool) -> None:
    """A share group: members and assignments, share-partition start offset and lag."""
    connection = _coordinator(bootstrap, group)
    try:
        described = connection.call(ApiKey.SHARE_GROUP_DESCRIBE, 1, group_ids=(group,),
                                    include_authorized_operations=False).groups[0]
        module = _request_module(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1)
        offsets = connection.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, groups=(
            module.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None),
        )).groups[0]
    finally:
        connection.close()
    if described.error_code != 0 and offsets.error_code != 0:
        raise ToolError(f"describing {group!r}: {_error(described.error_code)}")
    members = [
        {
            "member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
            "member_epoch": m.member_epoch,
            "partitions": sorted(f"{t.topic_name}-{p}" for t in m.assignment.topic_partitions
                                 for p in t.partitions),
        }
        for m in (described.members if described.error_code == 0 else ())
    ]
    partitions = [
        {"topic": t.topic_name, "partition": p.partition_index,
         "start_offset": p.start_offset, "lag": p.lag}
        for t in offsets.topics for p in t.partitions
    ]
    summary = {
        "group": group,
        "state": described.group_state if described.error_code == 0 else "Empty",
        "group_epoch": described.group_epoch if described.error_code == 0 else -1,
        "assignor": described.assignor_name if described.error_code == 0 else "",
    }
    if as_json:
        click.echo(json.dumps({**summary, "members": members, "partitions": partitions}))
        return
    console.print(f"[bold]{group}[/bold]  share group  state {summary['state']}  epoch "
                  f"{summary['group_epoch']}  assignor {summary['assignor'] or '-'}")
    table = Table("member", "client", "host", "epoch", "partitions",
                  title=f"{len(members)} members")
    for row in members:
        table.add_row(row["member_id"], row["client_id"], row["host"],
                      str(row["member_epoch"]), ", ".join(row["partitions"]))
    console.print(table)
    starts = Table("topic", "partition", "start offset", "lag")
    for row in partitions:
        starts.add_row(row["topic"], str(row["partition"]), str(row["start_offset"]),
                       str(row["lag"]))
    console.print(starts)


@click.command("reset-share-offsets")
@click.argument("group")
@click.option("--topic", required=True, help="Topic whose share-partition start offsets move.")
@click.option("--to-earliest", is_flag=True, help="The log start offset.")
@click.option("--to-latest", is_flag=True, help="The log end offset.")
@click.option("--to-offset", type=int, help="This offset (clamped to the log).")
@bootstrap_option
def reset_share_offsets(
    group: str, topic: str, to_earliest: bool, to_latest: bool, to_offset: int | None,
    bootstrap: str,
) -> None:
    """Move an empty share group's start offsets (AlterShareGroupOffsets)."""
    if [to_earliest, to_latest, to_offset is not None].count(True) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-offset")
    partitions = topic_partitions(bootstrap, topic)
    consumer = Consumer(base_config(bootstrap, **{"group.id": "tidelog-cli-share-reset"}))
    try:
        marks = {p: consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                   timeout=METADATA_TIMEOUT_S)
                 for p in partitions}
    finally:
        consumer.close()
    targets = {
        p: low if to_earliest else high if to_latest else min(max(int(to_offset or 0), low), high)
        for p, (low, high) in marks.items()
    }
    module = _request_module(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0)
    connection = _coordinator(bootstrap, group)
    try:
        answer = connection.call(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, group_id=group, topics=(
            module.AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=tuple(
                module.AlterShareGroupOffsetsRequestPartition(partition_index=p,
                                                              start_offset=offset)
                for p, offset in sorted(targets.items()))),))
    finally:
        connection.close()
    if answer.error_code != 0:
        raise ToolError(f"resetting {group!r}: {_error(answer.error_code)}")
    for entry in answer.responses[0].partitions:
        if entry.error_code != 0:
            raise ToolError(f"{topic}-{entry.partition_index}: {_error(entry.error_code)}")
        console.print(f"{topic}-{entry.partition_index}: start offset "
                      f"{targets[entry.partition_index]}")
