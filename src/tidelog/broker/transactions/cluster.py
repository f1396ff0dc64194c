"""Transactions in cluster mode: the replicated `__transaction_state`, who coordinates, and
markers sent to other brokers. Patterned on `broker/groups/cluster.py`; runs on the event loop
(ZooKeeper writes through `asyncio.to_thread`).

- `__transaction_state` is created through ZooKeeper like any topic:
  transaction.state.log.num.partitions partitions, replication factor
  min(transaction.state.log.replication.factor, live brokers), compacted, min.insync.replicas
  = transaction.state.log.min.isr (capped at the factor), Kafka's settings.
- The coordinator of a transactional id is the current leader of partition
  `partition_for(transactional id)`; FindCoordinator (key_type 1) answers it on the asking
  client's listener.
- Markers (`MarkerChannels`, Kafka's TransactionMarkerChannelManager): WriteTxnMarkers v1 to
  the partition's leader over one reused connection per destination broker
  (`peer_client.connect_peer` with the inter-broker listener's TLS/SASL), one request in
  flight per connection. A connection error or an answer that says the leader moved is
  reported per partition; the service retries after the view changes.

WriteTxnMarkers v1 request (KIP-98; kio encodes it): markers [producer_id int64,
producer_epoch int16, transaction_result bool, topics [name string, partition_indexes
[int32]], coordinator_epoch int32]; the answer lists an error code per partition.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from tidelog.broker.internal_topics import TRANSACTION_STATE_TOPIC
from tidelog.broker.peer_client import PeerConnection, PeerError, connect_peer
from tidelog.broker.replication.internal_topic import InternalTopicCreator, partition_count
from tidelog.coordinator.coordinator import partition_for
from tidelog.errors import ErrorCode
from tidelog.protocol import responses
from tidelog.protocol.codec import request_schema
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from tidelog.broker.replication.replica_manager import Replication
    from tidelog.broker.state import Broker

log = logging.getLogger("tidelog.broker.transactions.cluster")

STATE_SEGMENT_BYTES = 100 * 1024 * 1024  # Kafka's transaction.state.log.segment.bytes
WRITE_TXN_MARKERS_KEY, WRITE_TXN_MARKERS_VERSION = 27, 1
MARKER_CLIENT_ID = "tidelog-txn-markers"
MARKER_CALL_TIMEOUT_S = 35.0  # the remote leader waits up to 30 s for its ISR
NO_NODE = (-1, "", -1)


def state_topic_configs(config_min_isr: int, replication_factor: int) -> dict[str, str]:
    return {
        "cleanup.policy": "compact",
        "segment.bytes": str(STATE_SEGMENT_BYTES),
        "min.insync.replicas": str(max(1, min(config_min_isr, replication_factor))),
    }


class TransactionStateCreator(InternalTopicCreator):
    """Creates `__transaction_state` through ZooKeeper once (one attempt in flight)."""

    def __init__(self, broker: Broker, replication: Replication) -> None:
        self.broker = broker
        super().__init__(replication, TRANSACTION_STATE_TOPIC, self._topic_layout)

    def _topic_layout(self, live_brokers: int) -> tuple[int, int, dict[str, str]]:
        config = self.broker.config
        factor = max(1, min(config.transaction_state_log_replication_factor, live_brokers))
        partitions = max(1, config.transaction_state_log_num_partitions)
        return partitions, factor, state_topic_configs(config.transaction_state_log_min_isr,
                                                       factor)


def state_partition_count(broker: Broker, replication: Replication) -> int:
    """The topic's real partition count once it exists, else the configured one."""
    return partition_count(replication, TRANSACTION_STATE_TOPIC,
                           broker.config.transaction_state_log_num_partitions)


def find_transaction_coordinator(
    broker: Broker, replication: Replication, creator: TransactionStateCreator,
    transactional_id: str, listener_name: str,
) -> tuple[ErrorCode, tuple[int, str, int]]:
    """(error, (node id, host, port on the asking listener)) of the leader of the id's
    `__transaction_state` partition; COORDINATOR_NOT_AVAILABLE until it exists and has one."""
    view = replication.view
    if view is None or TRANSACTION_STATE_TOPIC not in view.topics:
        creator.ensure()
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE
    partition = partition_for(transactional_id, state_partition_count(broker, replication))
    versioned = view.states.get(TopicPartition(TRANSACTION_STATE_TOPIC, partition))
    if versioned is None or versioned.state.leader not in view.brokers:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE
    leader = versioned.state.leader
    endpoint = view.endpoint(leader, listener_name)
    if endpoint is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE
    return ErrorCode.NONE, (leader, endpoint[0], endpoint[1])


