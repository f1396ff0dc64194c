"""Fetch (key 1, v4-v16): whole batches from the log, long-polled, sent by sendfile.

Long poll: when fewer than min_bytes are available and max_wait_ms has not passed, the fetch
parks on `deps.append_waiters` and is woken by the next append to one of its partitions
(no polling). max_bytes bounds the response and partition_max_bytes each partition, but the
first batch found is always sent even when larger (so a big batch never blocks a consumer).
On a single node the high watermark is the log end offset.

Fetch sessions (v7+, KIP-227; `broker/fetch_session.py`): a full request may open a session,
an incremental one names only the partitions that changed and is answered with only the
partitions that have records or news; the read itself covers every partition of the session.
Followers in a cluster fetch sessionless (epoch -1): Tidelog's replica fetcher keeps no session.
"""

from __future__ import annotations

import io
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from tidelog.broker import clock
from tidelog.broker.delayed import AppendWaiters
from tidelog.broker.fetch_session import (
    CachedPartition,
    FetchContext,
    FetchSessionCache,
    PartitionKey,
    new_context,
)
from tidelog.broker.handlers.authorization import Op, Type, allowed_names, cluster_allowed
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.handlers.quota_throttle import fetch_max_bytes, fetch_throttle_ms
from tidelog.broker.quotas.manager import QuotaManager, QuotaType
from tidelog.broker.services import Lifecycle, Metrics, PartitionReplication
from tidelog.broker.topic_registry import TopicRegistry
from tidelog.errors import ErrorCode, KafkaError
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.wire import (
    FetchPartitionData,
    FetchTopicData,
    Outgoing,
    SendSlice,
    encode_fetch_response,
)
from tidelog.security.authorizer import Authorizer
from tidelog.types import TopicPartition

_ZERO_ID = uuid.UUID(int=0)
log = logging.getLogger("tidelog.broker.fetch")


@dataclass(frozen=True, slots=True)
class FetchDeps:
    topics: TopicRegistry
    replication: PartitionReplication
    append_waiters: AppendWaiters  # parks a fetch until an append to one of its partitions
    metrics: Metrics
    lifecycle: Lifecycle
    authorizer: Authorizer | None = None  # None: no ACL checks (authorizer.class.name unset)
    quotas: QuotaManager | None = None  # client quotas (consumer_byte_rate); None: none
    sessions: FetchSessionCache | None = None  # None: every fetch answered sessionless


@dataclass(frozen=True, slots=True)
class _Wanted:
    name: str
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int  # v9+ (else -1); checked by replication.fetch_bounds (KIP-320)
    tp: TopicPartition  # built once per request, reused by every read pass


def _requested(
    deps: FetchDeps, request: Any, version: int
) -> tuple[list[CachedPartition], list[PartitionKey]]:
    """The partitions the request names (all of them, or the changes of a session) and the
    ones it forgets (v7+ `forgotten_topics_data`; keyed by topic id from v13)."""
    # Keyed as Kafka's LinkedHashMap: a partition named twice is read and answered once (the
    # last entry wins, in the first one's place), so duplicates cannot multiply the work.
    named: dict[tuple[str, uuid.UUID, int], CachedPartition] = {}
    for topic in request.topics:
        if version >= 13:
            topic_id = topic.topic_id or _ZERO_ID
            info = deps.topics.by_id(topic_id)
            name = info.name if info else ""
        else:
            name = topic.topic
            info = deps.topics.get(name)
            topic_id = info.topic_id if info else _ZERO_ID
        for partition in topic.partitions:
            named[(name, topic_id, partition.partition)] = CachedPartition(
                name,
                topic_id,
                partition.partition,
                partition.fetch_offset,
                partition.partition_max_bytes,
                int(getattr(partition, "current_leader_epoch", -1)),
            )
    forgotten: list[PartitionKey] = []
    for topic in getattr(request, "forgotten_topics_data", ()):
        key: str | uuid.UUID = (topic.topic_id or _ZERO_ID) if version >= 13 else topic.topic
        forgotten.extend((key, int(index)) for index in topic.partitions)
    return list(named.values()), forgotten


def _wanted(partitions: Iterable[CachedPartition]) -> list[_Wanted]:
    return [
        _Wanted(
            item.topic,
            item.topic_id,
            item.partition,
            item.fetch_offset,
            item.partition_max_bytes,
            item.current_leader_epoch,
            TopicPartition(item.topic, item.partition),
        )
        for item in partitions
    ]


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000)


