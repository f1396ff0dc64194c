"""ListOffsets (key 2, v1-11): earliest (-2), latest (-1: the high watermark, or for
isolation_level READ_COMMITTED the last stable offset), max timestamp (-3), or by timestamp;
the tiered-storage specs answered as Kafka answers them without remote storage: earliest
local (-4, v8+) is the log start offset, latest tiered (-5, v9+) and earliest pending upload
(-6, v11+) are offset -1 (UnifiedLog.fetchOffsetByTimestamp); an older version naming one gets
UNSUPPORTED_VERSION, as does any other negative timestamp. v10's timeout_ms is not needed
(every answer is local);
and OffsetForLeaderEpoch (key 23, v2-4): where a leader epoch ends (KIP-101/320), from the
partition's leader-epoch cache (replication's, or a lone broker's epoch 0).

By timestamp: the first offset whose timestamp is >= the one asked; none -> offset -1 and
timestamp -1, as Kafka answers. Storage finds the batch (time index, then a header scan); this
handler decodes that one batch to answer with the exact record, as Kafka does.
"""

from __future__ import annotations

import sys
from array import array
from collections import Counter
from dataclasses import dataclass
from functools import partial
from typing import Any

from tidelog.broker.handlers.authorization import Op, Type, allowed_names, cluster_allowed
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.services import PartitionReplication
from tidelog.broker.topic_registry import TopicRegistry
from tidelog.errors import CorruptRecordError, ErrorCode, KafkaError
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.records.batch import (
    ATTR_CODEC_MASK,
    Codec,
    RecordBatch,
    TimestampType,
    iter_batches,
)
from tidelog.records.codecs import DEFAULT_MAX_UNCOMPRESSED_BYTES, decompress
from tidelog.records.columnar import RecordColumns
from tidelog.records.record import iter_records
from tidelog.security.authorizer import Authorizer
from tidelog.storage.log import PartitionLog
from tidelog.types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, TopicPartition

EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP = -4, -5, -6
# The first ListOffsets version that may name each tiered-storage spec.
_TIERED_TIMESTAMPS = {
    EARLIEST_LOCAL_TIMESTAMP: 8,
    LATEST_TIERED_TIMESTAMP: 9,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11,
}


@dataclass(frozen=True, slots=True)
class ListOffsetsDeps:
    topics: TopicRegistry
    replication: PartitionReplication
    authorizer: Authorizer | None = None  # None: no ACL checks (authorizer.class.name unset)


def _refused(deps: ListOffsetsDeps, context: RequestContext, names: set[str]) -> set[str]:
    """Topics the caller may not DESCRIBE (answered TOPIC_AUTHORIZATION_FAILED before their
    existence is looked at, as KafkaApis does)."""
    if deps.authorizer is None:
        return set()
    return names - allowed_names(deps.authorizer, context, Op.DESCRIBE, Type.TOPIC, names)


def _lookup(
    deps: ListOffsetsDeps,
    topic: str,
    partition: int,
    timestamp: int,
    current_leader_epoch: int = -1,
    read_committed: bool = False,
    version: int = 7,
) -> tuple[int, int]:
    """(offset, timestamp) for one partition; raises KafkaError."""
    partition_log = deps.topics.partition_log(topic, partition)
    # Only the leader answers (KIP-320 epoch checked); latest is the high watermark, which on
    # a single node is the log end offset.
    high_watermark = deps.replication.high_watermark(
        TopicPartition(topic, partition), current_leader_epoch
    )
    if timestamp == LATEST_TIMESTAMP:
        # isolation_level 1 (READ_COMMITTED): the last stable offset, as Kafka answers.
        if read_committed:
            return partition_log.last_stable_offset(high_watermark), -1
        return high_watermark, -1
    if timestamp == EARLIEST_TIMESTAMP:
        return partition_log.log_start_offset, -1
    if timestamp == MAX_TIMESTAMP:
        found = partition_log.max_timestamp_offset()
    elif timestamp in _TIERED_TIMESTAMPS:
        if version < _TIERED_TIMESTAMPS[timestamp]:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_VERSION, f"timestamp {timestamp} needs a later ListOffsets"
            )
        # No remote storage: the local log is the whole log, nothing is tiered or pending.
        if timestamp == EARLIEST_LOCAL_TIMESTAMP:
            return partition_log.log_start_offset, -1
        return -1, -1
    elif timestamp < 0:
        # Kafka 4.3.1 answers a special timestamp it does not know as one of a later version.
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"unknown special timestamp {timestamp}")
    else:
        found = partition_log.offset_for_timestamp(timestamp)
    if found is None:
        return -1, -1
    return _exact_record(partition_log, found, timestamp)


def _exact_record(
    partition_log: PartitionLog, found: tuple[int, int], timestamp: int
) -> tuple[int, int]:
    """Narrow a batch-level answer to the record Kafka would name: the first record with a
    timestamp >= `timestamp`, or for MAX_TIMESTAMP the first record holding the maximum."""
    batch_offset, batch_timestamp = found
    result = partition_log.read(batch_offset, 1, min_one_batch=True)
    data = b"".join(piece.read_bytes() for piece in result.slices)
    for batch in iter_batches(data):
        if batch.next_offset <= batch_offset:
            continue
        try:
            columnar = _exact_in_columns(batch, partition_log.log_start_offset, timestamp)
        except (CorruptRecordError, OverflowError, ValueError):
            columnar = None  # told below, record by record, as before
        if columnar is not None:
            return columnar
        best: tuple[int, int] | None = None
        for record in iter_records(batch):
            if record.offset < partition_log.log_start_offset:
                continue
            if timestamp == MAX_TIMESTAMP:
                if best is None or record.timestamp > best[1]:
                    best = (record.offset, record.timestamp)
            elif record.timestamp >= timestamp:
                return record.offset, record.timestamp
        if best is not None:
            return best
    return batch_offset, batch_timestamp


