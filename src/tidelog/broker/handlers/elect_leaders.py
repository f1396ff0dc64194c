"""ElectLeaders (key 43, v0-2) on a single node: there is no other replica to elect.

A lone broker is every partition's preferred leader and only replica, so each named partition
answers ELECTION_NOT_NEEDED (preferred or unclean alike), a partition or topic it does not
have UNKNOWN_TOPIC_OR_PARTITION; `topic_partitions` null (every partition) answers every topic
with no partition in it, as Kafka's controller does (it leaves out the partitions that needed
no election).
ALTER on the cluster is required (KafkaApis: CLUSTER_AUTHORIZATION_FAILED at the top level and
for every named partition). Runs on the event loop; reads the topic registry only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from tidelog.broker.handlers.authorization import Op, cluster_allowed
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.topic_registry import TopicRegistry
from tidelog.errors import ErrorCode
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.security.authorizer import Authorizer


@dataclass(frozen=True, slots=True)
class ElectLeadersDeps:
    topics: TopicRegistry
    authorizer: Authorizer | None = None  # None: no ACL checks (authorizer.class.name unset)


def _outcome(topics: TopicRegistry, topic: str, partition: int) -> ErrorCode:
    info = topics.get(topic)
    if info is None or not 0 <= partition < info.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return ErrorCode.ELECTION_NOT_NEEDED


async def handle_elect_leaders(
    deps: ElectLeadersDeps, context: RequestContext, request: Any
) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.ELECT_LEADERS, version)
    top = ErrorCode.NONE
    if deps.authorizer is not None and not cluster_allowed(deps.authorizer, context, Op.ALTER):
        top = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    results = []
    if request.topic_partitions is None and top == ErrorCode.NONE:
        results = [
            responses.build(module.ReplicaElectionResult, topic=info.name, partition_result=())
            for info in sorted(deps.topics.all(), key=lambda info: info.name)
        ]
    for entry in request.topic_partitions or ():
        outcomes = [
            (int(partition), top if top != ErrorCode.NONE else
             _outcome(deps.topics, entry.topic, int(partition)))
            for partition in entry.partitions
        ]
        results.append(
            responses.build(
                module.ReplicaElectionResult,
                topic=entry.topic,
                partition_result=tuple(
                    responses.build(
                        module.PartitionResult,
                        partition_id=partition,
                        error_code=code,
                        error_message=None,
                    )
                    for partition, code in outcomes
                ),
            )
        )
    return responses.build(
        responses.response_class(ApiKey.ELECT_LEADERS, version),
        throttle_time=0,
        error_code=top,
        replica_election_results=tuple(results),
    )


def handlers(deps: ElectLeadersDeps) -> HandlerTable:
    return {ApiKey.ELECT_LEADERS: partial(handle_elect_leaders, deps)}