def leader_of(replication: Replication, topic: str, partition: int) -> int | None:
    """The partition's leader in this broker's view; None if it has none (or no topic)."""
    view = replication.view
    if view is None:
        return None
    versioned = view.states.get(TopicPartition(topic, partition))
    if versioned is None or versioned.state.leader not in view.brokers:
        return None
    return versioned.state.leader


def topic_exists(replication: Replication, topic: str) -> bool:
    view = replication.view
    return view is not None and topic in view.topics


def _error_code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:  # a code this broker does not know: retried like any other error
        return ErrorCode.UNKNOWN_SERVER_ERROR


class MarkerChannels:
    """One connection per destination broker, reused; one request in flight on each."""

    def __init__(self, replication: Replication) -> None:
        self.replication = replication
        self._connections: dict[int, tuple[tuple[str, int], PeerConnection]] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def write(
        self, broker_id: int, partitions: Iterable[tuple[str, int]], producer_id: int,
        producer_epoch: int, committed: bool, coordinator_epoch: int,
    ) -> dict[tuple[str, int], ErrorCode]:
        """WriteTxnMarkers to `broker_id`; the error per partition (NONE: written there and
        replicated). A connection failure is NETWORK_EXCEPTION for every partition."""
        wanted = sorted(set(partitions))
        by_topic: dict[str, list[int]] = {}
        for topic, partition in wanted:
            by_topic.setdefault(topic, []).append(partition)
        schema = request_schema(WRITE_TXN_MARKERS_KEY, WRITE_TXN_MARKERS_VERSION)
        module: Any = sys.modules[schema.__module__]  # its nested entity classes
        body = responses.build(schema, markers=(responses.build(
            module.WritableTxnMarker, producer_id=producer_id, producer_epoch=producer_epoch,
            transaction_result=committed, coordinator_epoch=coordinator_epoch,
            topics=tuple(
                responses.build(module.WritableTxnMarkerTopic, name=name,
                                partition_indexes=tuple(indexes))
                for name, indexes in by_topic.items()
            ),
        ),))
        lock = self._locks.setdefault(broker_id, asyncio.Lock())
        async with lock:
            try:
                connection = await self._connection(broker_id)
                answer = await asyncio.wait_for(
                    connection.call(WRITE_TXN_MARKERS_KEY, WRITE_TXN_MARKERS_VERSION, body),
                    MARKER_CALL_TIMEOUT_S,
                )
            except (OSError, PeerError, TimeoutError, asyncio.IncompleteReadError) as error:
                log.info("markers to broker %d: %s", broker_id, error or type(error).__name__)
                self._drop(broker_id)
                return dict.fromkeys(wanted, ErrorCode.NETWORK_EXCEPTION)
        outcomes = dict.fromkeys(wanted, ErrorCode.UNKNOWN_SERVER_ERROR)
        for result in answer.markers:
            for topic in result.topics:
                for item in topic.partitions:
                    key = (topic.name, int(item.partition_index))
                    if key in outcomes:
                        outcomes[key] = _error_code(int(item.error_code))
        return outcomes

    async def _connection(self, broker_id: int) -> PeerConnection:
        endpoint = self.replication.leader_endpoint(broker_id)
        if endpoint is None:
            raise PeerError(f"broker {broker_id} is not in the cluster view")
        current = self._connections.get(broker_id)
        if current is not None and current[0] == endpoint:
            return current[1]
        self._drop(broker_id)
        connection = await connect_peer(
            self.replication.peer_security, endpoint[0], endpoint[1], MARKER_CLIENT_ID
        )
        self._connections[broker_id] = (endpoint, connection)
        return connection

    def _drop(self, broker_id: int) -> None:
        current = self._connections.pop(broker_id, None)
        if current is not None:
            current[1].close()

    def close(self) -> None:
        for broker_id in list(self._connections):
            self._drop(broker_id)
