"""Raw Kafka requests a client library does not expose: leader epochs in Metadata, Fetch and
ListOffsets (KIP-320), and acks=1 / acks=all produce of one batch to one chosen broker."""

from __future__ import annotations

import datetime
import io
import socket
import struct
import sys
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from tidelog.records.builder import NewRecord, build_batch

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3


def _module(api_key: int, version: int) -> Any:
    return sys.modules[load_request_schema(api_key, version).__module__]


def send(address: str, api_key: int, version: int, body: Any,
         timeout_s: float = 15.0) -> socket.socket:
    """Send one request on a fresh connection; `receive` reads its answer later (a request
    can wait in a stopped broker's socket buffer)."""
    request_cls = load_request_schema(api_key, version)
    header = request_cls.__header_schema__(
        request_api_key=api_key, request_api_version=version, correlation_id=1,
        client_id="replication-test",
    )
    buffer = io.BytesIO()
    entity_writer(type(header))(buffer, header)
    entity_writer(request_cls)(buffer, body)
    payload = buffer.getvalue()
    host, _, port = address.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=timeout_s)
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    return sock


def receive(sock: socket.socket, api_key: int, version: int) -> Any:
    """The answer to `send` (all versions used here are flexible); closes the socket."""
    with sock:
        frame = _read(sock, struct.unpack(">i", _read(sock, 4))[0])
    body, _ = entity_reader(load_response_schema(api_key, version))(frame, 5)
    return body


def call(address: str, api_key: int, version: int, body: Any, timeout_s: float = 15.0) -> Any:
    return receive(send(address, api_key, version, body, timeout_s), api_key, version)


def _read(sock: socket.socket, count: int) -> bytes:
    chunks = []
    while count:
        chunk = sock.recv(count)
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def metadata_leader_epoch(address: str, topic: str) -> tuple[int, int]:
    """(leader, leader_epoch) of partition 0 from Metadata v12."""
    module = _module(METADATA, 12)
    body = module.MetadataRequest(
        topics=(module.MetadataRequestTopic(name=topic, topic_id=None),),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False,
    )
    partition = call(address, METADATA, 12, body).topics[0].partitions[0]
    return int(partition.leader_id), int(partition.leader_epoch)


def fetch_error(address: str, topic: str, current_leader_epoch: int) -> int:
    """Error code of a consumer Fetch v12 of partition 0 naming `current_leader_epoch`."""
    module = _module(FETCH, 12)
    partition = module.FetchPartition(
        partition=0, current_leader_epoch=current_leader_epoch, fetch_offset=0,
        last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20,
    )
    body = module.FetchRequest(
        replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=(module.FetchTopic(topic=topic, partitions=(partition,)),),
        forgotten_topics_data=(), rack_id="",
    )
    return int(call(address, FETCH, 12, body).responses[0].partitions[0].error_code)


def list_offsets(address: str, topic: str, current_leader_epoch: int) -> tuple[int, int, int]:
    """(error_code, latest offset, leader_epoch) from ListOffsets v7 for partition 0."""
    module = _module(LIST_OFFSETS, 7)
    body = module.ListOffsetsRequest(
        replica_id=-1, isolation_level=0,
        topics=(module.ListOffsetsTopic(name=topic, partitions=(module.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=current_leader_epoch, timestamp=-1),)),),
    )
    answer = call(address, LIST_OFFSETS, 7, body).topics[0].partitions[0]
    return int(answer.error_code), int(answer.offset), int(answer.leader_epoch)


def produce_request(topic: str, values: list[bytes], acks: int, timeout_s: float) -> Any:
    """One non-idempotent batch of `values` for partition 0 (Produce v9)."""
    module = _module(PRODUCE, 9)
    records = bytes(build_batch([NewRecord(value=value) for value in values]))
    return module.ProduceRequest(
        transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=timeout_s),
        topic_data=(module.TopicProduceData(name=topic, partition_data=(
            module.PartitionProduceData(index=0, records=records),)),),
    )


def produce_answer(response: Any) -> tuple[int, int]:
    partition = response.responses[0].partition_responses[0]
    return int(partition.error_code), int(partition.base_offset)


def produce(address: str, topic: str, values: list[bytes], acks: int,
            timeout_s: float = 15.0) -> tuple[int, int]:
    """(error_code, base_offset) of one batch produced with `acks` (1 or -1)."""
    body = produce_request(topic, values, acks, timeout_s)
    return produce_answer(call(address, PRODUCE, 9, body, timeout_s + 5))
