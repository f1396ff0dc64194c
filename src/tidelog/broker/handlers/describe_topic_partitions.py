"""DescribeTopicPartitions (key 75, v0; KIP-966): topics and partitions in pages, as Kafka's
DescribeTopicPartitionsRequestHandler answers, on a single node and in a cluster (where
`partition_rows` reads leader, epoch, replicas, ISR and offline replicas from the cluster view).

- No topics named: every topic the caller may DESCRIBE, by name; named topics: those, by name,
  an unknown one UNKNOWN_TOPIC_OR_PARTITION, one the caller may not DESCRIBE
  TOPIC_AUTHORIZATION_FAILED (with a zero topic id, appended after the others).
- Topics sort before the cursor's are skipped; the cursor's topic starts at its partition.
  A cursor topic missing from the named topics, or a negative cursor partition: every named
  topic answers INVALID_REQUEST.
- At most `response_partition_limit` partitions (at least 1, at most Kafka's
  `max.request.partition.size.limit` default 2000) per answer; where the limit cuts,
  `next_cursor` names the next topic and partition.
- A lone broker leads every partition at epoch 0, the only replica and ISR; no eligible
  leader replicas (empty lists, as a KRaft Kafka 4 with ELR answers for a healthy ISR; a
  ZooKeeper-mode cluster has no ELR either).

Runs on the event loop; reads the topic registry only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from tidelog.broker.handlers.authorization import Type, resource_operations
from tidelog.broker.handlers.context import (
    ALL_TOPIC_OPERATIONS,
    OPERATIONS_NOT_PROVIDED,
    HandlerTable,
    RequestContext,
)
from tidelog.broker.handlers.metadata import LEADER_EPOCH, described_topics
from tidelog.broker.metadata import TopicInfo
from tidelog.broker.topic_registry import TopicRegistry
from tidelog.errors import ErrorCode
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.security.authorizer import Authorizer

MAX_PARTITIONS_PER_ANSWER = 2000  # Kafka's max.request.partition.size.limit default


@dataclass(frozen=True, slots=True)
class PartitionRow:
    error: ErrorCode
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeTopicPartitionsDeps:
    node_id: int
    topics: TopicRegistry
    authorizer: Authorizer | None = None  # None: no ACL checks (authorizer.class.name unset)
    # A cluster's view of one partition (topic, partition); None: this lone broker leads all.
    partition_rows: Callable[[str, int], PartitionRow] | None = None


def _partitions(module: Any, deps: DescribeTopicPartitionsDeps, topic: str,
                indexes: range) -> Iterator[Any]:
    node_id = deps.node_id
    for index in indexes:
        row = (
            PartitionRow(ErrorCode.NONE, node_id, LEADER_EPOCH, (node_id,), (node_id,))
            if deps.partition_rows is None else deps.partition_rows(topic, index)
        )
        yield responses.build(
            module.DescribeTopicPartitionsResponsePartition,
            error_code=row.error,
            partition_index=index,
            leader_id=row.leader,
            leader_epoch=row.leader_epoch,
            replica_nodes=row.replicas,
            isr_nodes=row.isr,
            eligible_leader_replicas=(),
            last_known_elr=(),
            offline_replicas=row.offline,
        )


def _topic(
    module: Any,
    code: ErrorCode,
    name: str,
    info: TopicInfo | None,
    parts: Any,
    operations: int = OPERATIONS_NOT_PROVIDED,
) -> Any:
    return responses.build(
        module.DescribeTopicPartitionsResponseTopic,
        error_code=code,
        name=name,
        topic_id=info.topic_id if info is not None else None,
        is_internal=info.internal if info is not None else False,
        partitions=tuple(parts),
        topic_authorized_operations=operations,
    )


async def handle_describe_topic_partitions(
    deps: DescribeTopicPartitionsDeps, context: RequestContext, request: Any
) -> Any:
    module = responses.response_module(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0)
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    fetch_all = not request.topics
    if fetch_all:
        candidates = {info.name for info in deps.topics.all()}
    else:
        candidates = {topic.name for topic in request.topics}
    names = sorted(name for name in candidates if name >= cursor_topic)
    bad_cursor = cursor is not None and (
        (not fetch_all and cursor_topic not in names) or cursor.partition_index < 0
    )
    if bad_cursor:
        # Kafka's error response: every named topic with INVALID_REQUEST, no cursor.
        return responses.build(
            responses.response_class(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0),
            throttle_time=0,
            topics=tuple(
                _topic(module, ErrorCode.INVALID_REQUEST, topic.name, None, ())
                for topic in request.topics
            ),
            next_cursor=None,
        )
    allowed = described_topics(deps.authorizer, context, names)
    refused = [name for name in names if name not in allowed]
    remaining = max(min(MAX_PARTITIONS_PER_ANSWER, int(request.response_partition_limit)), 1)
    topics: list[Any] = []
    next_cursor: tuple[str, int] | None = None
    def operations(name: str) -> int:  # KIP-430, always given here (no include flag)
        return resource_operations(
            deps.authorizer, context, True, Type.TOPIC, name, ALL_TOPIC_OPERATIONS
        )

    for name in (name for name in names if name in allowed):
        if remaining <= 0:
            next_cursor = (name, 0)
            break
        info = deps.topics.get(name)
        if info is None:
            if not fetch_all:
                topics.append(_topic(
                    module, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name, None, (), operations(name)
                ))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        end = min(start + remaining, info.partitions)
        parts = _partitions(module, deps, name, range(start, end))
        topics.append(_topic(module, ErrorCode.NONE, name, info, parts, operations(name)))
        remaining -= max(0, end - start)
        if end < info.partitions:
            next_cursor = (name, end)
            break
    answered = topics + [
        _topic(module, ErrorCode.TOPIC_AUTHORIZATION_FAILED, name, None, ()) for name in refused
    ]
    cursor_out = None
    if next_cursor is not None:
        topic_name, partition_index = next_cursor
        cursor_out = responses.build(
            module.Cursor, topic_name=topic_name, partition_index=partition_index
        )
    return responses.build(
        responses.response_class(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0),
        throttle_time=0,
        topics=tuple(answered),
        next_cursor=cursor_out,
    )


def handlers(deps: DescribeTopicPartitionsDeps) -> HandlerTable:
    return {ApiKey.DESCRIBE_TOPIC_PARTITIONS: partial(handle_describe_topic_partitions, deps)}
