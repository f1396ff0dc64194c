"""What cluster-mode answers read from the cluster view (ZooKeeper's, `replication.view`):
the live brokers and controller for DescribeCluster, one partition's leader, epoch, replicas,
ISR and offline replicas for DescribeTopicPartitions (the rules Metadata follows: a leader
that is not live is no leader, LEADER_NOT_AVAILABLE).

Runs on the event loop; reads the last view only.
"""

from __future__ import annotations

from tidelog.broker.handlers.describe_topic_partitions import PartitionRow
from tidelog.broker.replication.replica_manager import Replication
from tidelog.cluster.zk_payloads import NO_LEADER
from tidelog.errors import ErrorCode, KafkaError
from tidelog.types import TopicPartition


def live_brokers(
    replication: Replication, listener: str
) -> tuple[int, list[tuple[int, str, int]]]:
    """(controller id, [(broker id, host, port)]) of every live broker reachable on
    `listener` (a broker without that listener is left out, as Metadata does)."""
    view = replication.view
    if view is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "not joined to the cluster yet")
    found = []
    for broker_id in sorted(view.brokers):
        endpoint = view.endpoint(broker_id, listener)
        if endpoint is not None:
            found.append((broker_id, endpoint[0], endpoint[1]))
    return view.controller_id, found


def partition_row(replication: Replication, topic: str, partition: int) -> PartitionRow:
    view = replication.view
    if view is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "not joined to the cluster yet")
    assignment = view.topics.get(topic)
    replicas = assignment.partitions.get(partition, ()) if assignment is not None else ()
    offline = tuple(b for b in replicas if b not in view.brokers)
    versioned = view.states.get(TopicPartition(topic, partition))
    if versioned is None:
        return PartitionRow(ErrorCode.LEADER_NOT_AVAILABLE, NO_LEADER, -1, replicas, (), offline)
    state = versioned.state
    alive = state.leader in view.brokers
    return PartitionRow(
        ErrorCode.NONE if alive else ErrorCode.LEADER_NOT_AVAILABLE,
        state.leader if alive else NO_LEADER, state.leader_epoch, replicas, state.isr, offline,
    )
