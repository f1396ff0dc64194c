"""Transaction admin APIs: DescribeTransactions (65, v0), ListTransactions (66, v0-1) from
the transaction coordinator's state, and DescribeProducers (61, v0) from each partition's
producer state (what Kafka's `kafka-transactions` tool reads to find hanging transactions).
State names are Kafka's TransactionState names.

In a cluster each broker answers for what it holds, as Kafka's brokers do: DescribeTransactions
for the ids it coordinates (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS for the others),
ListTransactions the ids of the `__transaction_state` partitions it leads (the admin client
asks every broker), DescribeProducers the partitions it leads (NOT_LEADER_OR_FOLLOWER).

ACLs (handlers/authorization.py, KafkaApis): DescribeTransactions DESCRIBE on each id, its
partitions listed only for topics the caller may DESCRIBE; ListTransactions lists only ids the
caller may DESCRIBE; DescribeProducers READ on each topic, before existence.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from tidelog.broker import clock
from tidelog.broker.handlers.authorization import Op, Type, allowed, allowed_names
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.topic_registry import TopicRegistry
from tidelog.coordinator.txn_records import TransactionState, group_partitions
from tidelog.errors import ErrorCode, KafkaError
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.security.authorizer import Authorizer
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from tidelog.broker.services import PartitionReplication
    from tidelog.broker.transactions.service import TransactionService

STATE_NAMES = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_MAX_IDS = 10_000  # ids named in one DescribeTransactions (the frame bounds it too)


@dataclass(frozen=True, slots=True)
class TransactionAdminDeps:
    topics: TopicRegistry
    transactions: Callable[[], TransactionService]
    authorizer: Authorizer | None = None  # None: no ACL checks (authorizer.class.name unset)
    replication: PartitionReplication | None = None  # cluster mode: leaders answer


def _response(api_key: ApiKey, version: int, **fields: Any) -> Any:
    return responses.build(responses.response_class(api_key, version), throttle_time=0, **fields)


def _time(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


async def handle_describe_transactions(
    deps: TransactionAdminDeps, context: RequestContext, request: Any
) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.DESCRIBE_TRANSACTIONS, version)
    service = deps.transactions()
    authorizer = deps.authorizer
    states = []
    for txn_id in list(request.transactional_ids)[:_MAX_IDS]:
        refused = authorizer is not None and not allowed(
            authorizer, context, Op.DESCRIBE, Type.TRANSACTIONAL_ID, txn_id
        )
        error = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if refused
                 else ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        try:
            metadata = None if refused else service.describe(txn_id)
        except KafkaError as elsewhere:  # another broker coordinates it, or it is loading
            metadata, error = None, elsewhere.code
        if metadata is None:
            # Kafka sets only the error: every other field keeps its schema default (0, "").
            states.append(responses.build(
                module.TransactionState,
                error_code=error,
                transactional_id=txn_id, transaction_state="", transaction_timeout=0,
                transaction_start_time=_time(0), producer_id=0, producer_epoch=0,
            ))
            continue
        entries = group_partitions(metadata.partitions)
        if authorizer is not None:
            visible = allowed_names(
                authorizer, context, Op.DESCRIBE, Type.TOPIC, (e.topic for e in entries)
            )
            entries = tuple(entry for entry in entries if entry.topic in visible)
        topics = tuple(
            responses.build(module.TopicData, topic=entry.topic,
                            partitions=tuple(entry.partition_ids))
            for entry in entries
        )
        states.append(responses.build(
            module.TransactionState, error_code=ErrorCode.NONE, transactional_id=txn_id,
            transaction_state=STATE_NAMES[metadata.state],
            transaction_timeout=metadata.timeout_ms,
            transaction_start_time=_time(metadata.start_ms),
            producer_id=metadata.producer_id, producer_epoch=metadata.producer_epoch,
            topics=topics,
        ))
    return _response(ApiKey.DESCRIBE_TRANSACTIONS, version, transaction_states=tuple(states))


async def handle_list_transactions(
    deps: TransactionAdminDeps, context: RequestContext, request: Any
) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.LIST_TRANSACTIONS, version)
    by_name = {name: state for state, name in STATE_NAMES.items()}
    wanted_states = {by_name[n] for n in request.state_filters if n in by_name}
    unknown = tuple(n for n in request.state_filters if n not in by_name)
    producers = set(request.producer_id_filters)
    duration_ms = int(getattr(request, "duration_filter", -1))
    now_ms = clock.now_ms()
    authorizer = deps.authorizer
    listed = []
    for txn_id, metadata in sorted(deps.transactions().all_transactions().items()):
        if authorizer is not None and not allowed(
            authorizer, context, Op.DESCRIBE, Type.TRANSACTIONAL_ID, txn_id
        ):
            continue
        if wanted_states and metadata.state not in wanted_states:
            continue
        if producers and metadata.producer_id not in producers:
            continue
        if duration_ms >= 0 and now_ms - metadata.start_ms < duration_ms:
            continue
        listed.append(responses.build(
            module.TransactionState, transactional_id=txn_id, producer_id=metadata.producer_id,
            transaction_state=STATE_NAMES[metadata.state],
        ))
    return _response(ApiKey.LIST_TRANSACTIONS, version, error_code=ErrorCode.NONE,
                     unknown_state_filters=unknown, transaction_states=tuple(listed))


async def handle_describe_producers(
    deps: TransactionAdminDeps, context: RequestContext, request: Any
) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.DESCRIBE_PRODUCERS, version)
    refused: set[str] = set()
    if deps.authorizer is not None:
        names = {topic.name for topic in request.topics}
        refused = names - allowed_names(deps.authorizer, context, Op.READ, Type.TOPIC, names)
    topics = []
    for topic in request.topics:
        partitions = []
        for index in topic.partition_indexes:
            try:
                if refused and topic.name in refused:
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                if deps.replication is not None:
                    deps.replication.check_produce(TopicPartition(topic.name, index), 0)
                state = deps.topics.partition_log(topic.name, index).producer_state
            except KafkaError as error:
                partitions.append(responses.build(
                    module.PartitionResponse, partition_index=index, error_code=error.code,
                    error_message=None, active_producers=(),
                ))
                continue
            active = tuple(
                responses.build(
                    module.ProducerState, producer_id=producer_id,
                    producer_epoch=entry.producer_epoch, last_sequence=entry.last_sequence,
                    last_timestamp=entry.last_timestamp,
                    coordinator_epoch=entry.coordinator_epoch,
                    current_txn_start_offset=entry.current_txn_first_offset,
                )
                for producer_id, entry in sorted(state.producers.items())
            )
            partitions.append(responses.build(
                module.PartitionResponse, partition_index=index, error_code=ErrorCode.NONE,
                error_message=None, active_producers=active,
            ))
        topics.append(responses.build(module.TopicResponse, name=topic.name,
                                      partitions=tuple(partitions)))
    return _response(ApiKey.DESCRIBE_PRODUCERS, version, topics=tuple(topics))


def handlers(deps: TransactionAdminDeps) -> HandlerTable:
    return {
        ApiKey.DESCRIBE_TRANSACTIONS: partial(handle_describe_transactions, deps),
        ApiKey.LIST_TRANSACTIONS: partial(handle_list_transactions, deps),
        ApiKey.DESCRIBE_PRODUCERS: partial(handle_describe_producers, deps),
    }
