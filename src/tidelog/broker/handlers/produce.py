"""Produce (key 0, v3-v12): validate batch headers and CRCs, append, answer with offsets.

The records are never decoded (D2), except in a topic whose `compression.type` names a codec:
its batches are recompressed before the append (records/recompress.py), as Kafka does.
Otherwise `split_batches` views the batch headers inside the receive buffer,
`PartitionLog.append` validates them and rewrites baseOffset in place (the frame is a
bytearray, so the views are writable). Each partition is all or nothing; partitions fail
independently with Kafka's codes. acks=0 gets no response; acks=1 and acks=-1 (all: on a single
node the in-sync set is this node) answer after the append, or after fsync when the partition's
durability is `sync` (group commit on the LogManager's fsync thread).

Checks in Kafka's order: the request (acks; transactional batches need a transactional id,
KafkaApis.handleProduceRequest), per partition the topic, the record set's shape
(ProduceRequest.validateRecords: one whole magic-2 batch), no client writes to an internal
topic (ReplicaManager.appendToLocalLog), then the log's own checks with AppendOrigin.CLIENT
(storage/log_validator.py). Errors raised once the partition's log is found carry its log
start offset, as Kafka's do.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any

from tidelog.broker import clock
from tidelog.broker.delayed import AppendWaiters
from tidelog.broker.handlers.authorization import Op, Type, allowed, allowed_names
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.handlers.quota_throttle import produce_throttle_ms
from tidelog.broker.internal_topics import INTERNAL_TOPICS
from tidelog.broker.quotas.manager import QuotaManager
from tidelog.broker.services import Metrics, PartitionReplication
from tidelog.broker.timers.service import Diverted
from tidelog.broker.topic_registry import TopicRegistry
from tidelog.errors import CorruptRecordError, ErrorCode, InvalidRecordError, KafkaError
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.wire import ProduceRequestData
from tidelog.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_POSITION,
    MAGIC_V2,
    RecordBatch,
    iter_batches,
    peek_batch_size,
    split_batches,
)
from tidelog.records.recompress import TOPIC_CODECS, recompress
from tidelog.security.authorizer import Authorizer
from tidelog.storage.log import PartitionLog
from tidelog.storage.log_validator import AppendOrigin
from tidelog.storage.results import AppendResult
from tidelog.storage.timer_records import TIMER_TOPIC, is_timer_producer
from tidelog.types import TopicPartition

log = logging.getLogger("tidelog.broker.produce")


DivertHook = Callable[[PartitionLog, TopicPartition, list[RecordBatch], int], Diverted]


@dataclass(frozen=True, slots=True)
class ProduceDeps:
    topics: TopicRegistry
    replication: PartitionReplication
    append_waiters: AppendWaiters  # woken per append: parked fetches read again
    metrics: Metrics
    # acks=all answers after the high watermark passes the batch (cluster); on a single node
    # after the local append (and fsync in sync mode).
    acks_all_waits_for_replicas: bool
    authorizer: Authorizer | None = None  # None: no ACL checks (authorizer.class.name unset)
    # Transactional writes: may (transactional id, producer id, epoch) write this partition
    # (KIP-890 part 1)? None: no transaction coordinator, transactional produce is refused.
    verify_transaction: Callable[[str, int, int, tuple[str, int]], ErrorCode] | None = None
    # Produce v12+ (transaction version 2, KIP-890 part 2): add the partition to the
    # producer's transaction at the coordinator (the client sent no AddPartitionsToTxn).
    add_to_transaction: Callable[[str, int, int, tuple[str, int]], Awaitable[ErrorCode]] | None = (
        None
    )
    # Delayed delivery (docs/delivery.md): splits the batches of a topic with
    # tidelog.delivery.delay.enable=true. None: such topics refuse produce.
    divert: DivertHook | None = None
    quotas: QuotaManager | None = None  # client quotas (producer_byte_rate); None: none
    # Cluster mode: may this request write as another broker (delayed delivery's timer
    # batches to `__tidelog_timer`, its deliveries with the reserved producer ids)? The
    # inter-broker listener, and CLUSTER_ACTION with an authorizer (server.py).
    inter_broker: Callable[[RequestContext], bool] | None = None


def _append_time(log_append_time_ms: int) -> datetime.datetime | None:
    if log_append_time_ms < 0:
        return None
    return datetime.datetime.fromtimestamp(log_append_time_ms / 1000, tz=datetime.UTC)


# ReplicaManager.appendToLocalLog answers these with UNKNOWN_LOG_APPEND_INFO (log start -1);
# every other failure of the log's append carries the partition's log start offset.
_ERRORS_WITHOUT_LOG_START = frozenset({
    ErrorCode.CORRUPT_MESSAGE,
    ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
})

# Recompression bound (compression.type): as the compacted-key check, 64x the topic's
# max.message.bytes and at least 64 MiB: generous for real data, bounded for bombs.
_INFLATION_LIMIT = 64


def _recompressed(
    batches: list[RecordBatch], compression_type: str, max_message_bytes: int
) -> list[RecordBatch]:
    """The topic's codec on every batch (compression.type other than `producer`), each batch's
    CRC checked first so a corrupt batch is refused, never re-signed."""
    codec = TOPIC_CODECS.get(compression_type)
    if codec is None:
        return batches
    limit = max(64 << 20, _INFLATION_LIMIT * max_message_bytes)
    converted = []
    for batch in batches:
        if batch.codec != codec:
            batch.validate()
            batch = recompress(batch, codec, limit)
        converted.append(batch)
    return converted


_MIN_BATCH_LENGTH = 14  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0
_HEADER_SIZE_UP_TO_MAGIC = MAGIC_POSITION + 1


def _request_batches(records: bytes | bytearray | memoryview) -> list[RecordBatch]:
    """Kafka's ProduceRequest.validateRecords (v3+) over its batch iterator
    (ByteBufferLogInputStream.nextBatch): no whole batch (empty, or cut short) and a magic
    below 2 are INVALID_RECORD; a batchLength below any batch's or a magic above 2 is
    CORRUPT_MESSAGE."""
    no_batch = InvalidRecordError(
        "Produce requests with version 3 and above must have at least one record batch per "
        "partition"
    )
    if len(records) < LOG_OVERHEAD:
        raise no_batch
    size = peek_batch_size(records)
    if size - LOG_OVERHEAD < _MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"record size {size - LOG_OVERHEAD} is less than the minimum")
    if len(records) < max(size, _HEADER_SIZE_UP_TO_MAGIC):
        raise no_batch
    magic = records[MAGIC_POSITION]
    if magic > MAGIC_V2:
        raise CorruptRecordError(f"invalid magic {magic}")
    if magic < MAGIC_V2:
        raise InvalidRecordError(
            "Produce requests with version 3 and above are only allowed to contain record "
            "batches with magic version 2"
        )
    batches = split_batches(records)
    if len(batches) != 1:
        raise InvalidRecordError(
            "Produce requests with version 3 and above must carry exactly one record batch "
            "per partition"
        )
    return batches


def _has_transactional_records(request: ProduceRequestData) -> bool:
    """Kafka's ProduceRequest.hasTransactionalRecords: a header bit of any whole batch."""
    for topic in request.topics:
        for partition in topic.partitions:
            records = partition.records
            if records is None or len(records) < HEADER_SIZE:
                continue
            for batch in iter_batches(records):
                if batch.magic == MAGIC_V2 and batch.is_transactional:
                    return True
    return False


