"""ElectLeaders (key 43, v0-2) in a cluster, answered by any broker, as a ZooKeeper-mode Kafka.

Preferred elections (election_type 0): each partition whose first replica (its preferred
leader) already leads answers ELECTION_NOT_NEEDED; one whose preferred leader is not live or
not in the ISR PREFERRED_LEADER_NOT_AVAILABLE; the others are written to
`/admin/preferred_replica_election` (Kafka's ZooKeeper-mode request), which the controller
takes, elects (`ClusterMember.elect_preferred_leaders`: a conditional state write, leader epoch
+1) and deletes. The answer waits until this broker's view shows the new leaders, at most the
request's `timeout` (then REQUEST_TIMED_OUT for those not moved yet).
Unclean elections (election_type 1): a partition with a live leader answers
ELECTION_NOT_NEEDED; one without ELIGIBLE_LEADERS_NOT_AVAILABLE (the controller already elects
any live replica when `unclean.leader.election.enable` is set; on demand it is not done yet).
`topic_partitions` null: every partition, and the answer leaves out those that needed no
election. ALTER on the cluster is required (CLUSTER_AUTHORIZATION_FAILED at the top level and
for each named partition). Runs on the event loop; ZooKeeper writes on a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Any

from tidelog.broker import clock
from tidelog.broker.handlers.authorization import Op, cluster_allowed
from tidelog.broker.handlers.cluster_common import ClusterDeps, joined
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.replication.replica_manager import Replication
from tidelog.errors import ErrorCode
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.types import TopicPartition

log = logging.getLogger("tidelog.broker.elect")
PREFERRED, UNCLEAN = 0, 1
POLL_S = 0.05


def _decide(replication: Replication, tp: TopicPartition, election_type: int) -> ErrorCode | None:
    """The answer known before any election, or None: elect it."""
    view = replication.view
    assert view is not None
    assignment = view.topics.get(tp.topic)
    replicas = assignment.partitions.get(tp.partition) if assignment is not None else None
    versioned = view.states.get(tp)
    if not replicas or versioned is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    state = versioned.state
    leader_alive = state.leader in view.brokers
    if election_type == UNCLEAN:
        return ErrorCode.ELECTION_NOT_NEEDED if leader_alive else (
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        )
    preferred = replicas[0]
    if state.leader == preferred and leader_alive:
        return ErrorCode.ELECTION_NOT_NEEDED
    if preferred not in view.brokers or preferred not in state.isr:
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    return None


def _led_by_preferred(replication: Replication, tp: TopicPartition) -> bool:
    view = replication.view
    if view is None or tp.topic not in view.topics:
        return False
    versioned = view.states.get(tp)
    replicas = view.topics[tp.topic].partitions.get(tp.partition, ())
    return versioned is not None and bool(replicas) and versioned.state.leader == replicas[0]


async def _elect(
    replication: Replication, partitions: list[TopicPartition], deadline_ms: int
) -> dict[TopicPartition, ErrorCode]:
    agent = replication.agent
    assert agent is not None
    while not await asyncio.to_thread(agent.request_preferred_election, partitions):
        if clock.monotonic_ms() >= deadline_ms:  # an earlier request is still pending
            return dict.fromkeys(partitions, ErrorCode.REQUEST_TIMED_OUT)
        await asyncio.sleep(POLL_S)
    while clock.monotonic_ms() < deadline_ms and not all(
        _led_by_preferred(replication, tp) for tp in partitions
    ):
        await asyncio.sleep(POLL_S)
    return {
        tp: ErrorCode.NONE if _led_by_preferred(replication, tp) else ErrorCode.REQUEST_TIMED_OUT
        for tp in partitions
    }


async def handle_elect_leaders(deps: ClusterDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.ELECT_LEADERS, version)
    top = ErrorCode.NONE
    if deps.authorizer is not None and not cluster_allowed(deps.authorizer, context, Op.ALTER):
        top = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    election_type = int(getattr(request, "election_type", PREFERRED))
    every = request.topic_partitions is None
    outcomes: dict[TopicPartition, ErrorCode] = {}
    topics: list[str] = []
    if top == ErrorCode.NONE:
        replication = joined(deps)
        view = replication.view
        assert view is not None
        if every:
            wanted = sorted(tp for tp in view.states if tp.topic in view.topics)
            topics = sorted(view.topics)
        else:
            wanted = [TopicPartition(entry.topic, int(p))
                      for entry in request.topic_partitions for p in entry.partitions]
        to_elect = []
        for tp in wanted:
            decided = _decide(replication, tp, election_type)
            if decided is None:
                to_elect.append(tp)
            else:
                outcomes[tp] = decided
        if to_elect:
            timeout_ms = int(request.timeout.total_seconds() * 1000)
            log.info("preferred leader election requested for %s", to_elect)
            outcomes |= await _elect(replication, to_elect, clock.monotonic_ms() + timeout_ms)
    if not every:
        topics = list(dict.fromkeys(entry.topic for entry in request.topic_partitions))
        for entry in request.topic_partitions:
            for p in entry.partitions:
                outcomes.setdefault(TopicPartition(entry.topic, int(p)), top)
    results = []
    for topic in topics:
        partitions = sorted(
            (tp.partition, code) for tp, code in outcomes.items()
            if tp.topic == topic and not (every and code == ErrorCode.ELECTION_NOT_NEEDED)
        )
        results.append(responses.build(
            module.ReplicaElectionResult, topic=topic,
            partition_result=tuple(
                responses.build(module.PartitionResult, partition_id=partition,
                                error_code=code, error_message=None)
                for partition, code in partitions
            ),
        ))
    return responses.build(
        responses.response_class(ApiKey.ELECT_LEADERS, version),
        throttle_time=0, error_code=top, replica_election_results=tuple(results),
    )


def handlers(deps: ClusterDeps) -> HandlerTable:
    return {ApiKey.ELECT_LEADERS: partial(handle_elect_leaders, deps)}