def _exact_in_columns(
    batch: RecordBatch, log_start_offset: int, timestamp: int
) -> tuple[int, int] | None:
    """`_exact_record`'s answer for one batch from the C record decoder's offset and timestamp
    columns: no Python object per record (a 10,000-record batch took the record loop 30 to
    200 ms, the console's browse by timestamp waits on it). None when no record qualifies."""
    codec = Codec(batch.attributes & ATTR_CODEC_MASK)
    records = decompress(codec, batch.records_bytes, DEFAULT_MAX_UNCOMPRESSED_BYTES)
    log_append = batch.max_timestamp if batch.timestamp_type == TimestampType.LOG_APPEND_TIME \
        else -1
    builder = RecordColumns(include_headers=False)
    builder.append(records, batch.records_count, batch.base_offset, batch.base_timestamp,
                   log_append, log_start_offset, batch.next_offset)
    columns = builder.finish()
    offsets, micros = array("q", columns.offsets), array("q", columns.timestamps_us)
    if sys.byteorder == "big":
        offsets.byteswap()
        micros.byteswap()
    if not offsets:
        return None
    if timestamp == MAX_TIMESTAMP:
        index = micros.index(max(micros))
    else:
        wanted = timestamp * 1000
        index = next((i for i, t in enumerate(micros) if t >= wanted), -1)
        if index < 0:
            return None
    return offsets[index], micros[index] // 1000


async def handle_list_offsets(deps: ListOffsetsDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.LIST_OFFSETS, version)
    topics = []
    named = Counter(
        (topic.name, partition.partition_index)
        for topic in request.topics
        for partition in topic.partitions
    )
    answered: set[tuple[str, int]] = set()
    refused = _refused(deps, context, {topic.name for topic in request.topics})
    for topic in request.topics:
        partitions = []
        for partition in topic.partitions:
            key = (topic.name, partition.partition_index)
            if key in answered:
                continue
            answered.add(key)
            leader_epoch = -1  # Kafka's answer without an offset (none found, or an error)
            try:
                if named[key] > 1:
                    # Kafka's handler: a partition named twice is answered once, refused.
                    raise KafkaError(ErrorCode.INVALID_REQUEST, "partition named twice")
                if refused and topic.name in refused:
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                offset, timestamp = _lookup(
                    deps, topic.name, partition.partition_index, partition.timestamp,
                    int(getattr(partition, "current_leader_epoch", -1)),
                    int(getattr(request, "isolation_level", 0)) == 1,
                    version,
                )
                code = ErrorCode.NONE
                if offset >= 0:
                    leader_epoch = deps.replication.leader_epoch(
                        TopicPartition(topic.name, partition.partition_index)
                    )
            except KafkaError as error:
                offset, timestamp, code = -1, -1, error.code
            partitions.append(
                responses.build(
                    module.ListOffsetsPartitionResponse,
                    partition_index=partition.partition_index,
                    error_code=code,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=leader_epoch,
                )
            )
        topics.append(
            responses.build(
                module.ListOffsetsTopicResponse, name=topic.name, partitions=tuple(partitions)
            )
        )
    return responses.build(
        responses.response_class(ApiKey.LIST_OFFSETS, version),
        throttle_time=0,
        topics=tuple(topics),
    )


async def handle_offset_for_leader_epoch(
    deps: ListOffsetsDeps, context: RequestContext, request: Any
) -> Any:
    """Kafka's Partition.lastOffsetForLeaderEpoch: the topic and partition must exist, the
    current_leader_epoch is checked (KIP-320), then the epoch cache answers; errors carry
    epoch -1 and end offset -1."""
    version = context.header.api_version
    module = responses.response_module(ApiKey.OFFSET_FOR_LEADER_EPOCH, version)
    topics = []
    # A follower's truncation check (replica_id >= 0) is inter-broker: CLUSTER_ACTION on
    # the cluster allows every topic; else DESCRIBE per topic (KIP-320 consumers; KafkaApis
    # tries CLUSTER_ACTION first for any caller).
    names = {topic.topic for topic in request.topics}
    refused = set() if deps.authorizer is not None and cluster_allowed(
        deps.authorizer, context, Op.CLUSTER_ACTION
    ) else _refused(deps, context, names)
    for topic in request.topics:
        partitions = []
        for partition in topic.partitions:
            tp = TopicPartition(topic.topic, partition.partition)
            epoch, end_offset, code = -1, -1, ErrorCode.NONE
            try:
                if refused and topic.topic in refused:
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                epoch, end_offset = deps.replication.end_offset_for_epoch(
                    tp, partition.leader_epoch,
                    int(getattr(partition, "current_leader_epoch", -1)),
                )
            except KafkaError as error:
                code = error.code
            partitions.append(responses.build(
                module.EpochEndOffset, error_code=code, partition=tp.partition,
                leader_epoch=epoch, end_offset=end_offset))
        topics.append(responses.build(
            module.OffsetForLeaderTopicResult, topic=topic.topic, partitions=tuple(partitions)))
    return responses.build(
        responses.response_class(ApiKey.OFFSET_FOR_LEADER_EPOCH, version), throttle_time=0,
        topics=tuple(topics))


def handlers(deps: ListOffsetsDeps) -> HandlerTable:
    return {
        ApiKey.LIST_OFFSETS: partial(handle_list_offsets, deps),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: partial(handle_offset_for_leader_epoch, deps),
    }