_UNKNOWN_ID = "<unknown topic id "


async def handle_produce(
    deps: ProduceDeps, context: RequestContext, request: ProduceRequestData
) -> Any | None:
    version = context.header.api_version
    module = responses.response_module(ApiKey.PRODUCE, version)
    partition_cls = module.PartitionProduceResponse
    now_ms = clock.now_ms()
    request_error: ErrorCode | None = None
    transactional = request.transactional_id is not None or _has_transactional_records(request)
    if transactional and (deps.verify_transaction is None or request.transactional_id is None):
        # Without a transaction verifier (the server always wires one) transactions are
        # refused; Kafka answers a transactional batch without a transactional id the same
        # way, before it looks at acks.
        request_error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif (
        deps.authorizer is not None
        and request.transactional_id is not None
        and _has_transactional_records(request)
        and not allowed(
            deps.authorizer, context, Op.WRITE, Type.TRANSACTIONAL_ID, request.transactional_id
        )
    ):
        # Transactional batches need WRITE on their transactional id too, decided before
        # anything else (KafkaApis.handleProduceRequest): every partition gets the refusal.
        request_error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif request.acks not in (0, 1, -1):
        request_error = ErrorCode.INVALID_REQUIRED_ACKS

    # v13+ names topics by id (KIP-516): resolved to names here, answered by id; an id no
    # topic has answers UNKNOWN_TOPIC_ID (a placeholder name no topic can have: "<").
    ids: dict[str, uuid.UUID | None] = {}
    if version >= 13:
        resolved = []
        for topic in request.topics:
            info = deps.topics.by_id(topic.topic_id) if topic.topic_id is not None else None
            name = info.name if info is not None else f"{_UNKNOWN_ID}{topic.topic_id}>"
            ids[name] = topic.topic_id
            resolved.append(dataclasses.replace(topic, name=name))
        request = dataclasses.replace(request, topics=tuple(resolved))
    # WRITE per topic, decided before existence so a missing topic does not leak (KafkaApis).
    refused: set[str] = set()
    if deps.authorizer is not None:
        names = {topic.name for topic in request.topics}
        refused = names - allowed_names(deps.authorizer, context, Op.WRITE, Type.TOPIC, names)
    durable_waits: list[tuple[PartitionLog, int, dict[str, Any]]] = []
    replication = deps.replication
    replica_waits: list[tuple[TopicPartition, int, dict[str, Any]]] = []
    timer_commits: list[tuple[Coroutine[Any, Any, KafkaError | None], dict[str, Any]]] = []
    # A partition named twice is produced once, with its last record set, as Kafka does
    # (its handler collects record sets in a map keyed by partition).
    last_seen = {
        (topic.name, partition.index): partition
        for topic in request.topics
        for partition in topic.partitions
    }
    topic_responses = []
    for topic in request.topics:
        partition_responses = []
        for partition in topic.partitions:
            if last_seen.get((topic.name, partition.index)) is not partition:
                continue
            fields: dict[str, Any] = {"index": partition.index, "base_offset": -1}
            diverted = None
            tp = TopicPartition(topic.name, partition.index)  # one per partition, shared below
            log_start_offset = -1  # known once the partition's log is found
            try:
                if request_error is not None:
                    raise KafkaError(request_error)
                if ids and topic.name.startswith(_UNKNOWN_ID):
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID)
                if refused and topic.name in refused:
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                if partition.records is None:
                    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "null record set")
                leader_epoch = replication.check_produce(tp, request.acks)
                batches = _request_batches(partition.records)
                if topic.name in INTERNAL_TOPICS and not (
                    topic.name == TIMER_TOPIC and _broker_write(deps, context)
                ):
                    # Only the coordinators write there (a forged record would be replayed
                    # into group state on the next load).
                    raise KafkaError(
                        ErrorCode.INVALID_TOPIC_EXCEPTION,
                        f"Cannot append to internal topic {topic.name}",
                    )
                partition_log = deps.topics.partition_log(topic.name, partition.index)
                log_start_offset = partition_log.log_start_offset
                if transactional and version >= 12:
                    await _add_implicitly(deps, request.transactional_id, batches, tp)
                    partition_log = deps.topics.partition_log(topic.name, partition.index)
                if partition_log.config.tidelog_delivery_delay_enable and not (
                    all(is_timer_producer(b.producer_id) for b in batches)
                    and _broker_write(deps, context)
                ):
                    diverted = _divert(deps, partition_log, tp, batches, now_ms)
                    batches = diverted.batches
                if transactional:
                    _verify(deps, request.transactional_id, batches, tp, version)
                result: AppendResult | None = None
                if batches:
                    batches = _recompressed(
                        batches, partition_log.config.compression_type,
                        partition_log.config.max_message_bytes,
                    )
                    result = partition_log.append(
                        batches, now_ms=now_ms, leader_epoch=leader_epoch,
                        origin=AppendOrigin.CLIENT,
                    )
            except KafkaError as error:
                if diverted is not None and diverted.commit is not None:
                    diverted.commit.close()  # nothing of the partition is written
                log.debug("produce %s-%d: %s", topic.name, partition.index, error)
                deps.metrics.record_error(ApiKey.PRODUCE, error.code.name)
                fields.update(error_code=error.code, error_message=error.message or None)
                entry_cls = getattr(module, "BatchIndexAndErrorMessage", None)  # v8+
                if isinstance(error, InvalidRecordError) and error.record_errors and entry_cls:
                    # KIP-467: which records of the batch are at fault.
                    fields["record_errors"] = tuple(
                        responses.build(
                            entry_cls,
                            batch_index=index,
                            batch_index_error_message=message,
                        )
                        for index, message in error.record_errors
                    )
                if log_start_offset >= 0 and error.code not in _ERRORS_WITHOUT_LOG_START:
                    fields["log_start_offset"] = log_start_offset
            except OSError as error:
                if diverted is not None and diverted.commit is not None:
                    diverted.commit.close()
                # Disk full or failing: the segment rolled the append back; Kafka's answer.
                log.warning("produce %s-%d: %s", topic.name, partition.index, error)
                deps.metrics.record_error(ApiKey.PRODUCE, ErrorCode.KAFKA_STORAGE_ERROR.name)
                fields.update(error_code=ErrorCode.KAFKA_STORAGE_ERROR, error_message=str(error))
            else:
                if diverted is not None and diverted.timer_log is not None:
                    _wait_for_timer_log(partition_log, diverted, fields, durable_waits)
                if diverted is not None and diverted.commit is not None:
                    timer_commits.append((diverted.commit, fields))
                if result is None:  # every record went to the timer log: no offset yet
                    fields.update(error_code=ErrorCode.NONE, log_start_offset=log_start_offset)
                    partition_responses.append(fields)
                    continue
                fields.update(
                    error_code=ErrorCode.NONE,
                    base_offset=result.base_offset,
                    log_append_time=_append_time(result.log_append_time_ms),
                    log_start_offset=result.log_start_offset,
                )
                if not result.duplicate:
                    deps.append_waiters.notify(tp)
                    deps.metrics.record_produce(
                        topic.name, partition.index,
                        result.last_offset - result.base_offset + 1, len(partition.records),
                    )
                if partition_log.config.durability == "sync":
                    durable_waits.append((partition_log, result.last_offset + 1, fields))
                replication.after_leader_append(tp)
                if request.acks == -1 and deps.acks_all_waits_for_replicas:
                    replica_waits.append((tp, result.last_offset + 1, fields))
            partition_responses.append(fields)
        topic_responses.append((topic.name, partition_responses))

    if timer_commits:
        # Cluster mode: delayed records are acknowledged once committed in their timer
        # partition (acks=0 included: the write happens, unanswered).
        failures = await asyncio.gather(*(commit for commit, _ in timer_commits))
        for (_, fields), failure in zip(timer_commits, failures, strict=True):
            if failure is not None:
                fields.update(error_code=failure.code, base_offset=-1,
                              error_message=failure.message or None)
    if request.acks == 0:
        produce_throttle_ms(deps.quotas, context)  # no answer: the mute alone slows it
        return None
    if durable_waits:
        outcomes = await asyncio.gather(
            *(deps.topics.wait_durable(plog, end) for plog, end, _ in durable_waits),
            return_exceptions=True,
        )
        for (_, _, fields), outcome in zip(durable_waits, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                # Not durable, so not acknowledged: the partition answers the error (the
                # client retries; with idempotence the retry is deduplicated).
                log.warning("produce: %s", outcome)
                fields.update(
                    error_code=ErrorCode.KAFKA_STORAGE_ERROR,
                    base_offset=-1,
                    error_message=f"fsync failed: {outcome}",
                )
    if replica_waits:
        # acks=all in a cluster: answer once the high watermark passes each batch.
        codes = await asyncio.gather(
            *(
                replication.wait_for_high_watermark(tp, end, request.timeout_ms)
                for tp, end, _ in replica_waits
            )
        )
        for (_, _, fields), code in zip(replica_waits, codes, strict=True):
            if code != ErrorCode.NONE:
                fields.update(error_code=code, base_offset=-1, error_message=None)
    return responses.build(
        responses.response_class(ApiKey.PRODUCE, version),
        responses=tuple(
            responses.build(
                module.TopicProduceResponse,
                name=name,
                topic_id=ids.get(name),
                partition_responses=tuple(
                    responses.build(partition_cls, **fields) for fields in partition_fields
                ),
            )
            for name, partition_fields in topic_responses
        ),
        throttle_time=produce_throttle_ms(deps.quotas, context),
    )


def _broker_write(deps: ProduceDeps, context: RequestContext) -> bool:
    """Another broker writing as a broker (delayed delivery in a cluster)."""
    return deps.inter_broker is not None and deps.inter_broker(context)


def _divert(
    deps: ProduceDeps, partition_log: PartitionLog, tp: TopicPartition,
    batches: list[RecordBatch], now_ms: int,
) -> Diverted:
    if deps.divert is None:
        raise InvalidRecordError(
            "topics with tidelog.delivery.delay.enable=true are not served by this broker"
        )
    return deps.divert(partition_log, tp, batches, now_ms)


def _wait_for_timer_log(
    partition_log: PartitionLog, diverted: Diverted, fields: dict[str, Any],
    durable_waits: list[tuple[PartitionLog, int, dict[str, Any]]],
) -> None:
    """Delayed records are acknowledged once durable in the timer log, under the target's
    (or the timer log's own) durability."""
    assert diverted.timer_log is not None
    if partition_log.config.is_sync or diverted.timer_log.config.is_sync:
        durable_waits.append((diverted.timer_log, diverted.timer_end_offset, fields))


# Kafka's mapping of the coordinator's verification answers for the producer
# (AddPartitionsToTxnManager, ReplicaManager): the retriable ones become NOT_ENOUGH_REPLICAS,
# which every client retries without a metadata refresh.
_RETRY_VERIFICATION = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
})


