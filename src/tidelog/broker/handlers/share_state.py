"""The share coordinator's APIs (KIP-932), served by the leader of the key's
`__share_group_state` partition (broker/share/state_coordinator.py), cluster mode only:
InitializeShareGroupState (83 v0), ReadShareGroupState (84 v0), WriteShareGroupState (85
v0-v1), DeleteShareGroupState (86 v0), ReadShareGroupStateSummary (87 v0-v1).

Broker-to-broker: CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every
partition. Errors are per partition, Kafka's codes: NOT_COORDINATOR (another broker leads the
key's partition), COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE (too few in-sync
replicas or a replication timeout), FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH,
INVALID_REQUEST (malformed state batches). A request holds at most MAX_PARTITIONS partitions.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from tidelog.broker.handlers.authorization import cluster_allowed
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.share.state_coordinator import ShareStateCoordinator
from tidelog.coordinator.share_records import PersistedStateBatch
from tidelog.coordinator.share_state import ReadResult, ShareStateStore
from tidelog.errors import ErrorCode, KafkaError
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.security.acl import AclOperation
from tidelog.security.authorizer import Authorizer

MAX_PARTITIONS = 10_000


@dataclass(frozen=True, slots=True)
class ShareStateDeps:
    coordinator: Callable[[], ShareStateCoordinator]
    authorizer: Authorizer | None = None


def _refused(deps: ShareStateDeps, context: RequestContext) -> bool:
    return deps.authorizer is not None and not cluster_allowed(
        deps.authorizer, context, AclOperation.CLUSTER_ACTION)


def _partitions(request: Any) -> int:
    return sum(len(t.partitions) for t in request.topics)


def _error(error: Exception) -> ErrorCode:
    return error.code if isinstance(error, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR


async def _each(
    deps: ShareStateDeps, context: RequestContext, request: Any,
    answer: Callable[[uuid.UUID, Any], Any],
) -> dict[uuid.UUID, list[Any]]:
    """Per partition, `answer(topic_id, partition)`; topic id -> its partitions' results."""
    results: dict[uuid.UUID, list[Any]] = {}
    for topic in request.topics:
        topic_id = topic.topic_id or uuid.UUID(int=0)
        for item in topic.partitions:
            results.setdefault(topic_id, []).append(await answer(topic_id, item))
    return results


def _by_topic(api_key: int, version: int, result_class: Any,
              results: dict[uuid.UUID, list[Any]]) -> Any:
    """The response: one result per topic id holding its partitions' answers."""
    return responses.build(
        responses.response_class(api_key, version),
        results=tuple(responses.build(result_class, topic_id=topic_id, partitions=tuple(parts))
                      for topic_id, parts in results.items()),
    )


async def handle_write(deps: ShareStateDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.WRITE_SHARE_GROUP_STATE, version)
    refused = _refused(deps, context) or _partitions(request) > MAX_PARTITIONS
    code_if_refused = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED if _refused(deps, context)
                       else ErrorCode.INVALID_REQUEST)
    coordinator = deps.coordinator()

    async def answer(topic_id: uuid.UUID, item: Any) -> Any:
        code = code_if_refused if refused else ErrorCode.NONE
        if not refused:
            batches = tuple(PersistedStateBatch(int(b.first_offset), int(b.last_offset),
                                                int(b.delivery_state), int(b.delivery_count))
                            for b in item.state_batches)
            if any(b.delivery_state not in (0, 2, 3, 4) for b in batches):
                code = ErrorCode.INVALID_REQUEST
            else:
                key = (request.group_id, topic_id, int(item.partition))

                def write(store: ShareStateStore, now_ms: int) -> tuple[ErrorCode, list[Any]]:
                    return store.write(key, int(item.state_epoch), int(item.leader_epoch),
                                       int(item.start_offset), batches, now_ms)

                try:
                    code = await coordinator.run(key, write)
                except KafkaError as error:
                    code = _error(error)
        return responses.build(module.PartitionResult, partition=item.partition,
                               error_code=code, error_message=None)

    results = await _each(deps, context, request, answer)
    return _by_topic(ApiKey.WRITE_SHARE_GROUP_STATE, version, module.WriteStateResult, results)


async def _read(deps: ShareStateDeps, context: RequestContext, request: Any,
                key: tuple[str, uuid.UUID, int], leader_epoch: int) -> ReadResult:
    if _refused(deps, context):
        return ReadResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)

    def read(store: ShareStateStore, now_ms: int) -> tuple[ReadResult, list[Any]]:
        return store.read(key, leader_epoch, now_ms)

    try:
        return await deps.coordinator().run(key, read)
    except KafkaError as error:
        return ReadResult(_error(error))


