"""Consumer groups in cluster mode: the replicated `__consumer_offsets` and who coordinates.

Runs on the event loop; ZooKeeper writes go through `asyncio.to_thread`.

- `__consumer_offsets` is created through ZooKeeper like any topic (the controller places it):
  offsets.topic.num.partitions partitions, replication factor min(3, live brokers) (Kafka's
  offsets.topic.replication.factor=3, adapted to clusters smaller than 3), compacted, and
  min.insync.replicas = 2 when the factor is 3, else 1, so a commit acknowledged with acks=all
  survives one broker loss and a cluster of 3 keeps committing with one broker down.
- The coordinator of a group is the current leader of partition `partition_for(group id)` of
  that topic (Kafka's rule); FindCoordinator answers it from the cluster view.
- Appends wait for the high watermark (acks=all) before the operation is answered; errors are
  mapped as Kafka's GroupMetadataManager does (a lost leadership -> NOT_COORDINATOR, too few
  replicas or a timeout -> COORDINATOR_NOT_AVAILABLE, so the client retries or rediscovers).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from tidelog.broker.internal_topics import OFFSETS_TOPIC
from tidelog.broker.replication.internal_topic import InternalTopicCreator, partition_count
from tidelog.coordinator.coordinator import partition_for
from tidelog.errors import ErrorCode, KafkaError
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from tidelog.broker.replication.replica_manager import Replication
    from tidelog.broker.state import Broker

log = logging.getLogger("tidelog.broker.groups.cluster")

OFFSETS_REPLICATION_FACTOR = 3  # Kafka's offsets.topic.replication.factor default
OFFSETS_COMMIT_TIMEOUT_MS = 5000  # Kafka's offsets.commit.timeout.ms default
OFFSETS_SEGMENT_BYTES = 100 * 1024 * 1024  # Kafka's offsets.topic.segment.bytes default
NO_NODE = (-1, "", -1)

# Kafka's GroupMetadataManager: what a failed __consumer_offsets append tells the client.
_APPEND_ERRORS = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.FENCED_LEADER_EPOCH: ErrorCode.NOT_COORDINATOR,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
}


def coordinator_error(code: ErrorCode) -> ErrorCode:
    """The group error for a failed __consumer_offsets append or wait."""
    return _APPEND_ERRORS.get(code, code)


def offsets_topic_configs(replication_factor: int) -> dict[str, str]:
    return {
        "cleanup.policy": "compact",
        "segment.bytes": str(OFFSETS_SEGMENT_BYTES),
        "min.insync.replicas": "2" if replication_factor >= 3 else "1",
    }


class OffsetsTopicCreator(InternalTopicCreator):
    """Creates `__consumer_offsets` through ZooKeeper once (one attempt in flight)."""

    def __init__(self, broker: Broker, replication: Replication) -> None:
        self.broker = broker
        super().__init__(replication, OFFSETS_TOPIC, self._topic_layout)

    def _topic_layout(self, live_brokers: int) -> tuple[int, int, dict[str, str]]:
        factor = max(1, min(OFFSETS_REPLICATION_FACTOR, live_brokers))
        partitions = max(1, self.broker.config.offsets_topic_num_partitions)
        return partitions, factor, offsets_topic_configs(factor)


def offsets_partition_count(broker: Broker, replication: Replication) -> int:
    """The topic's real partition count once it exists, else the configured one."""
    return partition_count(replication, OFFSETS_TOPIC, broker.config.offsets_topic_num_partitions)


def find_coordinator(
    broker: Broker, replication: Replication, creator: OffsetsTopicCreator, key: str,
    listener_name: str,
) -> tuple[ErrorCode, tuple[int, str, int]]:
    """(error, (node id, host, port on the asking client's listener)) of the leader of the
    group's partition."""
    view = replication.view
    if view is None or OFFSETS_TOPIC not in view.topics:
        creator.ensure()
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE
    partition = partition_for(key, offsets_partition_count(broker, replication))
    versioned = view.states.get(TopicPartition(OFFSETS_TOPIC, partition))
    if versioned is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE
    leader = versioned.state.leader
    endpoint = view.endpoint(leader, listener_name)
    if endpoint is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE
    return ErrorCode.NONE, (leader, endpoint[0], endpoint[1])


def append_leader_epoch(replication: Replication, tp: TopicPartition) -> int:
    """The epoch to stamp on a coordinator append; refuses (as a group error) a partition
    this broker no longer leads or whose ISR is below min.insync.replicas, before anything
    is written."""
    try:
        return replication.check_produce(tp, -1)
    except KafkaError as error:
        raise KafkaError(coordinator_error(error.code), error.message) from None


async def replicated(
    replication: Replication, tp: TopicPartition, end_offset: int,
    fsync: Awaitable[None] | None,
) -> None:
    """acks=all for a coordinator append: the fsync if any, then the high watermark passing
    it within offsets.commit.timeout.ms; a group error otherwise."""
    if fsync is not None:
        await fsync
    code = await replication.wait_for_high_watermark(tp, end_offset, OFFSETS_COMMIT_TIMEOUT_MS)
    if code != ErrorCode.NONE:
        raise KafkaError(coordinator_error(code), f"{tp} below {end_offset}: {code.name}")