def _for_producer(error: ErrorCode, version: int) -> ErrorCode:
    if error is ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error is ErrorCode.TRANSACTION_ABORTABLE and version < 11:
        return ErrorCode.INVALID_TXN_STATE  # Produce v11 added TRANSACTION_ABORTABLE
    if error is ErrorCode.INVALID_PRODUCER_ID_MAPPING:
        return ErrorCode.INVALID_TXN_STATE
    if error in _RETRY_VERIFICATION:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return error


def _first_transactional(batches: list[RecordBatch]) -> RecordBatch | None:
    return next((batch for batch in batches if batch.is_transactional), None)


async def _add_implicitly(
    deps: ProduceDeps, transactional_id: str | None, batches: list[RecordBatch],
    tp: TopicPartition,
) -> None:
    """Produce v12+: a partition not yet in the transaction is added at the coordinator
    first (Kafka's addPartition verification); the synchronous check below then passes."""
    batch = _first_transactional(batches)
    if batch is None or deps.add_to_transaction is None or deps.verify_transaction is None:
        return
    assert transactional_id is not None
    key = (tp.topic, tp.partition)
    found = deps.verify_transaction(transactional_id, batch.producer_id, batch.producer_epoch, key)
    if found is not ErrorCode.TRANSACTION_ABORTABLE:
        return  # added already, or an error the check below answers
    error = await deps.add_to_transaction(
        transactional_id, batch.producer_id, batch.producer_epoch, key
    )
    if error is not ErrorCode.NONE:
        raise KafkaError(_for_producer(error, 12), f"{tp} not added to the transaction")


def _verify(
    deps: ProduceDeps, transactional_id: str | None, batches: list[RecordBatch],
    tp: TopicPartition, version: int,
) -> None:
    """A transactional batch for a partition its transaction has not added is refused
    (Kafka's transaction.partition.verification: TRANSACTION_ABORTABLE from Produce v11,
    INVALID_TXN_STATE before), so a late write of a timed-out or fenced producer cannot open
    a transaction that nobody will end; an older epoch is INVALID_PRODUCER_EPOCH."""
    assert deps.verify_transaction is not None and transactional_id is not None
    batch = _first_transactional(batches)
    if batch is None:
        return
    error = deps.verify_transaction(
        transactional_id, batch.producer_id, batch.producer_epoch, (tp.topic, tp.partition)
    )
    if error is not ErrorCode.NONE:
        raise KafkaError(_for_producer(error, version), f"transactional write to {tp} not verified")


def handlers(deps: ProduceDeps) -> HandlerTable:
    return {ApiKey.PRODUCE: partial(handle_produce, deps)}