async def handle_read(deps: ShareStateDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.READ_SHARE_GROUP_STATE, version)
    too_many = _partitions(request) > MAX_PARTITIONS

    async def answer(topic_id: uuid.UUID, item: Any) -> Any:
        key = (request.group_id, topic_id, int(item.partition))
        found = (ReadResult(ErrorCode.INVALID_REQUEST) if too_many
                 else await _read(deps, context, request, key, int(item.leader_epoch)))
        return responses.build(
            module.PartitionResult, partition=item.partition, error_code=found.error,
            error_message=None, state_epoch=found.state_epoch, start_offset=found.start_offset,
            state_batches=tuple(
                responses.build(module.StateBatch, first_offset=b.first_offset,
                                last_offset=b.last_offset, delivery_state=b.delivery_state,
                                delivery_count=b.delivery_count)
                for b in found.batches),
        )

    results = await _each(deps, context, request, answer)
    return _by_topic(ApiKey.READ_SHARE_GROUP_STATE, version, module.ReadStateResult, results)


async def handle_read_summary(deps: ShareStateDeps, context: RequestContext,
                              request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, version)
    too_many = _partitions(request) > MAX_PARTITIONS

    async def answer(topic_id: uuid.UUID, item: Any) -> Any:
        key = (request.group_id, topic_id, int(item.partition))
        # A summary never records a leader epoch (-1: no fencing either).
        found = (ReadResult(ErrorCode.INVALID_REQUEST) if too_many
                 else await _read(deps, context, request, key, -1))
        fields: dict[str, Any] = {
            "partition": item.partition, "error_code": found.error, "error_message": None,
            "state_epoch": found.state_epoch, "leader_epoch": found.leader_epoch,
            "start_offset": found.start_offset,
        }
        if version >= 1:  # records past the SPSO already acknowledged or archived
            fields["delivery_complete_count"] = sum(
                b.last_offset - b.first_offset + 1 for b in found.batches
                if b.delivery_state in (2, 4))
        return responses.build(module.PartitionResult, **fields)

    results = await _each(deps, context, request, answer)
    return _by_topic(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, version,
                     module.ReadStateSummaryResult, results)


async def handle_initialize(deps: ShareStateDeps, context: RequestContext,
                            request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.INITIALIZE_SHARE_GROUP_STATE, version)
    refused = _refused(deps, context)
    too_many = _partitions(request) > MAX_PARTITIONS

    async def answer(topic_id: uuid.UUID, item: Any) -> Any:
        key = (request.group_id, topic_id, int(item.partition))
        if refused or too_many:
            code = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED if refused
                    else ErrorCode.INVALID_REQUEST)
        else:
            def initialize(store: ShareStateStore, now_ms: int) -> tuple[ErrorCode, list[Any]]:
                return store.initialize(key, int(item.state_epoch), int(item.start_offset),
                                        now_ms)

            try:
                code = await deps.coordinator().run(key, initialize)
            except KafkaError as error:
                code = _error(error)
        return responses.build(module.PartitionResult, partition=item.partition,
                               error_code=code, error_message=None)

    results = await _each(deps, context, request, answer)
    return _by_topic(ApiKey.INITIALIZE_SHARE_GROUP_STATE, version,
                     module.InitializeStateResult, results)


async def handle_delete(deps: ShareStateDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.DELETE_SHARE_GROUP_STATE, version)
    refused = _refused(deps, context)
    too_many = _partitions(request) > MAX_PARTITIONS

    async def answer(topic_id: uuid.UUID, item: Any) -> Any:
        key = (request.group_id, topic_id, int(item.partition))
        if refused or too_many:
            code = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED if refused
                    else ErrorCode.INVALID_REQUEST)
        else:
            def delete(store: ShareStateStore, _now_ms: int) -> tuple[ErrorCode, list[Any]]:
                return ErrorCode.NONE, list(store.delete(key))

            try:
                code = await deps.coordinator().run(key, delete)
            except KafkaError as error:
                code = _error(error)
        return responses.build(module.PartitionResult, partition=item.partition,
                               error_code=code, error_message=None)

    results = await _each(deps, context, request, answer)
    return _by_topic(ApiKey.DELETE_SHARE_GROUP_STATE, version, module.DeleteStateResult, results)


def handlers(deps: ShareStateDeps) -> HandlerTable:
    return {
        ApiKey.INITIALIZE_SHARE_GROUP_STATE: partial(handle_initialize, deps),
        ApiKey.READ_SHARE_GROUP_STATE: partial(handle_read, deps),
        ApiKey.WRITE_SHARE_GROUP_STATE: partial(handle_write, deps),
        ApiKey.DELETE_SHARE_GROUP_STATE: partial(handle_delete, deps),
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: partial(handle_read_summary, deps),
    }
