"""Transactions: AddPartitionsToTxn (24, v0-5), AddOffsetsToTxn (25, v0-4), EndTxn (26,
v0-5), WriteTxnMarkers (27, v1-2), TxnOffsetCommit (28, v0-5), and InitProducerId with a
transactional.id (`init_transactional`, called by `producer.py`). The same handlers serve a
single node and a cluster: in a cluster the service answers NOT_COORDINATOR for ids whose
`__transaction_state` partition another broker leads, WriteTxnMarkers appends acks=all
(`deps.replication`), and new producer ids come from ZooKeeper blocks.

Kafka version rules: PRODUCER_FENCED exists for InitProducerId v4+, AddPartitionsToTxn v2+,
AddOffsetsToTxn v2+, EndTxn v2+ and TxnOffsetCommit v3+ (KIP-588); older versions get
INVALID_PRODUCER_EPOCH. AddPartitionsToTxn v4-5 is the broker-to-coordinator batched form whose
`verify_only` asks whether partitions are already in the transaction (KIP-890 part 1).
Transaction version 2 (KIP-890 part 2): EndTxn v5 bumps the epoch per transaction and answers
it; TxnOffsetCommit v5 adds the group's partition itself (no AddOffsetsToTxn).

ACLs (handlers/authorization.py, KafkaApis): WRITE on the transactional id for every client API;
AddPartitionsToTxn v0-3 WRITE on each topic (internal topics always refused), v4+ CLUSTER_ACTION
(only brokers send it); AddOffsetsToTxn and TxnOffsetCommit READ on the group, TxnOffsetCommit
READ on each topic; WriteTxnMarkers ALTER or CLUSTER_ACTION on the cluster.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from tidelog.broker.handlers.authorization import (
    Op,
    Type,
    allowed,
    allowed_names,
    cluster_allowed,
)
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.internal_topics import INTERNAL_TOPICS, OFFSETS_TOPIC
from tidelog.broker.topic_registry import TopicRegistry
from tidelog.broker.transactions.markers import write_markers
from tidelog.coordinator.messages import CommitPartition, OffsetCommitRequest
from tidelog.coordinator.transactions import InitProducerIdResponse
from tidelog.errors import ErrorCode, KafkaError
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.security.authorizer import Authorizer

if TYPE_CHECKING:
    from tidelog.broker.groups.service import GroupService
    from tidelog.broker.services import PartitionReplication
    from tidelog.broker.transactions.service import TransactionService


@dataclass(frozen=True, slots=True)
class TransactionDeps:
    topics: TopicRegistry
    transactions: Callable[[], TransactionService]  # started on first use
    groups: Callable[[], GroupService]
    allocate_producer_id: Callable[[], int]
    authorizer: Authorizer | None = None  # None: no ACL checks (authorizer.class.name unset)
    # Cluster mode: markers are acks=all appends (None: a single node), and producer ids come
    # from ZooKeeper blocks (unique across brokers), claimed before the operation runs.
    replication: PartitionReplication | None = None
    cluster_producer_id: Callable[[], Awaitable[int]] | None = None


_FENCED_FROM = {
    ApiKey.INIT_PRODUCER_ID: 4, ApiKey.ADD_PARTITIONS_TO_TXN: 2, ApiKey.ADD_OFFSETS_TO_TXN: 2,
    ApiKey.END_TXN: 2, ApiKey.TXN_OFFSET_COMMIT: 3,
}


# TRANSACTION_ABORTABLE (KIP-890) exists from these versions; older ones get INVALID_TXN_STATE,
# as Kafka's AddPartitionsToTxnManager maps it for clients that predate it.
_ABORTABLE_FROM = {
    ApiKey.INIT_PRODUCER_ID: 5, ApiKey.ADD_PARTITIONS_TO_TXN: 5, ApiKey.ADD_OFFSETS_TO_TXN: 4,
    ApiKey.END_TXN: 4, ApiKey.TXN_OFFSET_COMMIT: 4,
}


def _for_version(error: ErrorCode, api_key: ApiKey, version: int) -> ErrorCode:
    if error is ErrorCode.PRODUCER_FENCED and version < _FENCED_FROM[api_key]:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error is ErrorCode.TRANSACTION_ABORTABLE and version < _ABORTABLE_FROM[api_key]:
        return ErrorCode.INVALID_TXN_STATE
    return error


def _ms(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


def _response(api_key: ApiKey, version: int, **fields: Any) -> Any:
    return responses.build(responses.response_class(api_key, version), throttle_time=0, **fields)


async def init_transactional(
    deps: TransactionDeps, version: int, request: Any
) -> InitProducerIdResponse:
    """InitProducerId with a transactional id: bump the epoch, fencing the previous producer."""
    txn_id = request.transactional_id
    timeout_ms = _ms(request.transaction_timeout)
    producer_id = int(getattr(request, "producer_id", -1))
    producer_epoch = int(getattr(request, "producer_epoch", -1))
    service = deps.transactions()
    try:
        allocate = await _producer_id_source(deps, txn_id)
        result = await service.run(txn_id, lambda coordinator, now_ms: coordinator.init_producer_id(
            txn_id, timeout_ms, producer_id, producer_epoch, allocate, now_ms,
        ))
    except KafkaError as refused:
        return InitProducerIdResponse(refused.code)
    assert result.init is not None
    answer = result.init
    code = _for_version(answer.error, ApiKey.INIT_PRODUCER_ID, version)
    return InitProducerIdResponse(code, answer.producer_id, answer.producer_epoch)


async def _producer_id_source(deps: TransactionDeps, txn_id: str) -> Callable[[], int]:
    """Where InitProducerId takes a new producer id. In a cluster the id is claimed (from a
    ZooKeeper block, asynchronously) before the pure operation runs, and only when it may
    need one: an unknown id, or an epoch about to be exhausted."""
    claim = deps.cluster_producer_id
    if claim is None:
        return deps.allocate_producer_id
    metadata = deps.transactions().describe(txn_id)  # NOT_COORDINATOR if not here
    if metadata is not None and metadata.producer_epoch < _EPOCH_NEAR_EXHAUSTION:
        return _no_new_id
    try:
        claimed = await claim()
    except Exception as error:  # ZooKeeper unreachable: the client retries
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(error)) from None
    return lambda: claimed


_EPOCH_NEAR_EXHAUSTION = 32_765  # Kafka moves to a new producer id at Short.MaxValue - 1


def _no_new_id() -> int:
    # The state changed between the check and the operation (a concurrent request): retry.
    raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS, "a new producer id is needed")


def _split_known(
    deps: TransactionDeps, topics: Any
) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    known: list[tuple[str, int]] = []
    unknown: list[tuple[str, int]] = []
    for topic in topics:
        info = deps.topics.get(topic.name)
        for partition in topic.partitions:
            target = known if info is not None and 0 <= partition < info.partitions else unknown
            target.append((topic.name, int(partition)))
    return known, unknown


async def _add(
    deps: TransactionDeps, txn_id: str, producer_id: int, producer_epoch: int,
    partitions: list[tuple[str, int]], verify_only: bool,
) -> dict[tuple[str, int], ErrorCode]:
    service = deps.transactions()
    if verify_only:
        try:
            return {
                tp: service.verify_partition(txn_id, producer_id, producer_epoch, tp)
                for tp in partitions
            }
        except KafkaError as refused:
            return dict.fromkeys(partitions, refused.code)
    try:
        result = await service.run(txn_id, lambda coordinator, now_ms: coordinator.add_partitions(
            txn_id, producer_id, producer_epoch, partitions, now_ms,
        ))
        error = result.error
    except KafkaError as refused:
        error = refused.code
    return dict.fromkeys(partitions, error)


def _topic_results(module: Any, outcomes: dict[tuple[str, int], ErrorCode]) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), error in outcomes.items():
        by_topic.setdefault(topic, []).append(responses.build(
            module.AddPartitionsToTxnPartitionResult, partition_index=partition,
            partition_error_code=error,
        ))
    return tuple(
        responses.build(module.AddPartitionsToTxnTopicResult, name=name,
                        results_by_partition=tuple(items))
        for name, items in by_topic.items()
    )


def _refused_topics(deps: TransactionDeps, context: RequestContext, topics: Any) -> set[str]:
    """AddPartitionsToTxn v0-3: topics this client may not WRITE, internal ones included
    (Kafka leaves them out of the names it authorizes, so they are always refused)."""
    names = {topic.name for topic in topics}
    internal = names & INTERNAL_TOPICS
    if deps.authorizer is None:
        return internal
    return names - allowed_names(
        deps.authorizer, context, Op.WRITE, Type.TOPIC, names - internal
    )


async def _add_one(
    deps: TransactionDeps, version: int, txn_id: str, producer_id: int, producer_epoch: int,
    topics: Any, verify_only: bool, refused: set[str],
) -> dict[tuple[str, int], ErrorCode]:
    outcomes: dict[tuple[str, int], ErrorCode] = {}
    if refused:
        outcomes = {
            (topic.name, int(partition)): ErrorCode.TOPIC_AUTHORIZATION_FAILED
            for topic in topics if topic.name in refused
            for partition in topic.partitions
        }
        topics = [topic for topic in topics if topic.name not in refused]
    known, unknown = _split_known(deps, topics)
    if outcomes or unknown:
        # Kafka: refused and unknown partitions fail, the others are not attempted.
        outcomes.update(dict.fromkeys(unknown, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        outcomes.update(dict.fromkeys(known, ErrorCode.OPERATION_NOT_ATTEMPTED))
        return outcomes
    outcomes = await _add(deps, txn_id, producer_id, producer_epoch, known, verify_only)
    return {
        tp: _for_version(error, ApiKey.ADD_PARTITIONS_TO_TXN, version)
        for tp, error in outcomes.items()
    }


async def handle_add_partitions_to_txn(
    deps: TransactionDeps, context: RequestContext, request: Any
) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.ADD_PARTITIONS_TO_TXN, version)
    authorizer = deps.authorizer
    if version <= 3:
        txn_id = request.v3_and_below_transactional_id
        topics = request.v3_and_below_topics
        if authorizer is not None and not allowed(
            authorizer, context, Op.WRITE, Type.TRANSACTIONAL_ID, txn_id
        ):
            outcomes = {
                (topic.name, int(partition)): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                for topic in topics for partition in topic.partitions
            }
        else:
            outcomes = await _add_one(
                deps, version, txn_id, request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch, topics, verify_only=False,
                refused=_refused_topics(deps, context, topics),
            )
        return _response(ApiKey.ADD_PARTITIONS_TO_TXN, version,
                         results_by_topic_v3_and_below=_topic_results(module, outcomes))
    if authorizer is not None and not cluster_allowed(authorizer, context, Op.CLUSTER_ACTION):
        # Only brokers send the batched form (Kafka's AddPartitionsToTxnManager).
        return _response(ApiKey.ADD_PARTITIONS_TO_TXN, version,
                         error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                         results_by_transaction=())
    results = []
    for txn in request.transactions:
        outcomes = await _add_one(
            deps, version, txn.transactional_id, txn.producer_id, txn.producer_epoch,
            txn.topics, verify_only=bool(txn.verify_only), refused=set(),
        )
        results.append(responses.build(
            module.AddPartitionsToTxnResult, transactional_id=txn.transactional_id,
            topic_results=_topic_results(module, outcomes),
        ))
    return _response(ApiKey.ADD_PARTITIONS_TO_TXN, version, error_code=ErrorCode.NONE,
                     results_by_transaction=tuple(results))


async def handle_add_offsets_to_txn(
    deps: TransactionDeps, context: RequestContext, request: Any
) -> Any:
    """The group's `__consumer_offsets` partition joins the transaction."""
    version = context.header.api_version
    authorizer = deps.authorizer
    if authorizer is not None and not allowed(
        authorizer, context, Op.WRITE, Type.TRANSACTIONAL_ID, request.transactional_id
    ):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif authorizer is not None and not allowed(
        authorizer, context, Op.READ, Type.GROUP, request.group_id
    ):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif not request.group_id:
        error = ErrorCode.INVALID_GROUP_ID
    else:
        partition = deps.groups().partition_of(request.group_id)
        outcomes = await _add(
            deps, request.transactional_id, request.producer_id, request.producer_epoch,
            [(OFFSETS_TOPIC, partition)], verify_only=False,
        )
        error = next(iter(outcomes.values()))
    return _response(ApiKey.ADD_OFFSETS_TO_TXN, version,
                     error_code=_for_version(error, ApiKey.ADD_OFFSETS_TO_TXN, version))


