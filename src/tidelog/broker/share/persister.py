"""A share-partition leader's way to the share coordinator in cluster mode (Kafka's
DefaultStatePersister): Read/Write/Initialize/DeleteShareGroupState for one key, sent to the
leader of the key's `__share_group_state` partition, or run in place when that is this broker.

Runs on the event loop. One reused connection per destination broker (`peer_client`, the
inter-broker listener's TLS/SASL), one request in flight on it. NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE and connection errors are retried
(the coordinator moves with its partition's leadership, like the transaction coordinator's)
with RETRY_BACKOFF_S between tries until PERSIST_TIMEOUT_S; then, as every other error
(FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH), it is raised as a KafkaError.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from tidelog.broker import clock
from tidelog.broker.peer_client import PeerConnection, PeerError, connect_peer
from tidelog.broker.share.state_coordinator import ShareStateCoordinator
from tidelog.coordinator.share_records import PersistedStateBatch
from tidelog.coordinator.share_state import ReadResult, ShareStateStore
from tidelog.errors import ErrorCode, KafkaError
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.codec import request_schema

if TYPE_CHECKING:
    from tidelog.broker.replication.replica_manager import Replication

log = logging.getLogger("tidelog.broker.share.persister")
PERSIST_TIMEOUT_S = 20.0  # a coordinator failover: session timeout, election, load
RETRY_BACKOFF_S = 0.1
CALL_TIMEOUT_S = 35.0  # the coordinator waits up to offsets.commit.timeout.ms for its ISR
CLIENT_ID = "tidelog-share-persister"
CONFIGS_CLIENT_ID = "tidelog-share-group-configs"
_RETRIED = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION,
            ErrorCode.REQUEST_TIMED_OUT)
Key = tuple[str, uuid.UUID, int]
T = TypeVar("T")


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


class StatePersister:
    def __init__(self, replication: Replication, coordinator: ShareStateCoordinator,
                 node_id: int) -> None:
        self.replication = replication
        self.coordinator = coordinator
        self.node_id = node_id
        self._connections: dict[int, tuple[tuple[str, int], PeerConnection]] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    # ------------------------------------------------------------------ operations
    async def read(self, key: Key, leader_epoch: int) -> ReadResult:
        def local(store: ShareStateStore, now_ms: int) -> tuple[ReadResult, list[Any]]:
            return store.read(key, leader_epoch, now_ms)

        async def remote(connection: PeerConnection) -> ReadResult:
            schema = request_schema(ApiKey.READ_SHARE_GROUP_STATE, 0)
            module: Any = sys.modules[schema.__module__]
            body = responses.build(schema, group_id=key[0], topics=(responses.build(
                module.ReadStateData, topic_id=key[1], partitions=(responses.build(
                    module.PartitionData, partition=key[2], leader_epoch=leader_epoch),)),))
            answer = await connection.call(ApiKey.READ_SHARE_GROUP_STATE, 0, body)
            item = answer.results[0].partitions[0]
            return ReadResult(
                _code(int(item.error_code)), int(item.state_epoch), leader_epoch,
                int(item.start_offset),
                tuple(PersistedStateBatch(int(b.first_offset), int(b.last_offset),
                                          int(b.delivery_state), int(b.delivery_count))
                      for b in item.state_batches),
            )

        result = await self._call(key, local, remote, lambda r: r.error)
        if result.error is not ErrorCode.NONE:
            raise KafkaError(result.error, f"reading share state of {key}")
        return result

    async def write(self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: tuple[PersistedStateBatch, ...]) -> None:
        def local(store: ShareStateStore, now_ms: int) -> tuple[ErrorCode, list[Any]]:
            return store.write(key, state_epoch, leader_epoch, start_offset, batches, now_ms)

        async def remote(connection: PeerConnection) -> ErrorCode:
            schema = request_schema(ApiKey.WRITE_SHARE_GROUP_STATE, 0)
            module: Any = sys.modules[schema.__module__]
            body = responses.build(schema, group_id=key[0], topics=(responses.build(
                module.WriteStateData, topic_id=key[1], partitions=(responses.build(
                    module.PartitionData, partition=key[2], state_epoch=state_epoch,
                    leader_epoch=leader_epoch, start_offset=start_offset,
                    state_batches=tuple(responses.build(
                        module.StateBatch, first_offset=b.first_offset,
                        last_offset=b.last_offset, delivery_state=b.delivery_state,
                        delivery_count=b.delivery_count) for b in batches),
                ),)),))
            answer = await connection.call(ApiKey.WRITE_SHARE_GROUP_STATE, 0, body)
            return _code(int(answer.results[0].partitions[0].error_code))

        self._raise(await self._call(key, local, remote, lambda code: code), key)

    async def initialize(self, key: Key, state_epoch: int, start_offset: int) -> None:
        def local(store: ShareStateStore, now_ms: int) -> tuple[ErrorCode, list[Any]]:
            return store.initialize(key, state_epoch, start_offset, now_ms)

        async def remote(connection: PeerConnection) -> ErrorCode:
            schema = request_schema(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0)
            module: Any = sys.modules[schema.__module__]
            body = responses.build(schema, group_id=key[0], topics=(responses.build(
                module.InitializeStateData, topic_id=key[1], partitions=(responses.build(
                    module.PartitionData, partition=key[2], state_epoch=state_epoch,
                    start_offset=start_offset),)),))
            answer = await connection.call(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, body)
            return _code(int(answer.results[0].partitions[0].error_code))

        self._raise(await self._call(key, local, remote, lambda code: code), key)

    async def delete(self, key: Key) -> None:
        def local(store: ShareStateStore, _now_ms: int) -> tuple[ErrorCode, list[Any]]:
            return ErrorCode.NONE, list(store.delete(key))

        async def remote(connection: PeerConnection) -> ErrorCode:
            schema = request_schema(ApiKey.DELETE_SHARE_GROUP_STATE, 0)
            module: Any = sys.modules[schema.__module__]
            body = responses.build(schema, group_id=key[0], topics=(responses.build(
                module.DeleteStateData, topic_id=key[1], partitions=(responses.build(
                    module.PartitionData, partition=key[2]),)),))
            answer = await connection.call(ApiKey.DELETE_SHARE_GROUP_STATE, 0, body)
            return _code(int(answer.results[0].partitions[0].error_code))

        self._raise(await self._call(key, local, remote, lambda code: code), key)

    async def forward_configs(self, request: Any, version: int, client_id: str) -> None:
        """Group configs altered here, sent on to every other live broker (one try each; a
        broker that is down keeps its old configs: docs/groups.md). A forwarded request is
        not forwarded again."""
        if client_id == CONFIGS_CLIENT_ID:
            return
        view = self.replication.view
        for broker_id, endpoint in ({} if view is None else dict(view.brokers)).items():
            if broker_id == self.node_id:
                continue
            try:
                connection = await connect_peer(self.replication.peer_security, endpoint[0],
                                                endpoint[1], CONFIGS_CLIENT_ID)
                try:
                    await asyncio.wait_for(connection.call(
                        ApiKey.INCREMENTAL_ALTER_CONFIGS, version, request), CALL_TIMEOUT_S)
                finally:
                    connection.close()
            except (OSError, PeerError, TimeoutError, asyncio.IncompleteReadError) as error:
                log.warning("group configs not sent to broker %d: %s", broker_id,
                            error or type(error).__name__)

    @staticmethod
    def _raise(code: ErrorCode, key: Key) -> None:
        if code is not ErrorCode.NONE:
            raise KafkaError(code, f"share state of {key}")

    # ------------------------------------------------------------------ routing and retries
    async def _call(
        self, key: Key,
        local: Callable[[ShareStateStore, int], tuple[T, list[Any]]],
        remote: Callable[[PeerConnection], Awaitable[T]],
        error_of: Callable[[T], ErrorCode],
    ) -> T:
        deadline = clock.monotonic_ms() + int(PERSIST_TIMEOUT_S * 1000)
        while True:
            leader = self.coordinator.leader_of(key)
            result: T | None = None
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            if leader == self.node_id:
                try:
                    result = await self.coordinator.run(key, local)
                    code = error_of(result)
                except KafkaError as error:
                    code = error.code
            elif leader is not None:
                try:
                    result = await self._remote(leader, remote)
                    code = error_of(result)
                except KafkaError as error:
                    code = error.code
            if code not in _RETRIED and result is not None:
                return result
            if code not in _RETRIED:
                raise KafkaError(code, f"share state of {key}")
            if clock.monotonic_ms() >= deadline or self.replication.closing:
                raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                 f"share coordinator of {key}: {code.name}")
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _remote(self, broker_id: int,
                      remote: Callable[[PeerConnection], Awaitable[T]]) -> T:
        lock = self._locks.setdefault(broker_id, asyncio.Lock())
        async with lock:
            try:
                connection = await self._connection(broker_id)
                return await asyncio.wait_for(remote(connection), CALL_TIMEOUT_S)
            except (OSError, PeerError, TimeoutError, asyncio.IncompleteReadError,
                    IndexError) as error:
                if broker_id in self._connections:  # logged once per lost connection
                    log.info("share coordinator on broker %d: %s", broker_id,
                             error or type(error).__name__)
                self._drop(broker_id)
                raise KafkaError(ErrorCode.NETWORK_EXCEPTION, str(error)) from None

    async def _connection(self, broker_id: int) -> PeerConnection:
        endpoint = self.replication.leader_endpoint(broker_id)
        if endpoint is None:
            raise PeerError(f"broker {broker_id} is not in the cluster view")
        current = self._connections.get(broker_id)
        if current is not None and current[0] == endpoint:
            return current[1]
        self._drop(broker_id)
        connection = await connect_peer(self.replication.peer_security, endpoint[0],
                                        endpoint[1], CLIENT_ID)
        self._connections[broker_id] = (endpoint, connection)
        return connection

    def _drop(self, broker_id: int) -> None:
        current = self._connections.pop(broker_id, None)
        if current is not None:
            current[1].close()

    def close(self) -> None:
        for broker_id in list(self._connections):
            self._drop(broker_id)
