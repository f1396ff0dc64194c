"""`tidelog transactions list|describe|abort`: Kafka's `kafka-transactions.sh`.

confluent-kafka has no admin call for these APIs, so the tool sends ListTransactions (v1),
DescribeTransactions (v0), DescribeProducers (v0) and WriteTxnMarkers (v1) itself: kio-encoded
requests on one socket to the first bootstrap broker (on a single node, the transaction
coordinator of every id and the leader of every partition). Blocking, one request at a time,
every answer read with a timeout.
"""

from __future__ import annotations

import io
import json
import socket
import struct
import sys
from datetime import UTC, datetime
from typing import Any

import click
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from rich.console import Console
from rich.table import Table

from tidelog.cli.client import ToolError, bootstrap_option, check_reachable

console = Console(highlight=False)
LIST_TRANSACTIONS, DESCRIBE_TRANSACTIONS = 66, 65
DESCRIBE_PRODUCERS, WRITE_TXN_MARKERS = 61, 27
_MAX_FRAME_BYTES = 64 * 1024 * 1024


def _exchange(bootstrap: str, api_key: int, version: int, body: Any, timeout_s: float) -> bytes:
    """Send one request; the response frame after its header (response header v0)."""
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    request_cls: Any = load_request_schema(api_key, version)
    header = request_cls.__header_schema__(
        request_api_key=api_key, request_api_version=version, correlation_id=1,
        client_id="tidelog-transactions",
    )
    buffer = io.BytesIO()
    entity_writer(type(header))(buffer, header)
    entity_writer(request_cls)(buffer, body)
    payload = buffer.getvalue()
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as sock:
            sock.sendall(struct.pack(">i", len(payload)) + payload)
            size = struct.unpack(">i", _read(sock, 4))[0]
            if not 0 < size <= _MAX_FRAME_BYTES:
                raise ToolError(f"broker answered a frame of {size} bytes")
            frame = _read(sock, size)
    except OSError as error:
        raise ToolError(f"{bootstrap}: {error}") from None
    return frame[4:]  # after the correlation id (response header v1 adds tagged fields)


def _call(bootstrap: str, api_key: int, version: int, body: Any, timeout_s: float) -> Any:
    frame = _exchange(bootstrap, api_key, version, body, timeout_s)
    response_cls: Any = load_response_schema(api_key, version)
    try:
        offset = 1 if response_cls.__flexible__ else 0  # an empty header tag section
        answer, _ = entity_reader(response_cls)(frame, offset)
        return answer
    except SerialError as error:
        raise ToolError(f"cannot decode the broker's answer: {error}") from None