async def handle_end_txn(deps: TransactionDeps, context: RequestContext, request: Any) -> Any:
    """EndTxn. v5+ is transaction version 2 (KIP-890 part 2): the coordinator bumps the epoch
    and the answer carries the producer id and epoch the client goes on with."""
    version = context.header.api_version
    txn_id = request.transactional_id
    if deps.authorizer is not None and not allowed(
        deps.authorizer, context, Op.WRITE, Type.TRANSACTIONAL_ID, txn_id
    ):
        return _response(ApiKey.END_TXN, version,
                         error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    service = deps.transactions()
    bump = version >= 5
    ended: tuple[int, int] | None = None
    try:
        allocate = await _producer_id_source(deps, txn_id) if bump else None
        result = await service.run(txn_id, lambda coordinator, now_ms: coordinator.end_transaction(
            txn_id, request.producer_id, request.producer_epoch, bool(request.committed),
            now_ms, bump=bump, new_producer_id=allocate,
        ))
        error, ended = result.error, result.ended
    except KafkaError as refused:
        error = refused.code
    fields: dict[str, Any] = {}
    if bump:
        producer_id, producer_epoch = ended if ended is not None else (-1, -1)
        fields = {"producer_id": producer_id, "producer_epoch": producer_epoch}
    return _response(ApiKey.END_TXN, version,
                     error_code=_for_version(error, ApiKey.END_TXN, version), **fields)


async def handle_txn_offset_commit(
    deps: TransactionDeps, context: RequestContext, request: Any
) -> Any:
    version = context.header.api_version
    known: list[CommitPartition] = []
    outcomes: list[tuple[str, int, ErrorCode]] = []
    refused: set[str] = set()
    authorizer = deps.authorizer
    if authorizer is not None:
        # WRITE on the transactional id, READ on the group: every partition gets the refusal;
        # then READ per topic, before existence (KafkaApis.handleTxnOffsetCommitRequest).
        refusal = None
        if not allowed(authorizer, context, Op.WRITE, Type.TRANSACTIONAL_ID,
                       request.transactional_id):
            refusal = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not allowed(authorizer, context, Op.READ, Type.GROUP, request.group_id):
            refusal = ErrorCode.GROUP_AUTHORIZATION_FAILED
        if refusal is not None:
            return _txn_offset_commit_response(version, [
                (topic.name, p.partition_index, refusal)
                for topic in request.topics for p in topic.partitions
            ])
        names = {topic.name for topic in request.topics}
        refused = names - allowed_names(authorizer, context, Op.READ, Type.TOPIC, names)
    for topic in request.topics:
        if refused and topic.name in refused:
            outcomes.extend(
                (topic.name, p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for p in topic.partitions
            )
            continue
        info = deps.topics.get(topic.name)
        for p in topic.partitions:
            if info is None or not 0 <= p.partition_index < info.partitions:
                outcomes.append(
                    (topic.name, p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                )
                continue
            known.append(CommitPartition(
                topic.name, p.partition_index, p.committed_offset,
                getattr(p, "committed_leader_epoch", -1), p.committed_metadata,
            ))
    message = OffsetCommitRequest(
        group_id=request.group_id,
        partitions=tuple(known),
        generation_id=int(getattr(request, "generation_id", -1)),
        member_id=str(getattr(request, "member_id", "") or ""),
        group_instance_id=getattr(request, "group_instance_id", None),
        api_version=9,  # KIP-447 checks as OffsetCommit's newest version makes them
    )
    if known and version >= 5:
        # Transaction version 2: TxnOffsetCommit also does AddOffsetsToTxn's work (the client
        # sends no AddOffsetsToTxn), the group's partition joining the transaction first.
        added = await _add_offsets_partition(deps, request)
        if added is not ErrorCode.NONE:
            outcomes.extend((p.topic, p.partition, added) for p in known)
            known = []
    if known:
        try:
            answer = await deps.groups().txn_offset_commit(
                message, request.producer_id, request.producer_epoch
            )
            outcomes.extend(answer.partitions)
        except KafkaError as refused:
            code = _for_version(
                ErrorCode.PRODUCER_FENCED
                if refused.code is ErrorCode.INVALID_PRODUCER_EPOCH else refused.code,
                ApiKey.TXN_OFFSET_COMMIT, version,
            )
            outcomes.extend((p.topic, p.partition, code) for p in known)
    return _txn_offset_commit_response(version, outcomes)


_RETRIABLE_VERIFICATION = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
})


async def _add_offsets_partition(deps: TransactionDeps, request: Any) -> ErrorCode:
    """TxnOffsetCommit v5's implicit AddOffsetsToTxn. Errors as Kafka's group coordinator
    answers them: the transaction coordinator's retriable ones COORDINATOR_NOT_AVAILABLE (the
    client retries). In a cluster whose transaction coordinator is another broker the add is
    not made (the partition-leader side of KIP-890 calls no remote coordinator here; cluster
    mode advertises no transaction version 2, so its clients use AddOffsetsToTxn)."""
    partition = deps.groups().partition_of(request.group_id)
    outcomes = await _add(
        deps, request.transactional_id, request.producer_id, request.producer_epoch,
        [(OFFSETS_TOPIC, partition)], verify_only=False,
    )
    error = next(iter(outcomes.values()))
    if error is ErrorCode.NOT_COORDINATOR and deps.replication is not None:
        return ErrorCode.NONE
    if error in _RETRIABLE_VERIFICATION:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return error


def _txn_offset_commit_response(
    version: int, outcomes: list[tuple[str, int, ErrorCode]]
) -> Any:
    module = responses.response_module(ApiKey.TXN_OFFSET_COMMIT, version)
    by_topic: dict[str, list[Any]] = {}
    for topic, partition, error in outcomes:
        by_topic.setdefault(topic, []).append(responses.build(
            module.TxnOffsetCommitResponsePartition, partition_index=partition, error_code=error,
        ))
    topics = tuple(
        responses.build(module.TxnOffsetCommitResponseTopic, name=name, partitions=tuple(items))
        for name, items in by_topic.items()
    )
    return _response(ApiKey.TXN_OFFSET_COMMIT, version, topics=topics)


async def handle_write_txn_markers(
    deps: TransactionDeps, context: RequestContext, request: Any
) -> Any:
    """WriteTxnMarkers (27, v1-2): the partition-leader side of ending a transaction, the same
    path EndTxn's markers take (`broker/transactions/markers.py`); Kafka's admin client uses
    it to abort a hanging transaction. Unknown partitions are UNKNOWN_TOPIC_OR_PARTITION."""
    version = context.header.api_version
    authorizer = deps.authorizer
    if authorizer is not None and not (
        cluster_allowed(authorizer, context, Op.ALTER)
        or cluster_allowed(authorizer, context, Op.CLUSTER_ACTION)
    ):
        # ALTER on the cluster (the admin client's abortTransaction, KIP-664) or CLUSTER_ACTION
        # (brokers); else every partition is refused, as Kafka's error response.
        return _markers_response(version, [
            (marker.producer_id, {
                (topic.name, int(partition)): ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                for topic in marker.topics for partition in topic.partition_indexes
            })
            for marker in request.markers
        ])
    service = deps.transactions()
    results: list[tuple[int, dict[tuple[str, int], ErrorCode]]] = []
    for marker in request.markers:
        known, unknown = _split_known(deps, [
            _Named(topic.name, tuple(topic.partition_indexes)) for topic in marker.topics
        ])
        outcomes = dict.fromkeys(unknown, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        outcomes.update(dict.fromkeys(known, ErrorCode.NONE))
        outcomes.update(await write_markers(
            service.broker, known, marker.producer_id, marker.producer_epoch,
            bool(marker.transaction_result), marker.coordinator_epoch, deps.replication,
        ))
        results.append((marker.producer_id, outcomes))
    return _markers_response(version, results)


def _markers_response(
    version: int, results: list[tuple[int, dict[tuple[str, int], ErrorCode]]]
) -> Any:
    module = responses.response_module(ApiKey.WRITE_TXN_MARKERS, version)
    markers = []
    for producer_id, outcomes in results:
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), error in outcomes.items():
            by_topic.setdefault(topic, []).append(responses.build(
                module.WritableTxnMarkerPartitionResult, partition_index=partition,
                error_code=error,
            ))
        markers.append(responses.build(
            module.WritableTxnMarkerResult, producer_id=producer_id,
            topics=tuple(
                responses.build(module.WritableTxnMarkerTopicResult, name=name,
                                partitions=tuple(items))
                for name, items in by_topic.items()
            ),
        ))
    return responses.build(responses.response_class(ApiKey.WRITE_TXN_MARKERS, version),
                           markers=tuple(markers))


@dataclass(frozen=True, slots=True)
class _Named:
    name: str
    partitions: tuple[int, ...]


def verifier(
    transactions: Callable[[], TransactionService], cluster: bool = False,
) -> Callable[[str, int, int, tuple[str, int]], ErrorCode]:
    """For Produce: may this transactional producer write this partition (KIP-890 part 1)?
    In a cluster only a leader that also coordinates the id checks; elsewhere the write is
    taken as verified (Kafka's transaction.partition.verification.enable=false behaviour: the
    broker-to-coordinator AddPartitionsToTxn v4 call is not made; docs/transactions.md)."""

    def verify(
        txn_id: str, producer_id: int, producer_epoch: int, tp: tuple[str, int]
    ) -> ErrorCode:
        try:
            return transactions().verify_partition(txn_id, producer_id, producer_epoch, tp)
        except KafkaError as elsewhere:
            return ErrorCode.NONE if cluster else elsewhere.code

    return verify


def adder(
    transactions: Callable[[], TransactionService], cluster: bool = False,
) -> Callable[[str, int, int, tuple[str, int]], Awaitable[ErrorCode]]:
    """For Produce v12+ (transaction version 2): add the partition to the producer's
    transaction, as the AddPartitionsToTxn the client no longer sends. In a cluster a leader
    that does not coordinate the id does not call the coordinator (as `verifier`)."""

    async def add(
        txn_id: str, producer_id: int, producer_epoch: int, tp: tuple[str, int]
    ) -> ErrorCode:
        service = transactions()
        try:
            result = await service.run(txn_id, lambda coordinator, now_ms: (
                coordinator.add_partitions(txn_id, producer_id, producer_epoch, [tp], now_ms)
            ))
        except KafkaError as elsewhere:
            return ErrorCode.NONE if cluster else elsewhere.code
        return result.error

    return add


def handlers(deps: TransactionDeps) -> HandlerTable:
    return {
        ApiKey.ADD_PARTITIONS_TO_TXN: partial(handle_add_partitions_to_txn, deps),
        ApiKey.ADD_OFFSETS_TO_TXN: partial(handle_add_offsets_to_txn, deps),
        ApiKey.END_TXN: partial(handle_end_txn, deps),
        ApiKey.TXN_OFFSET_COMMIT: partial(handle_txn_offset_commit, deps),
        ApiKey.WRITE_TXN_MARKERS: partial(handle_write_txn_markers, deps),
    }


