"""Produce requests from this broker to a partition's leader (itself included), for delayed
delivery in cluster mode: the timer batch of a produce goes to its `__tidelog_timer`
partition's leader, and a due record goes to its target partition's leader, both with
acks=all. Over the inter-broker listener (`peer_client.connect_peer`: its TLS and SASL); the
receiving broker lets these writes through only from the inter-broker listener (and, with an
authorizer, CLUSTER_ACTION on the cluster), as Kafka does for WriteTxnMarkers.

Produce v9 (kio encodes it): transactional_id null, acks -1, timeout, one topic, one
partition, one batch. A small pool of connections per broker (each carries one request at a
time), so produces through one broker do not queue behind each other.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelog.broker.peer_client import PeerConnection, PeerError, connect_peer
from tidelog.errors import ErrorCode
from tidelog.protocol import responses
from tidelog.protocol.codec import request_schema

if TYPE_CHECKING:
    from tidelog.broker.replication.replica_manager import Replication

log = logging.getLogger("tidelog.broker.timers.peer_produce")

PRODUCE_KEY, PRODUCE_VERSION = 0, 9
CLIENT_ID = "tidelog-timer"
CONNECTIONS_PER_BROKER = 16
CALL_SLACK_S = 5.0  # beyond the request's own timeout, for the network


@dataclass(frozen=True, slots=True)
class Produced:
    error: ErrorCode
    base_offset: int = -1
    message: str | None = None


def _error_code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


class PeerProducer:
    def __init__(self, replication: Replication) -> None:
        self.replication = replication
        self._idle: dict[int, list[tuple[tuple[str, int], PeerConnection]]] = {}
        self._slots: dict[int, asyncio.Semaphore] = {}

    async def produce(
        self, broker_id: int, topic: str, partition: int, batch: bytes | bytearray,
        timeout_ms: int,
    ) -> Produced:
        """One batch to `broker_id` with acks=all. A connection failure or timeout is
        NETWORK_EXCEPTION / REQUEST_TIMED_OUT (retriable: the batch may or may not be there)."""
        schema = request_schema(PRODUCE_KEY, PRODUCE_VERSION)
        module: Any = sys.modules[schema.__module__]
        body = responses.build(
            schema, transactional_id=None, acks=-1,
            timeout=datetime.timedelta(milliseconds=timeout_ms),
            topic_data=(responses.build(
                module.TopicProduceData, name=topic,
                partition_data=(responses.build(
                    module.PartitionProduceData, index=partition, records=batch),),
            ),),
        )
        slots = self._slots.setdefault(broker_id, asyncio.Semaphore(CONNECTIONS_PER_BROKER))
        async with slots:
            try:
                endpoint, connection = await self._take(broker_id)
            except (OSError, PeerError, TimeoutError) as error:
                return Produced(ErrorCode.NETWORK_EXCEPTION, message=f"broker {broker_id}: "
                                f"{error or type(error).__name__}")
            try:
                async with asyncio.timeout(timeout_ms / 1000 + CALL_SLACK_S):
                    answer = await connection.call(PRODUCE_KEY, PRODUCE_VERSION, body)
            except TimeoutError:
                connection.close()
                return Produced(ErrorCode.REQUEST_TIMED_OUT, message=f"broker {broker_id}")
            except (OSError, PeerError, asyncio.IncompleteReadError) as error:
                connection.close()
                self._drop_idle(broker_id)  # a restarted broker: its other ones are dead too
                return Produced(ErrorCode.NETWORK_EXCEPTION, message=f"broker {broker_id}: "
                                f"{error or type(error).__name__}")
            self._idle.setdefault(broker_id, []).append((endpoint, connection))
        for topic_answer in answer.responses:
            for item in topic_answer.partition_responses:
                return Produced(_error_code(int(item.error_code)), int(item.base_offset),
                                item.error_message)
        return Produced(ErrorCode.UNKNOWN_SERVER_ERROR, message="empty produce answer")

    async def _take(self, broker_id: int) -> tuple[tuple[str, int], PeerConnection]:
        endpoint = self.replication.leader_endpoint(broker_id)
        if endpoint is None:
            raise PeerError(f"broker {broker_id} is not in the cluster view")
        idle = self._idle.get(broker_id, [])
        while idle:
            known, connection = idle.pop()
            if known == endpoint:
                return known, connection
            connection.close()
        connection = await connect_peer(
            self.replication.peer_security, endpoint[0], endpoint[1], CLIENT_ID)
        return endpoint, connection

    def _drop_idle(self, broker_id: int) -> None:
        for _, connection in self._idle.pop(broker_id, []):
            connection.close()

    def close(self) -> None:
        for idle in self._idle.values():
            for _, connection in idle:
                connection.close()
        self._idle.clear()
