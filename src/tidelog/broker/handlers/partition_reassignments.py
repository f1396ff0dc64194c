"""AlterPartitionReassignments (key 45, v0-1) and ListPartitionReassignments (46, v0).

The checks and answers both modes share, and the single node's handlers. Kafka's rules
(KafkaController.onApiPartitionReassignment / ZkAdminManager):
- ALTER on the cluster to alter, DESCRIBE on the cluster to list, else a top-level
  CLUSTER_AUTHORIZATION_FAILED (every partition answers it too);
- per partition: UNKNOWN_TOPIC_OR_PARTITION; `replicas` null cancels (NO_REASSIGNMENT_IN_PROGRESS
  when none is in flight); an empty list, a duplicate or a broker that is not alive is
  INVALID_REPLICA_ASSIGNMENT; with v1's `allow_replication_factor_change` false a target of
  another size than the original replicas is INVALID_REPLICATION_FACTOR.
A single node is every partition's only replica: a move to itself is already done, anything
else names a broker that is not alive, and nothing is ever in flight. The cluster handlers
are in cluster_reassignments.py. Runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from tidelog.broker.handlers.authorization import Op, cluster_allowed
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.topic_registry import TopicRegistry
from tidelog.errors import ErrorCode, KafkaError
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.security.authorizer import Authorizer
from tidelog.types import TopicPartition


@dataclass(frozen=True, slots=True)
class Placement:
    """A partition's replicas as its topic znode lists them (target + origin while moving)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def origin(self) -> tuple[int, ...]:
        return tuple(b for b in self.replicas if b not in self.adding)


Lookup = Callable[[TopicPartition], Placement | None]


def target_for(
    current: Placement | None,
    requested: Iterable[int] | None,
    live: Collection[int],
    allow_replication_factor_change: bool,
) -> tuple[int, ...]:
    """The replicas to move to, or KafkaError with Kafka's code and message."""
    if current is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unknown topic or partition.")
    if requested is None:
        if not (current.adding or current.removing):
            raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                             "No reassignment in progress to cancel.")
        return current.origin
    target = tuple(int(b) for b in requested)
    if not target:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "Empty replica list specified in partition reassignment.")
    if len(set(target)) != len(target):
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "Duplicate replica ids in partition reassignment replica list: "
                         f"{list(target)}")
    if not set(target) <= set(live):
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "The manual partition assignment includes broker(s) that are not "
                         f"alive: {sorted(set(target) - set(live))}")
    if not allow_replication_factor_change and len(target) != len(current.origin):
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"The replication factor is changed from {len(current.origin)} to "
                         f"{len(target)}")
    return target


def refused(authorizer: Authorizer | None, context: RequestContext, operation: Any) -> bool:
    return authorizer is not None and not cluster_allowed(authorizer, context, operation)


def alter_response(
    version: int,
    outcomes: dict[TopicPartition, tuple[ErrorCode, str | None]],
    order: list[TopicPartition],
    top: ErrorCode = ErrorCode.NONE,
    top_message: str | None = None,
    allow_replication_factor_change: bool = True,
) -> Any:
    module = responses.response_module(ApiKey.ALTER_PARTITION_REASSIGNMENTS, version)
    by_topic: dict[str, list[Any]] = {}
    for tp in order:
        code, message = outcomes[tp]
        by_topic.setdefault(tp.topic, []).append(responses.build(
            module.ReassignablePartitionResponse, partition_index=tp.partition,
            error_code=code, error_message=message,
        ))
    return responses.build(
        responses.response_class(ApiKey.ALTER_PARTITION_REASSIGNMENTS, version),
        throttle_time=0, error_code=top, error_message=top_message,
        allow_replication_factor_change=allow_replication_factor_change,  # v1: echoed
        responses=tuple(
            responses.build(module.ReassignableTopicResponse, name=name, partitions=tuple(parts))
            for name, parts in by_topic.items()
        ),
    )


def requested_partitions(request: Any) -> list[tuple[TopicPartition, tuple[int, ...] | None]]:
    return [
        (TopicPartition(topic.name, int(item.partition_index)),
         None if item.replicas is None else tuple(int(b) for b in item.replicas))
        for topic in request.topics
        for item in topic.partitions
    ]


def list_response(
    version: int,
    ongoing: Iterable[tuple[TopicPartition, Placement]],
    top: ErrorCode = ErrorCode.NONE,
) -> Any:
    module = responses.response_module(ApiKey.LIST_PARTITION_REASSIGNMENTS, version)
    by_topic: dict[str, list[Any]] = {}
    for tp, placement in sorted(ongoing, key=lambda item: item[0]):
        by_topic.setdefault(tp.topic, []).append(responses.build(
            module.OngoingPartitionReassignment, partition_index=tp.partition,
            replicas=placement.replicas, adding_replicas=placement.adding,
            removing_replicas=placement.removing,
        ))
    return responses.build(
        responses.response_class(ApiKey.LIST_PARTITION_REASSIGNMENTS, version),
        throttle_time=0, error_code=top,
        error_message=None if top == ErrorCode.NONE else top.name,
        topics=tuple(
            responses.build(module.OngoingTopicReassignment, name=name, partitions=tuple(parts))
            for name, parts in by_topic.items()
        ),
    )


# ---------------------------------------------------------------- single node


@dataclass(frozen=True, slots=True)
class SingleNodeReassignmentDeps:
    node_id: int
    topics: TopicRegistry
    authorizer: Authorizer | None = None


def _single_node_placement(
    deps: SingleNodeReassignmentDeps, tp: TopicPartition
) -> Placement | None:
    info = deps.topics.get(tp.topic)
    if info is None or not 0 <= tp.partition < info.partitions:
        return None
    return Placement((deps.node_id,))


async def handle_alter_single_node(
    deps: SingleNodeReassignmentDeps, context: RequestContext, request: Any
) -> Any:
    version = context.header.api_version
    entries = requested_partitions(request)
    order = list(dict.fromkeys(tp for tp, _ in entries))
    allow = bool(getattr(request, "allow_replication_factor_change", True))
    if refused(deps.authorizer, context, Op.ALTER):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return alter_response(version, {tp: (code, None) for tp in order}, order, code,
                              allow_replication_factor_change=allow)
    outcomes: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
    for tp, replicas in entries:
        try:
            target_for(_single_node_placement(deps, tp), replicas, (deps.node_id,), allow)
            outcomes[tp] = (ErrorCode.NONE, None)  # already its only replica
        except KafkaError as error:
            outcomes[tp] = (error.code, error.message)
    return alter_response(version, outcomes, order, allow_replication_factor_change=allow)


async def handle_list_single_node(
    deps: SingleNodeReassignmentDeps, context: RequestContext, request: Any
) -> Any:
    version = context.header.api_version
    if refused(deps.authorizer, context, Op.DESCRIBE):
        return list_response(version, (), ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return list_response(version, ())


def handlers(deps: SingleNodeReassignmentDeps) -> HandlerTable:
    return {
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: partial(handle_alter_single_node, deps),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: partial(handle_list_single_node, deps),
    }
