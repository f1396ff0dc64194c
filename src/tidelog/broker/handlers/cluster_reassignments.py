"""Cluster-mode AlterPartitionReassignments and ListPartitionReassignments.

Any broker answers (Kafka's ZooKeeper-mode admin path, as for DeleteTopics): the request is
checked against this broker's view (partition_reassignments.target_for), written to
`/admin/reassign_partitions` (one request at a time: while an earlier one is still there the
write is retried until the controller has taken it), and answered once this broker's view
shows the moves started (the topic znode lists them), so a ListPartitionReassignments that
follows through the same broker sees them. The controller carries the moves out
(cluster/controller_reassign.py). Runs on the event loop; ZooKeeper writes on a worker thread.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from functools import partial
from typing import Any

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from tidelog.broker.handlers.authorization import Op
from tidelog.broker.handlers.cluster_common import ClusterDeps, joined
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.handlers.partition_reassignments import (
    Placement,
    alter_response,
    list_response,
    refused,
    requested_partitions,
    target_for,
)
from tidelog.broker.replication.cluster_agent import ClusterAgent, ClusterView
from tidelog.errors import ErrorCode, KafkaError
from tidelog.protocol.api_keys import ApiKey
from tidelog.types import TopicPartition

REQUEST_RETRY_S = 0.05  # while an earlier request waits for the controller to take it


def placement(view: ClusterView, tp: TopicPartition) -> Placement | None:
    assignment = view.topics.get(tp.topic)
    if assignment is None or tp.partition not in assignment.partitions:
        return None
    return Placement(
        assignment.partitions[tp.partition],
        assignment.adding_replicas.get(tp.partition, ()),
        assignment.removing_replicas.get(tp.partition, ()),
    )


def _started(view: ClusterView, targets: dict[TopicPartition, tuple[int, ...]]) -> bool:
    for tp, target in targets.items():
        assignment = view.topics.get(tp.topic)
        if assignment is None or tp.partition not in assignment.partitions:
            return True  # deleted meanwhile: nothing more to wait for
        if assignment.target_replicas(tp.partition) != target:
            return False
    return True


async def _write_request(
    agent: ClusterAgent, targets: dict[TopicPartition, tuple[int, ...]], deadline: float
) -> bool:
    loop = asyncio.get_running_loop()
    while True:
        try:
            if await asyncio.to_thread(agent.request_reassignment, targets):
                return True
        except (KazooException, KazooTimeoutError) as error:
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, str(error)) from None
        if loop.time() + REQUEST_RETRY_S >= deadline:
            return False
        await asyncio.sleep(REQUEST_RETRY_S)


async def handle_alter(deps: ClusterDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    entries = requested_partitions(request)
    order = list(dict.fromkeys(tp for tp, _ in entries))
    allow = bool(getattr(request, "allow_replication_factor_change", True))
    if refused(deps.authorizer, context, Op.ALTER):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return alter_response(version, {tp: (code, None) for tp in order}, order, code,
                              allow_replication_factor_change=allow)
    replication = joined(deps)
    view = replication.view
    agent = replication.agent
    assert view is not None and agent is not None
    timeout = request.timeout
    timeout_ms = int(timeout.total_seconds() * 1000) if isinstance(timeout, timedelta) else timeout
    timeout_ms = max(0, min(int(timeout_ms), 300_000))
    outcomes: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
    targets: dict[TopicPartition, tuple[int, ...]] = {}
    for tp, replicas in entries:
        try:
            targets[tp] = target_for(placement(view, tp), replicas, set(view.brokers), allow)
        except KafkaError as error:
            outcomes[tp] = (error.code, error.message)
    if targets:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        try:
            written = await _write_request(agent, targets, deadline)
        except KafkaError as error:
            written, code = False, error.code
        else:
            code = ErrorCode.REQUEST_TIMED_OUT
        if written:
            remaining_ms = max(0, int((deadline - loop.time()) * 1000))
            if await replication.wait_for_view(partial(_started, targets=targets), remaining_ms):
                code = ErrorCode.NONE
        for tp in targets:
            outcomes[tp] = (code, None)
    return alter_response(version, outcomes, order, allow_replication_factor_change=allow)


async def handle_list(deps: ClusterDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    if refused(deps.authorizer, context, Op.DESCRIBE):
        return list_response(version, (), ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    view = joined(deps).view
    assert view is not None
    if request.topics is None:
        wanted = [
            TopicPartition(topic, p)
            for topic, assignment in view.topics.items()
            for p in assignment.partitions
        ]
    else:
        wanted = [
            TopicPartition(topic.name, int(p))
            for topic in request.topics
            for p in topic.partition_indexes
        ]
    ongoing = []
    for tp in dict.fromkeys(wanted):
        current = placement(view, tp)
        if current is not None and (current.adding or current.removing):
            ongoing.append((tp, current))
    return list_response(version, ongoing)


def handlers(deps: ClusterDeps) -> HandlerTable:
    return {
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: partial(handle_alter, deps),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: partial(handle_list, deps),
    }
