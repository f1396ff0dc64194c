"""Fetch (key 1, v4-v16): whole batches from the log, long-polled, sent by sendfile.

Long poll: when fewer than min_bytes are available and max_wait_ms has not passed, the fetch
parks on `broker.append_waiters` and is woken by the next append to one of its partitions
(no polling). max_bytes bounds the response and partition_max_bytes each partition, but the
first batch found is always sent even when larger (so a big batch never blocks a consumer).
On a single node the high watermark is the log end offset. Fetch sessions (v7+) are answered
sessionless (session_id 0): every request is a full fetch, which every client accepts.
"""

from __future__ import annotations

import io
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelog.broker import clock
from tidelog.broker.wire import (
    FetchPartitionData,
    FetchTopicData,
    Outgoing,
    SendSlice,
    encode_fetch_response,
)
from tidelog.errors import ErrorCode, KafkaError
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from tidelog.broker.router import RequestContext
    from tidelog.broker.state import Broker

FETCH = 1
_ZERO_ID = uuid.UUID(int=0)
log = logging.getLogger("tidelog.broker.fetch")


@dataclass(frozen=True, slots=True)
class _Wanted:
    name: str
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1  # v9+; checked only in cluster mode (KIP-320)


def _wanted(broker: Broker, request: Any, version: int) -> list[_Wanted]:
    # Keyed as Kafka's LinkedHashMap: a partition named twice is read and answered once (the
    # last entry wins, in the first one's place), so duplicates cannot multiply the work.
    wanted: dict[tuple[str, uuid.UUID, int], _Wanted] = {}
    for topic in request.topics:
        if version >= 13:
            topic_id = topic.topic_id or _ZERO_ID
            info = broker.topics.by_id(topic_id)
            name = info.name if info else ""
        else:
            name = topic.topic
            info = broker.topics.get(name)
            topic_id = info.topic_id if info else _ZERO_ID
        for partition in topic.partitions:
            wanted[(name, topic_id, partition.partition)] = _Wanted(
                name,
                topic_id,
                partition.partition,
                partition.fetch_offset,
                partition.partition_max_bytes,
                int(getattr(partition, "current_leader_epoch", -1)),
            )
    return list(wanted.values())


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000)


def _read_all(
    broker: Broker, wanted: list[_Wanted], max_bytes: int, version: int, replica_id: int = -1
) -> tuple[list[FetchTopicData], int, bool]:
    """One pass over the partitions: (topics, bytes found, whether any partition has an error)."""
    by_topic: dict[tuple[str, uuid.UUID], list[FetchPartitionData]] = {}
    total = 0
    errors = False
    for item in wanted:
        entries = by_topic.setdefault((item.name, item.topic_id), [])
        try:
            if not item.name:
                unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 else unknown)
            partition_log = broker.partition_log(item.name, item.partition)
            high_watermark = max_offset = partition_log.log_end_offset
            if broker.replication is not None:  # cluster: leaders only, consumers below the HW
                high_watermark, max_offset = broker.replication.fetch_bounds(
                    TopicPartition(item.name, item.partition), replica_id, item.fetch_offset,
                    item.current_leader_epoch,
                )
            limit = max(0, min(item.partition_max_bytes, max_bytes - total))
            result = partition_log.read(
                item.fetch_offset,
                limit,
                max_offset=max_offset,
                min_one_batch=total == 0,
            )
        except KafkaError as error:
            errors = True  # answered at once, so each error is counted once
            if broker.metrics is not None:
                broker.metrics.record_error(FETCH, error.code.name)
            log_start = -1
            if error.code == ErrorCode.OFFSET_OUT_OF_RANGE:
                log_start = broker.partition_log(item.name, item.partition).log_start_offset
            entries.append(FetchPartitionData(item.partition, error.code, -1, -1, log_start))
            continue
        slices = [
            SendSlice(_private_file(piece.fd), piece.position, piece.length)
            for piece in result.slices
            if piece.length
        ]
        total += result.size
        entries.append(
            FetchPartitionData(
                item.partition,
                ErrorCode.NONE,
                high_watermark,
                high_watermark,
                result.log_start_offset,
                slices,
            )
        )
    topics = [
        FetchTopicData(name, topic_id, partitions)
        for (name, topic_id), partitions in by_topic.items()
    ]
    return topics, total, errors


def _private_file(fd: int) -> io.FileIO:
    # A new open file description of the same segment: its own offset and lifetime.
    return io.FileIO(f"/proc/self/fd/{fd}", "rb")


def _close(topics: list[FetchTopicData]) -> None:
    for topic in topics:
        for partition in topic.partitions:
            for piece in partition.records:
                piece.file.close()


async def handle_fetch(broker: Broker, context: RequestContext, request: Any) -> Outgoing:
    version = context.header.api_version
    wanted = _wanted(broker, request, version)
    max_bytes = max(0, int(request.max_bytes))
    min_bytes = int(request.min_bytes)
    deadline_ms = clock.monotonic_ms() + max(0, _ms(request.max_wait))
    partitions = [TopicPartition(item.name, item.partition) for item in wanted if item.name]
    replica_id = int(getattr(request, "replica_id", -1))  # a follower's fetch (v4-v14)
    while True:
        topics, total, errors = _read_all(broker, wanted, max_bytes, version, replica_id)
        remaining_ms = deadline_ms - clock.monotonic_ms()
        if total >= min_bytes or errors or remaining_ms <= 0 or broker.closing:
            break
        _close(topics)  # not enough yet: park, then read again from the same offsets
        await broker.append_waiters.wait(partitions, remaining_ms)
    if broker.metrics is not None:
        broker.metrics.record_fetch_response(wanted, topics)
    return encode_fetch_response(context.header, topics)


HANDLERS = {FETCH: handle_fetch}