# Each slice of a response holds a private descriptor until it is sent: a consumer of 10,000
# small partitions must not need 10,000 of them at once (EMFILE). Past this many, partitions
# are answered without records, as past fetch.max.bytes, and come in the next Fetch.
MAX_SEGMENT_FILES_PER_FETCH = 256

_UNKNOWN = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID})


def _read_all(
    deps: FetchDeps,
    wanted: list[_Wanted],
    max_bytes: int,
    version: int,
    replica_id: int = -1,
    read_committed: bool = False,
    refused: frozenset[str] = frozenset(),
) -> tuple[list[FetchTopicData], int, bool]:
    """One pass over the partitions: (topics, bytes found, whether any partition has an error).

    A READ_COMMITTED read stops at the last stable offset; its aborted_transactions list the
    aborted transactions overlapping the fetched range (Kafka's collectAbortedTransactions,
    bounded by the offset after the last batch sent), null for a READ_UNCOMMITTED read and
    for a read that failed
    (ReplicaManager's answers); a partition the broker does not know gets the schema's
    default, an empty list (KafkaApis answers it before reading)."""
    by_topic: dict[tuple[str, uuid.UUID], list[FetchPartitionData]] = {}
    total = 0
    files = 0  # private segment files opened for this response (each one a descriptor)
    errors = False
    for item in wanted:
        entries = by_topic.setdefault((item.name, item.topic_id), [])
        try:
            if not item.name:
                unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 else unknown)
            if refused and item.name in refused:
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            partition_log = deps.topics.partition_log(item.name, item.partition)
            # Leaders only; consumers read below the high watermark, followers to the end.
            high_watermark, max_offset = deps.replication.fetch_bounds(
                item.tp, replica_id, item.fetch_offset,
                item.current_leader_epoch,
            )
            last_stable_offset = partition_log.last_stable_offset(high_watermark)
            if read_committed and replica_id < 0:
                max_offset = min(max_offset, last_stable_offset)
            log_start_offset = partition_log.log_start_offset
            if item.fetch_offset == max_offset and item.fetch_offset >= log_start_offset:
                # Caught up: nothing to read (the common case of a long-polling consumer of
                # many partitions); the answer the read would give, without the read.
                entries.append(FetchPartitionData(
                    item.partition, ErrorCode.NONE, high_watermark, last_stable_offset,
                    log_start_offset, aborted_transactions_listed=read_committed,
                ))
                continue
            limit = max(0, min(item.partition_max_bytes, max_bytes - total))
            if files >= MAX_SEGMENT_FILES_PER_FETCH:
                limit = 0  # the rest come in the next Fetch, as past fetch.max.bytes
            result = partition_log.read(
                item.fetch_offset,
                limit,
                max_offset=max_offset,
                min_one_batch=total == 0,
            )
        except KafkaError as error:
            errors = True  # answered at once, so each error is counted once
            deps.metrics.record_error(ApiKey.FETCH, error.code.name)
            # Kafka's FetchResponse.partitionResponse(error): no offsets at all, not even the
            # log start (a consumer out of range asks ListOffsets, as its reset policy says).
            entries.append(FetchPartitionData(
                item.partition, error.code, -1, -1, -1,
                aborted_transactions_listed=error.code in _UNKNOWN,
            ))
            continue
        slices = [
            SendSlice(_private_file(piece.fd), piece.position, piece.length)
            for piece in result.slices
            if piece.length
        ]
        total += result.size
        files += len(slices)
        aborted: list[tuple[int, int]] = []
        if read_committed and result.size:
            upper_bound = min(max_offset, result.next_offset)
            aborted = [
                (entry.producer_id, entry.first_offset)
                for entry in partition_log.aborted_transactions(item.fetch_offset, upper_bound)
            ]
        entries.append(
            FetchPartitionData(
                item.partition,
                ErrorCode.NONE,
                high_watermark,
                last_stable_offset,
                result.log_start_offset,
                slices,
                aborted_transactions_listed=read_committed,
                aborted_transactions=aborted,
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


def _replica_id(request: Any) -> int:
    """The fetching follower's id (-1: a consumer): `replica_id` in v4-v14, KIP-903's
    `replica_state.replica_id` from v15."""
    state = getattr(request, "replica_state", None)
    if state is not None:
        return int(state.replica_id)
    return int(getattr(request, "replica_id", -1))


def _refused(
    authorizer: Authorizer, context: RequestContext, wanted: list[_Wanted], replica_id: int
) -> frozenset[str]:
    """Topics this fetch may not read (KafkaApis.handleFetchRequest): a follower needs
    CLUSTER_ACTION on the cluster for all of them, a consumer READ on each topic."""
    names = {item.name for item in wanted if item.name}
    if replica_id >= 0:
        return frozenset() if cluster_allowed(authorizer, context, Op.CLUSTER_ACTION) else (
            frozenset(names)
        )
    return frozenset(names - allowed_names(authorizer, context, Op.READ, Type.TOPIC, names))


def _session_context(
    deps: FetchDeps,
    request: Any,
    version: int,
    requested: list[CachedPartition],
    forgotten: list[PartitionKey],
) -> FetchContext:
    if version < 7 or deps.sessions is None:
        return FetchContext("sessionless")
    return new_context(
        deps.sessions,
        int(request.session_id),
        int(request.session_epoch),
        version >= 13,
        requested,
        forgotten,
        clock.monotonic_ms(),
    )


async def handle_fetch(deps: FetchDeps, context: RequestContext, request: Any) -> Outgoing:
    version = context.header.api_version
    requested, forgotten = _requested(deps, request, version)
    session_context = _session_context(deps, request, version, requested, forgotten)
    deps.metrics.record_fetch_session(session_context.kind)
    if session_context.error != ErrorCode.NONE:
        deps.metrics.record_error(ApiKey.FETCH, session_context.error.name)
        return encode_fetch_response(context.header, [], error_code=session_context.error)
    session = session_context.session
    wanted = _wanted(session.partitions.values() if session is not None else requested)
    max_bytes = max(0, int(request.max_bytes))
    min_bytes = int(request.min_bytes)
    deadline_ms = clock.monotonic_ms() + max(0, _ms(request.max_wait))
    partitions = [item.tp for item in wanted if item.name]
    replica_id = _replica_id(request)
    read_committed = int(request.isolation_level) == 1
    quota_limited = False
    if replica_id < 0:  # followers are not client-quota'd (replication quotas are not built)
        limited = fetch_max_bytes(deps.quotas, context, max_bytes)
        quota_limited = deps.quotas is not None and deps.quotas.max_value_in_window(
            QuotaType.FETCH, context.principal.name, context.client_id) is not None
        max_bytes = limited
    refused = frozenset[str]()
    if deps.authorizer is not None:
        refused = _refused(deps.authorizer, context, wanted, replica_id)
    while True:
        topics, total, errors = _read_all(
            deps, wanted, max_bytes, version, replica_id, read_committed, refused
        )
        remaining_ms = deadline_ms - clock.monotonic_ms()
        if total >= min_bytes or errors or remaining_ms <= 0 or deps.lifecycle.closing:
            break
        _close(topics)  # not enough yet: park, then read again from the same offsets
        deps.metrics.record_fetch_parked(1)
        try:
            await deps.append_waiters.wait(partitions, remaining_ms)
        finally:
            deps.metrics.record_fetch_parked(-1)
    if replica_id < 0 and quota_limited:
        # consumer_byte_rate counts the whole response, as Kafka's (getResponseSize); over
        # quota (KIP-219) the answer is empty, carries the throttle time and leaves the fetch
        # session as it was (Kafka's getThrottledResponse)
        size = encode_fetch_response(context.header, topics).size
        throttle_ms = fetch_throttle_ms(deps.quotas, context, size)
        if throttle_ms > 0:
            _close(topics)
            return encode_fetch_response(
                context.header, [], throttle_time_ms=throttle_ms,
                session_id=session.session_id if session is not None else 0)
    deps.metrics.record_fetch_response(wanted, topics)
    session_id = 0
    if session is not None:  # incremental: only what the fetcher does not know yet
        topics = session.respond(topics, incremental=True)
        session_id = session.session_id
    elif session_context.kind == "full" and deps.sessions is not None:
        created = deps.sessions.maybe_create(
            clock.monotonic_ms(), replica_id >= 0, version >= 13, requested
        )
        if created is not None:
            created.respond(topics, incremental=False)  # remembers what was told
            session_id = created.session_id
    return encode_fetch_response(context.header, topics, session_id=session_id)


def handlers(deps: FetchDeps) -> HandlerTable:
    return {ApiKey.FETCH: partial(handle_fetch, deps)}