class _Cursor:
    """Reads a DescribeTransactions v0 answer (flexible: compact lengths, tagged fields) by
    hand: kio refuses its start time -1 (an id with no transaction started). Every length is
    checked against the bytes left."""

    def __init__(self, data: bytes) -> None:
        self.data, self.position = data, 0

    def take(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        if self.position + size > len(self.data):
            raise ToolError("truncated DescribeTransactions answer")
        value = struct.unpack_from(fmt, self.data, self.position)[0]
        self.position += size
        return value

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            byte = int(self.take(">B"))
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise ToolError("bad varint in DescribeTransactions answer")

    def count(self) -> int:
        count = self.uvarint() - 1
        if count < 0 or count > len(self.data) - self.position:
            raise ToolError("bad length in DescribeTransactions answer")
        return count

    def string(self) -> str:
        size = self.count()
        text = self.data[self.position : self.position + size].decode("utf-8", "replace")
        self.position += size
        return text

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.position += self.uvarint()


def _read(sock: socket.socket, count: int) -> bytes:
    chunks = []
    while count:
        chunk = sock.recv(count)
        if not chunk:
            raise ToolError("the broker closed the connection")
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def _module(api_key: int, version: int) -> Any:
    return sys.modules[load_request_schema(api_key, version).__module__]


@click.group("transactions")
def transactions() -> None:
    """Transactions on the coordinator: list and describe (kafka-transactions.sh)."""


@transactions.command("list")
@bootstrap_option
@click.option("--state", "states", multiple=True,
              help="Only these states (Ongoing, PrepareCommit, CompleteAbort, ...); repeat.")
@click.option("--producer-id", "producer_ids", type=int, multiple=True,
              help="Only these producer ids; repeat.")
@click.option("--duration-ms", type=int, default=-1, show_default=True,
              help="Only transactions running at least this long (-1: all).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--timeout", type=float, default=10.0, show_default=True)
def list_command(
    bootstrap: str, states: tuple[str, ...], producer_ids: tuple[int, ...], duration_ms: int,
    as_json: bool, timeout: float,
) -> None:
    """Every transactional id the coordinator knows, with its producer id and state."""
    check_reachable(bootstrap)
    module = _module(LIST_TRANSACTIONS, 1)
    answer = _call(bootstrap, LIST_TRANSACTIONS, 1, module.ListTransactionsRequest(
        state_filters=states, producer_id_filters=producer_ids, duration_filter=duration_ms,
    ), timeout)
    if answer.error_code.value != 0:
        raise ToolError(f"ListTransactions: {answer.error_code.name}")
    rows = [
        {"transactional_id": t.transactional_id, "producer_id": int(t.producer_id),
         "state": t.transaction_state}
        for t in answer.transaction_states
    ]
    if as_json:
        click.echo(json.dumps(rows))
        return
    table = Table("transactional id", "producer id", "state")
    for row in rows:
        table.add_row(row["transactional_id"], str(row["producer_id"]), row["state"])
    console.print(table)
    if answer.unknown_state_filters:
        console.print(f"unknown states: {', '.join(answer.unknown_state_filters)}")


@transactions.command("describe")
@bootstrap_option
@click.argument("transactional_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--timeout", type=float, default=10.0, show_default=True)
def describe_command(bootstrap: str, transactional_id: str, as_json: bool, timeout: float) -> None:
    """State, producer id and epoch, timeout, start time and partitions of one transaction."""
    check_reachable(bootstrap)
    module = _module(DESCRIBE_TRANSACTIONS, 0)
    request = module.DescribeTransactionsRequest(transactional_ids=(transactional_id,))
    cursor = _Cursor(_exchange(bootstrap, DESCRIBE_TRANSACTIONS, 0, request, timeout))
    cursor.skip_tagged_fields()  # response header v1
    cursor.take(">i")  # throttle_time_ms
    if cursor.count() != 1:
        raise ToolError("DescribeTransactions answered for another number of ids")
    error_code = cursor.take(">h")
    txn_id, state_name = cursor.string(), cursor.string()
    timeout_ms, start_ms = cursor.take(">i"), cursor.take(">q")
    producer_id, producer_epoch = cursor.take(">q"), cursor.take(">h")
    partitions: list[str] = []
    for _ in range(cursor.count()):
        topic = cursor.string()
        partitions.extend(f"{topic}-{cursor.take('>i')}" for _ in range(cursor.count()))
        cursor.skip_tagged_fields()
    if error_code != 0:
        name = "TRANSACTIONAL_ID_NOT_FOUND" if error_code == 105 else f"error {error_code}"
        raise ToolError(f"{transactional_id}: {name}")
    described = {
        "transactional_id": txn_id,
        "state": state_name,
        "producer_id": producer_id,
        "producer_epoch": producer_epoch,
        "timeout_ms": timeout_ms,
        "start_time": (datetime.fromtimestamp(start_ms / 1000, UTC).isoformat()
                       if start_ms >= 0 else None),
        "partitions": sorted(partitions),
    }
    if as_json:
        click.echo(json.dumps(described))
        return
    table = Table("field", "value")
    for key, value in described.items():
        shown = ", ".join(value) if isinstance(value, list) else str(value)
        table.add_row(key, "-" if value is None else shown)
    console.print(table)


@transactions.command("abort")
@bootstrap_option
@click.option("--topic", required=True, help="Partition holding the hanging transaction.")
@click.option("--partition", type=int, required=True)
@click.option("--start-offset", type=int, required=True,
              help="First offset of the hanging transaction (DescribeProducers shows it).")
@click.option("--timeout", type=float, default=10.0, show_default=True)
def abort_command(
    bootstrap: str, topic: str, partition: int, start_offset: int, timeout: float
) -> None:
    """Abort a hanging transaction on one partition: the producer whose open transaction
    starts at --start-offset gets an ABORT marker there (Kafka's `abort --start-offset`)."""
    check_reachable(bootstrap)
    module = _module(DESCRIBE_PRODUCERS, 0)
    described = _call(bootstrap, DESCRIBE_PRODUCERS, 0, module.DescribeProducersRequest(
        topics=(module.TopicRequest(name=topic, partition_indexes=(partition,)),),
    ), timeout)
    result = described.topics[0].partitions[0]
    if result.error_code.value != 0:
        raise ToolError(f"{topic}-{partition}: {result.error_code.name}")
    matches = [p for p in result.active_producers
               if int(p.current_txn_start_offset) == start_offset]
    if not matches:
        raise ToolError(f"no open transaction starts at offset {start_offset} of "
                        f"{topic}-{partition}")
    producer = matches[0]
    markers = _module(WRITE_TXN_MARKERS, 1)
    answer = _call(bootstrap, WRITE_TXN_MARKERS, 1, markers.WriteTxnMarkersRequest(markers=(
        markers.WritableTxnMarker(
            producer_id=producer.producer_id, producer_epoch=int(producer.producer_epoch),
            transaction_result=False, coordinator_epoch=producer.coordinator_epoch,
            topics=(markers.WritableTxnMarkerTopic(name=topic, partition_indexes=(partition,)),),
        ),
    )), timeout)
    error = answer.markers[0].topics[0].partitions[0].error_code
    if error.value != 0:
        raise ToolError(f"WriteTxnMarkers: {error.name}")
    click.echo(f"aborted the transaction of producer {int(producer.producer_id)} "
               f"(epoch {int(producer.producer_epoch)}) on {topic}-{partition}")
