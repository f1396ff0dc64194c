"""ShareFetch (key 78, v1-v2) and ShareAcknowledge (key 79, v1-v2): KIP-932 share consumption.

Per request: the share session is checked (epoch 0 opens one, -1 closes it, otherwise the
epoch must be the session's next one: INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_NOT_FOUND as
request-level errors), piggy-backed acknowledgements are applied per partition (all or nothing:
INVALID_REQUEST for malformed batches, INVALID_RECORD_STATE for offsets not acquired by this
member), then records are acquired from the session's partitions up to `max_records`: whole
batches are read from the log and sent, `acquired_records` naming the offsets this member
holds (the client skips the others). Nothing to acquire and `max_wait` left: the fetch parks
on the partitions' appends, or until the next acquisition lock expires. Every change is
written to `__share_group_state` (broker/share/service.py) before the answer.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from tidelog.broker import clock
from tidelog.broker.handlers.authorization import Op, Type, allowed
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.handlers.share_common import ShareDeps
from tidelog.broker.share.filtering import filtered_offsets, group_filter
from tidelog.broker.share.service import ShareService
from tidelog.coordinator.share_partition import AcknowledgementBatch, LogBatch
from tidelog.errors import ErrorCode, KafkaError
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.records.batch import iter_batches
from tidelog.types import TopicPartition

MAX_PARTITION_READ_BYTES = 8 * 1024 * 1024  # one partition's read per pass
DEFAULT_MAX_RECORDS = 500  # Kafka's max.poll.records, when a request says 0 or less


@dataclass(slots=True)
class _Answer:
    error: ErrorCode = ErrorCode.NONE
    acknowledge_error: ErrorCode = ErrorCode.NONE
    records: bytes = b""
    acquired: list[tuple[int, int, int]] | None = None
    leader: tuple[int, int] | None = None  # (id, epoch) for NOT_LEADER_OR_FOLLOWER


def _refuse(answer: _Answer, deps: ShareDeps, tp: TopicPartition, error: ErrorCode,
            for_acks: bool = False) -> None:
    """The partition's error; its records are not sent (they were not persisted), and a
    client told NOT_LEADER_OR_FOLLOWER learns the current leader (KIP-951's fields)."""
    if for_acks:
        answer.acknowledge_error = error
    else:
        answer.error = error
        answer.records, answer.acquired = b"", None
    if error is ErrorCode.NOT_LEADER_OR_FOLLOWER and deps.current_leader is not None:
        answer.leader = deps.current_leader(tp)


async def _ready(deps: ShareDeps, service: ShareService, group_id: str, name: str,
                 topic_id: uuid.UUID, index: int) -> None:
    """Cluster mode: this broker must lead the partition (NOT_LEADER_OR_FOLLOWER) and the
    share partition's state is read from the share coordinator before its first use."""
    deps.replication.high_watermark(TopicPartition(name, index))  # raises when not leader
    await service.load(group_id, name, topic_id, index)


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def _batches(items: Iterable[Any]) -> list[AcknowledgementBatch]:
    return [
        AcknowledgementBatch(int(b.first_offset), int(b.last_offset),
                             tuple(int(t) for t in b.acknowledge_types))
        for b in items
    ]


class _Refused(Exception):
    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


def _topic_refused(deps: ShareDeps, context: RequestContext, name: str) -> bool:
    return deps.authorizer is not None and not allowed(
        deps.authorizer, context, Op.READ, Type.TOPIC, name
    )


async def _acknowledge(
    deps: ShareDeps,
    context: RequestContext,
    service: ShareService,
    group_id: str,
    member_id: str,
    topics: Iterable[Any],
    renew_allowed: bool,
    answers: dict[tuple[uuid.UUID, int], _Answer],
    persist: bool = True,
) -> None:
    """`persist=False`: the caller writes the changed share partitions later, before it
    answers (a ShareFetch writes acknowledgements and acquisitions as one record)."""
    now_ms = clock.now_ms()
    for topic in topics:
        topic_id = topic.topic_id or uuid.UUID(int=0)
        info = deps.topics.by_id(topic_id)
        for partition in topic.partitions:
            batches = _batches(partition.acknowledgement_batches)
            if not batches:
                continue
            answer = answers.setdefault((topic_id, partition.partition_index), _Answer())
            if info is None or not 0 <= partition.partition_index < info.partitions:
                answer.acknowledge_error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if _topic_refused(deps, context, info.name):
                answer.acknowledge_error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            tp = TopicPartition(info.name, partition.partition_index)
            try:
                await _ready(deps, service, group_id, info.name, topic_id,
                             partition.partition_index)
            except KafkaError as error:
                _refuse(answer, deps, tp, error.code, for_acks=True)
                continue
            share_partition = service.share_partition(
                group_id, info.name, topic_id, partition.partition_index
            )
            answer.acknowledge_error = share_partition.acknowledge(
                member_id, batches, now_ms, renew_allowed
            )
            if answer.acknowledge_error is ErrorCode.NONE:
                # Released records may be acquired now: wake fetches parked on the partition.
                deps.append_waiters.notify(TopicPartition(info.name, partition.partition_index))
            if persist:
                try:
                    await service.persist(group_id, topic_id, partition.partition_index)
                except KafkaError as error:
                    _refuse(answer, deps, tp, error.code, for_acks=True)


def _session(
    deps: ShareDeps, context: RequestContext, request: Any, with_acks: bool
) -> tuple[ShareService, str, str, int]:
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    if not group_id or not member_id:
        raise _Refused(ErrorCode.INVALID_REQUEST)
    if deps.authorizer is not None and not allowed(
        deps.authorizer, context, Op.READ, Type.GROUP, group_id
    ):
        raise _Refused(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    epoch = int(request.share_session_epoch)
    if epoch == 0 and with_acks:  # Kafka: acknowledgements on an initial epoch
        raise _Refused(ErrorCode.INVALID_REQUEST)
    service = deps.shares()
    try:
        service.session_for(group_id, member_id, epoch)
    except KafkaError as error:
        raise _Refused(error.code) from None
    return service, group_id, member_id, epoch


def _has_acks(topics: Iterable[Any]) -> bool:
    return any(p.acknowledgement_batches for t in topics for p in t.partitions)


async def handle_share_fetch(deps: ShareDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.SHARE_FETCH, version)
    try:
        service, group_id, member_id, epoch = _session(
            deps, context, request, _has_acks(request.topics)
        )
    except _Refused as refused:
        return _fetch_response(module, version, refused.error, 0, {}, deps.node_id)
    answers: dict[tuple[uuid.UUID, int], _Answer] = {}
    await _acknowledge(deps, context, service, group_id, member_id, request.topics,
                       version >= 2, answers, persist=False)
    try:
        return await _fetch_after_acks(deps, context, request, version, module, service,
                                       group_id, member_id, epoch, answers)
    finally:
        # After an error: what the fetch did not write (no-ops when written).
        await _persist_all(deps, service, group_id)


async def _fetch_after_acks(
    deps: ShareDeps, context: RequestContext, request: Any, version: int, module: Any,
    service: ShareService, group_id: str, member_id: str, epoch: int,
    answers: dict[tuple[uuid.UUID, int], _Answer],
) -> Any:
    lock_ms = service.settings(group_id).record_lock_duration_ms
    if epoch == -1:
        service.close_session(group_id, member_id)
        await _persist_all(deps, service, group_id, answers)
        return _fetch_response(module, version, ErrorCode.NONE, lock_ms, answers, deps.node_id)
    session = service.sessions.get((group_id, member_id))
    if session is None:  # the member expired while the acknowledgements were written
        return _fetch_response(module, version, ErrorCode.SHARE_SESSION_NOT_FOUND, lock_ms, {},
                               deps.node_id)
    session.epoch = epoch + 1 if epoch > 0 else 1
    for topic in request.topics:
        topic_id = topic.topic_id or uuid.UUID(int=0)
        info = deps.topics.by_id(topic_id)
        for partition in topic.partitions:
            index = partition.partition_index
            if info is not None and 0 <= index < info.partitions:
                session.partitions[(topic_id, index)] = None
            else:  # answered with its error, never kept: a session holds real partitions only
                answers.setdefault((topic_id, index), _Answer()).error = (
                    ErrorCode.UNKNOWN_TOPIC_ID)
    for forgotten in request.forgotten_topics_data:
        for index in forgotten.partitions:
            session.partitions.pop((forgotten.topic_id or uuid.UUID(int=0), index), None)
    if epoch == 0:  # a full request: every partition is answered
        for key in session.partitions:
            answers.setdefault(key, _Answer())
    if not getattr(request, "is_renew_ack", False):
        await _fetch(deps, context, request, service, group_id, member_id,
                     list(session.partitions), answers, session.epoch)
    await _persist_all(deps, service, group_id, answers)
    return _fetch_response(module, version, ErrorCode.NONE, lock_ms, answers, deps.node_id)


async def _persist_all(deps: ShareDeps, service: ShareService, group_id: str,
                       answers: dict[tuple[uuid.UUID, int], _Answer] | None = None) -> None:
    """Write every changed share partition of the group; a failed write fails the
    acknowledgements answered for that partition (none raises: `answers` None ignores)."""
    for group, topic_id, partition in list(service.partitions):
        if group != group_id:
            continue
        try:
            await service.persist(group, topic_id, partition)
        except KafkaError as error:
            answer = None if answers is None else answers.get((topic_id, partition))
            if answer is not None:
                info = deps.topics.by_id(topic_id)
                name = "" if info is None else info.name
                _refuse(answer, deps, TopicPartition(name, partition), error.code, True)


async def _fetch(
    deps: ShareDeps,
    context: RequestContext,
    request: Any,
    service: ShareService,
    group_id: str,
    member_id: str,
    wanted: list[tuple[uuid.UUID, int]],
    answers: dict[tuple[uuid.UUID, int], _Answer],
    session_turn: int = 0,
) -> None:
    max_records = int(getattr(request, "max_records", 0)) or DEFAULT_MAX_RECORDS
    max_records = max_records if max_records > 0 else DEFAULT_MAX_RECORDS
    max_bytes = max(1, int(request.max_bytes))
    deadline_ms = clock.monotonic_ms() + max(0, _ms(request.max_wait))
    resolved: list[tuple[uuid.UUID, int, str]] = []
    for topic_id, index in wanted:
        info = deps.topics.by_id(topic_id)
        if info is None or not 0 <= index < info.partitions:
            answers.setdefault((topic_id, index), _Answer()).error = ErrorCode.UNKNOWN_TOPIC_ID
        elif _topic_refused(deps, context, info.name):
            answers.setdefault((topic_id, index), _Answer()).error = (
                ErrorCode.TOPIC_AUTHORIZATION_FAILED
            )
        else:
            resolved.append((topic_id, index, info.name))
    if resolved:  # each request starts at the next partition: none starves the others
        turn = session_turn % len(resolved)
        resolved = resolved[turn:] + resolved[:turn]
    while True:
        acquired_any = False
        total_records = 0
        total_bytes = 0
        now_ms = clock.now_ms()
        next_deadline: int | None = None
        progressed = False  # records filtered out, more to read: read on without waiting
        for topic_id, index, name in resolved:
            if total_records >= max_records or total_bytes >= max_bytes:
                break
            try:
                got, size, more = await _acquire_one(
                    deps, service, group_id, member_id, name, topic_id, index,
                    max_records - total_records, max_bytes - total_bytes, now_ms,
                    answers,
                )
            except KafkaError as error:
                _refuse(answers.setdefault((topic_id, index), _Answer()), deps,
                        TopicPartition(name, index), error.code)
                continue
            total_records += got
            total_bytes += size
            acquired_any = acquired_any or got > 0
            progressed = progressed or more
            share_partition = service.partitions.get((group_id, topic_id, index))
            # Lock expiries and ends of retry back-offs (tidelog.share.retry.backoff.ms).
            deadline = share_partition.next_deadline_ms(now_ms) if share_partition else None
            if deadline is not None and (next_deadline is None or deadline < next_deadline):
                next_deadline = deadline
        remaining_ms = deadline_ms - clock.monotonic_ms()
        if acquired_any or remaining_ms <= 0 or deps.lifecycle.closing or not resolved:
            return
        if any(a.acknowledge_error is not ErrorCode.NONE or a.error is not ErrorCode.NONE
               for a in answers.values()):
            return
        if progressed:  # yield first: a long filtered-out stretch must not hold the loop
            await asyncio.sleep(0)
            continue
        if next_deadline is not None:  # a lock may expire before the wait ends
            remaining_ms = min(remaining_ms, max(1, next_deadline - clock.now_ms() + 1))
        await deps.append_waiters.wait(
            [TopicPartition(name, index) for _, index, name in resolved], remaining_ms
        )


async def _acquire_one(
    deps: ShareDeps,
    service: ShareService,
    group_id: str,
    member_id: str,
    name: str,
    topic_id: uuid.UUID,
    index: int,
    max_records: int,
    max_bytes: int,
    now_ms: int,
    answers: dict[tuple[uuid.UUID, int], _Answer],
) -> tuple[int, int, bool]:
    """Acquire from one share partition: (records acquired, their bytes, whether the group's
    filter dropped records and more may be acquirable now)."""
    tp = TopicPartition(name, index)
    await _ready(deps, service, group_id, name, topic_id, index)
    share_partition = service.share_partition(group_id, name, topic_id, index)
    partition_log = deps.topics.partition_log(name, index)
    share_partition.move_start(partition_log.log_start_offset)
    share_partition.expire(now_ms)
    high_watermark = deps.replication.high_watermark(tp)
    # share.isolation.level=read_committed: up to the last stable offset, aborted transactions'
    # batches archived like control batches (never delivered).
    read_committed = service.group_configs.get(group_id, {}).get(
        "share.isolation.level") == "read_committed"
    limit = partition_log.last_stable_offset(high_watermark) if read_committed else high_watermark
    got = size = 0
    more = False
    dropping = group_filter(service.group_configs.get(group_id, {}))
    if share_partition.can_acquire(limit, now_ms):
        offset = share_partition.first_acquirable(now_ms)
        read = partition_log.read(
            offset, min(max_bytes, MAX_PARTITION_READ_BYTES), max_offset=limit
        )
        data = b"".join(piece.read_bytes() for piece in read.slices)
        batches = list(iter_batches(data))
        aborted = (partition_log.aborted_transactions(offset, batches[-1].next_offset)
                   if read_committed and batches else [])

        def undeliverable(batch: Any) -> bool:
            return bool(batch.is_control) or (batch.is_transactional and any(
                a.producer_id == batch.producer_id
                and a.first_offset <= batch.base_offset <= a.last_offset for a in aborted))

        def log_batch(batch: Any) -> LogBatch:
            control = undeliverable(batch)
            return LogBatch(batch.base_offset, batch.last_offset, control, frozenset()
                            if dropping is None or control else filtered_offsets(batch, dropping))

        def log_batches() -> Iterator[LogBatch]:
            """Lazily: a filter runs only on batches acquisition can still take from."""
            for batch in batches:
                if dropping is not None and batch.base_offset >= share_partition.end_offset \
                        and not share_partition.has_room():
                    return
                yield log_batch(batch)

        filtered_before = share_partition.counters.filtered
        ranges, used = share_partition.acquire(member_id, log_batches(), max_records, now_ms)
        more = (share_partition.counters.filtered > filtered_before
                and share_partition.can_acquire(limit, now_ms))
        if ranges:
            answer = answers.setdefault((topic_id, index), _Answer())
            answer.records = b"".join(bytes(batches[i].buffer) for i in used)
            answer.acquired = [(r.first_offset, r.last_offset, r.delivery_count)
                               for r in ranges]
            got = sum(r.last_offset - r.first_offset + 1 for r in ranges)
            size = len(answer.records)
    await service.persist(group_id, topic_id, index)
    return got, size, more


def _fetch_response(
    module: Any, version: int, error: ErrorCode, lock_ms: int,
    answers: dict[tuple[uuid.UUID, int], _Answer], node_id: int,
) -> Any:
    by_topic: dict[uuid.UUID, list[Any]] = {}
    here = responses.build(module.LeaderIdAndEpoch, leader_id=node_id, leader_epoch=0)
    for (topic_id, index), answer in answers.items():
        leader = here if answer.leader is None else responses.build(
            module.LeaderIdAndEpoch, leader_id=answer.leader[0], leader_epoch=answer.leader[1])
        by_topic.setdefault(topic_id, []).append(responses.build(
            module.PartitionData,
            partition_index=index,
            error_code=answer.error,
            acknowledge_error_code=answer.acknowledge_error,
            current_leader=leader,
            records=answer.records,  # never None: kio cannot write a null records field
            acquired_records=tuple(
                responses.build(module.AcquiredRecords, first_offset=first,
                                last_offset=last, delivery_count=count)
                for first, last, count in (answer.acquired or [])
            ),
        ))
    topics = tuple(
        responses.build(module.ShareFetchableTopicResponse, topic_id=topic_id,
                        partitions=tuple(partitions))
        for topic_id, partitions in by_topic.items()
    )
    cls = responses.response_class(ApiKey.SHARE_FETCH, version)
    return responses.build(
        cls, throttle_time=0, error_code=error, acquisition_lock_timeout=lock_ms,
        responses=topics, node_endpoints=(),
    )


async def handle_share_acknowledge(
    deps: ShareDeps, context: RequestContext, request: Any
) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.SHARE_ACKNOWLEDGE, version)
    cls = responses.response_class(ApiKey.SHARE_ACKNOWLEDGE, version)
    if int(request.share_session_epoch) == 0:  # acknowledging needs an open session
        return responses.build(cls, throttle_time=0,
                               error_code=ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                               responses=(), node_endpoints=())
    try:
        service, group_id, member_id, epoch = _session(deps, context, request, True)
    except _Refused as refused:
        return responses.build(cls, throttle_time=0, error_code=refused.error,
                               responses=(), node_endpoints=())
    answers: dict[tuple[uuid.UUID, int], _Answer] = {}
    await _acknowledge(deps, context, service, group_id, member_id, request.topics,
                       version >= 2, answers)
    if epoch == -1:
        service.close_session(group_id, member_id)
        await _persist_all(deps, service, group_id, answers)
    else:
        session = service.sessions.get((group_id, member_id))
        if session is not None:  # else the member expired meanwhile: nothing to advance
            session.epoch = epoch + 1
    here = responses.build(module.LeaderIdAndEpoch, leader_id=deps.node_id, leader_epoch=0)
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for (topic_id, index), answer in answers.items():
        leader = here if answer.leader is None else responses.build(
            module.LeaderIdAndEpoch, leader_id=answer.leader[0], leader_epoch=answer.leader[1])
        by_topic.setdefault(topic_id, []).append(responses.build(
            module.PartitionData, partition_index=index,
            error_code=answer.acknowledge_error, current_leader=leader,
        ))
    topics = tuple(
        responses.build(module.ShareAcknowledgeTopicResponse, topic_id=topic_id,
                        partitions=tuple(partitions))
        for topic_id, partitions in by_topic.items()
    )
    return responses.build(cls, throttle_time=0, error_code=ErrorCode.NONE,
                           responses=topics, node_endpoints=())


def handlers(deps: ShareDeps) -> HandlerTable:
    return {
        ApiKey.SHARE_FETCH: partial(handle_share_fetch, deps),
        ApiKey.SHARE_ACKNOWLEDGE: partial(handle_share_acknowledge, deps),
    }
