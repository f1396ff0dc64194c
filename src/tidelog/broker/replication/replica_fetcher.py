"""A follower's replica fetcher for one partition: our own Fetch client, raw bytes (D12).

Runs on the event loop (asyncio streams); must not block.

1. Truncate (KIP-101/279): ask the leader with OffsetForLeaderEpoch (v4) where our latest
   leader epoch ends on its log; keep min(that end offset, our own end offset for the epoch
   the leader answered) and truncate the rest (PartitionLog.truncate_to), so a replica never
   keeps a tail the new leader does not have. Without any epoch we keep our high watermark.
2. Fetch (v12, replica_id = our node id, topic names) from our log end offset; the leader
   records that offset as our position. The record bytes are split into batch headers and
   appended as they are (PartitionLog.append_raw: offsets kept, no record decoding); each
   batch's partitionLeaderEpoch feeds the leader-epoch cache. The leader's high watermark is
   adopted up to our log end offset.
3. D7 (`acks.all.fsync`, default on): after appending, the fetcher fsyncs the new data (the
   broker's group-commit thread) before its next fetch, so the offset the leader counts as
   ours, and so its high watermark and every acks=all acknowledgement, is on our disk.

Connections, framing, TLS and SASL to the leader: broker/peer_client.py (the inter-broker
listener's security, `security.inter.broker.protocol`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import sys
from typing import TYPE_CHECKING, Any

from tidelog.broker import clock
from tidelog.broker.peer_client import PeerConnection, PeerError, connect_peer
from tidelog.errors import ErrorCode, KafkaError, TidelogError
from tidelog.protocol import responses
from tidelog.protocol.codec import request_schema
from tidelog.records.batch import split_batches
from tidelog.storage.leader_epochs import UNDEFINED

if TYPE_CHECKING:
    from tidelog.broker.services import FetcherOwner as Replication
    from tidelog.broker.services import FollowedPartition as ReplicaState

log = logging.getLogger("tidelog.broker.replication.replica_fetcher")
FETCH_KEY, FETCH_VERSION = 1, 12
EPOCH_KEY, EPOCH_VERSION = 23, 4
FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 8 * 1024 * 1024
THROTTLE_RECHECK_MS = 1000  # longest throttle wait before the quota is looked up again
RETRY_BACKOFF_S = 0.2  # before reconnecting after an error (not a poll)
ENDPOINT_WAIT_MS = 60_000
CLIENT_ID = "tidelog-replica-fetcher"


class FetcherStopped(Exception):
    """This fetcher was stopped or replaced: it must not touch the partition again."""


class FetcherError(TidelogError):
    """The leader answered with an error or a malformed frame: reconnect and start over."""


class ReplicaFetcher:
    """Follows one partition's leader until stopped (a leadership change stops it)."""

    def __init__(
        self, replication: Replication, state: ReplicaState, leader_id: int, leader_epoch: int
    ) -> None:
        self._replication = replication
        self._state = state
        self._leader_id = leader_id
        self._leader_epoch = leader_epoch
        self._node_id = replication.node_id
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    def _check_current(self) -> None:
        """Before touching the log: a fetcher that was stopped or replaced (a leadership
        change) exits even if its cancellation was lost, so it can never truncate or append
        to a partition it no longer follows (seen: a new leader truncating its own log)."""
        if self._stopped or self._state.fetcher is not self:
            raise FetcherStopped(f"{self._state.tp}: fetcher of {self._leader_id} replaced")

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def cancel(self) -> None:
        """Stop at the next await, synchronously (its log is about to be deleted)."""
        self._stopped = True
        if self._task is not None:
            self._task.cancel()

    async def stop(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        try:
            await self._follow()
        except FetcherStopped as stopped:
            log.info("%s", stopped)

    async def _follow(self) -> None:
        tp = self._state.tp
        while True:
            self._check_current()
            endpoint = self._replication.leader_endpoint(self._leader_id)
            if endpoint is None:  # not registered (yet): woken by the view that has it
                await self._replication.wait_for_view(
                    lambda view: self._leader_id in view.brokers, ENDPOINT_WAIT_MS)
                continue
            connection: PeerConnection | None = None
            try:
                connection = await connect_peer(
                    self._replication.peer_security, *endpoint, CLIENT_ID)
                await self._truncate(connection)
                while True:
                    await self._fetch_once(connection)
            except (TimeoutError, OSError, asyncio.IncompleteReadError, TidelogError) as error:
                log.info("%s: fetching from %d: %s; retrying", tp, self._leader_id, error)
            finally:
                if connection is not None:
                    connection.close()
            await asyncio.sleep(RETRY_BACKOFF_S)

    # ------------------------------------------------------------ wire

    async def _call(self, connection: PeerConnection, api_key: int, version: int,
                    body: Any) -> Any:
        try:
            return await connection.call(api_key, version, body)
        except PeerError as error:
            raise FetcherError(str(error)) from error

    # ------------------------------------------------------------ truncation

    async def _truncate(self, connection: PeerConnection) -> None:
        state = self._state
        epochs = state.epochs
        latest = epochs.latest_epoch
        if latest == UNDEFINED:
            target = min(state.high_watermark, state.log.log_end_offset)
            if state.log.log_end_offset > target:
                self._truncate_to(target)
            return
        schema = request_schema(EPOCH_KEY, EPOCH_VERSION)
        module = sys.modules[schema.__module__]
        request = responses.build(
            schema,
            replica_id=self._node_id,
            topics=(
                responses.build(
                    module.OffsetForLeaderTopic,
                    topic=state.tp.topic,
                    partitions=(
                        responses.build(
                            module.OffsetForLeaderPartition,
                            partition=state.tp.partition,
                            current_leader_epoch=self._leader_epoch,
                            leader_epoch=latest,
                        ),
                    ),
                ),
            ),
        )
        response = await self._call(connection, EPOCH_KEY, EPOCH_VERSION, request)
        answer = response.topics[0].partitions[0]
        if answer.error_code != ErrorCode.NONE:
            raise FetcherError(f"OffsetForLeaderEpoch: {ErrorCode(answer.error_code).name}")
        leader_epoch, end_offset = int(answer.leader_epoch), int(answer.end_offset)
        if leader_epoch == UNDEFINED:
            target = min(state.high_watermark, state.log.log_end_offset)
        else:
            _, local_end = epochs.end_offset_for(leader_epoch, state.log.log_end_offset)
            target = min(end_offset, local_end if local_end >= 0 else end_offset)
        if target < state.log.log_end_offset:
            self._truncate_to(target)

    def _truncate_to(self, offset: int) -> None:
        self._check_current()
        state = self._state
        log.info("%s: truncating from %d to %d", state.tp, state.log.log_end_offset, offset)
        state.log.truncate_to(offset)
        state.epochs.truncate_from_end(offset)
        state.high_watermark = min(state.high_watermark, offset)

    # ------------------------------------------------------------ fetching

    async def _fetch_once(self, connection: PeerConnection) -> None:
        state = self._state
        schema = request_schema(FETCH_KEY, FETCH_VERSION)
        module = sys.modules[schema.__module__]
        fetch_offset = state.log.log_end_offset
        partition_max_bytes = FETCH_MAX_BYTES
        quota = self._replication.follower_quota(state)
        while quota is not None and (delay_ms := quota.delay_ms(clock.now_ms())) > 0:
            # Over follower.replication.throttled.rate: wait (pacing is time passing, and
            # the rate or our ISR membership may change meanwhile, so look again).
            await asyncio.sleep(min(delay_ms, THROTTLE_RECHECK_MS) / 1000)
            self._check_current()
            quota = self._replication.follower_quota(state)
        if quota is not None:
            partition_max_bytes = quota.fetch_size(FETCH_MAX_BYTES)
        request = responses.build(
            schema,
            replica_id=self._node_id,
            max_wait=datetime.timedelta(milliseconds=FETCH_MAX_WAIT_MS),
            min_bytes=1,
            max_bytes=FETCH_MAX_BYTES,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=(
                responses.build(
                    module.FetchTopic,
                    topic=state.tp.topic,
                    partitions=(
                        responses.build(
                            module.FetchPartition,
                            partition=state.tp.partition,
                            current_leader_epoch=self._leader_epoch,
                            fetch_offset=fetch_offset,
                            last_fetched_epoch=state.epochs.latest_epoch,
                            log_start_offset=state.log.log_start_offset,
                            partition_max_bytes=partition_max_bytes,
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
        response = await self._call(connection, FETCH_KEY, FETCH_VERSION, request)
        if response.error_code != ErrorCode.NONE:
            raise FetcherError(f"fetch: {ErrorCode(response.error_code).name}")
        for topic in response.responses:
            for partition in topic.partitions:
                self._apply(partition, fetch_offset)
                if quota is not None:
                    quota.record(len(partition.records or b""), clock.now_ms())
        log_end_offset = state.log.log_end_offset
        if log_end_offset > fetch_offset and self._replication.settings.acks_all_fsync:
            # D7: the next fetch offset is what the leader counts as on this replica (its
            # high watermark, hence acks=all): fsync before reporting it (group commit).
            try:
                await self._replication.broker.wait_durable(state.log, log_end_offset)
            except KafkaError as error:
                raise FetcherError(f"fsync of fetched batches failed: {error}") from error

    def _apply(self, partition: Any, fetch_offset: int) -> None:
        self._check_current()
        state = self._state
        code = ErrorCode(partition.error_code)
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            raise FetcherError("offset out of range: truncate again")
        if code != ErrorCode.NONE:
            raise FetcherError(f"fetch {state.tp}: {code.name}")
        records = partition.records
        if records and state.log.log_end_offset == fetch_offset:
            batches = split_batches(bytearray(records))
            try:
                state.log.append_raw(batches, now_ms=clock.now_ms())
            except TidelogError as error:
                raise FetcherError(f"append of fetched batches failed: {error}") from error
            epochs = state.epochs
            for batch in batches:
                if batch.partition_leader_epoch > epochs.latest_epoch:
                    epochs.assign(batch.partition_leader_epoch, batch.base_offset)
        self._replication.set_follower_high_watermark(state, int(partition.high_watermark))
        leader_log_start = min(int(partition.log_start_offset), state.log.log_end_offset)
        if leader_log_start > state.log.log_start_offset:
            # DeleteRecords (or retention) on the leader: follow its log start offset (Kafka's
            # follower maybeIncrementLogStartOffset).
            state.log.delete_records_before(leader_log_start)
