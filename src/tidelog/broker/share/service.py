"""Share groups on the event loop (ARCHITECTURE D15): the share-group coordinator, the share
partitions this node leads, share sessions, and the share coordinator's `__share_group_state`.

Runs on the event loop; must not block beyond short page-cache appends and reads.

- Membership: the pure `ShareGroupCoordinator` (coordinator/share_group.py), its records
  replayed in memory; a member whose session expires (`group.share.session.timeout.ms`) is
  removed by a timer and its acquired records go back to AVAILABLE.
- Share partitions: one pure `SharePartition` per (group, topic, partition), created on the
  first ShareFetch: from `__share_group_state` when it holds state for it, else at the log
  start (`share.auto.offset.reset=earliest`) or the log end (`latest`, Kafka's default).
- Durability: every operation that changed what a share partition would persist (acquisition
  with its delivery count, acknowledgement, archive, SPSO move) appends one record to
  `__share_group_state` before the request is answered: a ShareUpdate holding every offset
  changed since the partition's last ShareSnapshot, and a ShareSnapshot instead every
  `SNAPSHOT_EVERY` updates. On a single node the leader writes them directly (Kafka's
  WriteShareGroupState goes to the share coordinator, which appends the same records).
  At start the topic is replayed: the latest snapshot of each key, then the update after it.
- Share sessions: (group, member) -> epoch and partitions (Kafka's ShareSessionCache).
- Cluster mode (`broker.replication` set): the share coordinator is the leader of the key's
  `__share_group_state` partition (`state_coordinator.py`); this broker's share partitions
  are those of partitions it leads, read from the share coordinator at their first use
  (`load`, with the partition's leader epoch, which fences the previous leader) and written
  through it (`persister.py`, WriteShareGroupState) before each answer. A failed write drops
  the share partition (read again at its next use) and fails the request's partition; a
  leadership change of the partition drops it too. Dead-letter copies: single node only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from tidelog.broker import clock
from tidelog.broker.internal_topics import SHARE_GROUP_STATE_TOPIC
from tidelog.broker.share.dead_letter import TOPIC_CONFIG as DEAD_LETTER_TOPIC_CONFIG
from tidelog.broker.share.dead_letter import copy_dead_letters
from tidelog.broker.share.filtering import TIDELOG_GROUP_CONFIGS
from tidelog.broker.share.metrics import ShareCollector
from tidelog.broker.share.persister import StatePersister
from tidelog.broker.share.state_coordinator import ShareStateCoordinator
from tidelog.coordinator.share_group import (
    ShareGroupCoordinator,
    ShareHeartbeatRequest,
    ShareHeartbeatResponse,
)
from tidelog.coordinator.share_partition import SharePartition, ShareSettings, StateBatch
from tidelog.coordinator.share_records import (
    SNAPSHOT_TYPE,
    UPDATE_TYPE,
    PersistedStateBatch,
    SharePartitionKey,
    ShareSnapshotValue,
    ShareStateRecord,
    ShareUpdateValue,
    decode_share_record,
)
from tidelog.coordinator.share_retry import CONFIG as RETRY_BACKOFF_CONFIG
from tidelog.coordinator.share_retry import configured_backoff
from tidelog.errors import CorruptRecordError, ErrorCode, KafkaError
from tidelog.records.batch import RecordBatch
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.record import iter_records
from tidelog.storage.log_scan import iter_batches_from
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from tidelog.broker.replication.replica_manager import Replication
    from tidelog.broker.state import Broker

log = logging.getLogger("tidelog.broker.share")
SNAPSHOT_EVERY = 500  # share.coordinator.snapshot.update.records.per.snapshot (Kafka: 500)
MAX_SESSIONS = 1000  # Kafka's share sessions per broker bound (max.share.session.cache.size)
CONFIGS_FILE = "share-group-configs.json"
MAX_SUMMARY_PARTITIONS = 10_000  # partitions a cluster's offsets admin asks about per group
SUMMARY_CONCURRENCY = 16

# Group configs (IncrementalAlterConfigs on GROUP resources) Tidelog knows, with their checks.
GROUP_CONFIG_NAMES = (
    "share.auto.offset.reset",
    "share.record.lock.duration.ms",
    "share.delivery.count.limit",
    "share.isolation.level",
    "share.session.timeout.ms",
    "share.heartbeat.interval.ms",
    DEAD_LETTER_TOPIC_CONFIG,
    *TIDELOG_GROUP_CONFIGS,  # retry back-off and filters (broker/share/filtering.py)
)


@dataclass(slots=True)
class ShareSession:
    epoch: int  # the epoch the next request must carry
    partitions: dict[tuple[uuid.UUID, int], None] = field(default_factory=dict)  # ordered set


@dataclass(slots=True)
class _Persisted:
    snapshot_epoch: int = 0
    updates: int = 0
    since_snapshot: set[int] = field(default_factory=set)


class ShareService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        config = broker.config
        self.coordinator = ShareGroupCoordinator(config.group_share_session_timeout_ms)
        self.partitions: dict[tuple[str, uuid.UUID, int], SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.group_configs: dict[str, dict[str, str]] = self._load_configs()
        self._persisted: dict[tuple[str, uuid.UUID, int], _Persisted] = {}
        self._restored: dict[tuple[str, uuid.UUID, int], tuple[int, list[StateBatch]]] = {}
        # Share partitions restored with ARCHIVING records: their copies may exist already.
        self._recheck: set[tuple[str, uuid.UUID, int]] = set()
        self._timer: asyncio.TimerHandle | None = None
        # Cluster mode: the share coordinator here, and the way to it from share partitions.
        self.state_coordinator: ShareStateCoordinator | None = None
        self.persister: StatePersister | None = None
        self._epochs: dict[tuple[str, uuid.UUID, int], tuple[int, int]] = {}  # state, leader
        self._loads: dict[tuple[str, uuid.UUID, int], asyncio.Lock] = {}
        replication = cast("Replication | None", broker.replication)
        if replication is not None:
            self.state_coordinator = ShareStateCoordinator(broker, replication)
            self.persister = StatePersister(replication, self.state_coordinator,
                                            config.node_id)
            replication.role_listeners.append(self._on_role)
        else:
            self._ensure_topic()
            self._load_state()
        registry = getattr(broker.metrics, "registry", None)
        if registry is not None:  # metrics on: share metrics at scrape time
            registry.register(ShareCollector(lambda: self.partitions, self._topic_name))

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        info = self.broker.topics.by_id(topic_id)
        return None if info is None else info.name

    # ------------------------------------------------------------------ group configs
    def _configs_path(self) -> str:
        return os.path.join(self.broker.config.data_dir, CONFIGS_FILE)

    def _load_configs(self) -> dict[str, dict[str, str]]:
        try:
            with open(self._configs_path(), encoding="utf-8") as handle:
                loaded = json.load(handle)
        except FileNotFoundError:
            return {}
        return {str(g): {str(k): str(v) for k, v in c.items()} for g, c in loaded.items()}

    def set_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """Persist the group's overrides (blocking file I/O, small) and apply them to its
        share partitions."""
        if configs:
            self.group_configs[group_id] = dict(configs)
        else:
            self.group_configs.pop(group_id, None)
        temporary = self._configs_path() + ".tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(self.group_configs, handle, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self._configs_path())
        settings = self.settings(group_id)
        for (group, _, _), partition in self.partitions.items():
            if group == group_id:
                partition.settings = settings

    def settings(self, group_id: str) -> ShareSettings:
        config = self.broker.config
        overrides = self.group_configs.get(group_id, {})
        return ShareSettings(
            record_lock_duration_ms=int(overrides.get(
                "share.record.lock.duration.ms", config.group_share_record_lock_duration_ms)),
            delivery_count_limit=int(overrides.get(
                "share.delivery.count.limit", config.group_share_delivery_count_limit)),
            max_record_locks=config.group_share_partition_max_record_locks,
            dead_letter=bool(overrides.get(DEAD_LETTER_TOPIC_CONFIG)),
            retry_backoff_ms=configured_backoff(overrides.get(RETRY_BACKOFF_CONFIG, "")),
        )

    def heartbeat_interval_ms(self, group_id: str) -> int:
        overrides = self.group_configs.get(group_id, {})
        return int(overrides.get("share.heartbeat.interval.ms",
                                 self.broker.config.group_share_heartbeat_interval_ms))

    def session_timeout_ms(self, group_id: str) -> int:
        """The group's `share.session.timeout.ms`, else the broker's
        `group.share.session.timeout.ms` (Kafka's group config overrides the broker's)."""
        overrides = self.group_configs.get(group_id, {})
        return int(overrides.get("share.session.timeout.ms",
                                 self.broker.config.group_share_session_timeout_ms))

    # ------------------------------------------------------------------ membership
    def heartbeat(self, request: ShareHeartbeatRequest) -> ShareHeartbeatResponse:
        now_ms = clock.now_ms()
        result = self.coordinator.heartbeat(request, self._topic_sizes(), now_ms,
                                            self.session_timeout_ms(request.group_id))
        # A member leaving (epoch -1) keeps its share session: clients send their last
        # acknowledgements and the session's close (epoch -1) around the same time, in
        # either order; the close, or the locks' expiry, releases what it still holds.
        self._schedule_expiry()
        return result.response

    def _topic_sizes(self) -> dict[str, int]:
        return {info.name: info.partitions for info in self.broker.topics.all()
                if not info.internal}

    def _member_gone(self, group_id: str, member_id: str) -> None:
        self.sessions.pop((group_id, member_id), None)
        self._release(group_id, member_id)

    def _release(self, group_id: str, member_id: str) -> None:
        """The member's locks go back; fetches parked on those partitions wake."""
        for (group, topic_id, index), partition in self.partitions.items():
            if group == group_id and partition.release_member(member_id):
                name = self._topic_name(topic_id)
                if name is not None:
                    self.broker.append_waiters.notify(TopicPartition(name, index))

    def _schedule_expiry(self) -> None:
        deadline = self.coordinator.next_deadline_ms()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if deadline is None:
            return
        delay_s = max(0.0, (deadline - clock.now_ms()) / 1000) + 0.01
        self._timer = asyncio.get_running_loop().call_later(delay_s, self._expire)

    def _expire(self) -> None:
        self._timer = None
        for group_id, member_id, _records in self.coordinator.expire(
            clock.now_ms(), self._topic_sizes()
        ):
            log.info("share group %s: member %s session expired", group_id, member_id)
            self._member_gone(group_id, member_id)
        self._schedule_expiry()

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of an empty share group: its share-partition state goes too
        (tombstones in `__share_group_state`, Kafka's DeleteShareGroupState), and its configs."""
        error, _records = self.coordinator.delete(group_id)
        if error is ErrorCode.NONE:
            keys = {k for k in (*self.partitions, *self._persisted, *self._restored)
                    if k[0] == group_id}
            for key in keys:
                self.partitions.pop(key, None)
                self._persisted.pop(key, None)
                self._restored.pop(key, None)
                await self.forget(*key)
            if group_id in self.group_configs:
                self.set_group_configs(group_id, {})
        return error

    # ------------------------------------------------------------------ share sessions
    def session_for(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """Kafka's ShareSessionCache rules; raises the session's error (request-level)."""
        key = (group_id, member_id)
        if epoch == 0:
            if key not in self.sessions and len(self.sessions) >= MAX_SESSIONS:
                # Full: sessions of members no longer in their group go first.
                for stale in [k for k in self.sessions if not self.coordinator.is_member(*k)]:
                    del self.sessions[stale]
            if key not in self.sessions and len(self.sessions) >= MAX_SESSIONS:
                raise KafkaError(ErrorCode.SHARE_SESSION_LIMIT_REACHED)
            session = self.sessions[key] = ShareSession(1)
            return session
        session_found = self.sessions.get(key)
        if session_found is None:
            raise KafkaError(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if epoch == -1:
            return session_found
        if epoch != session_found.epoch:
            raise KafkaError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        return session_found

    def close_session(self, group_id: str, member_id: str) -> None:
        """Epoch -1: the session ends and the member's acquired records go back."""
        if self.sessions.pop((group_id, member_id), None) is not None:
            self._release(group_id, member_id)

    # ------------------------------------------------------------------ share partitions
    def share_partition(
        self, group_id: str, topic: str, topic_id: uuid.UUID, partition: int
    ) -> SharePartition:
        key = (group_id, topic_id, partition)
        found = self.partitions.get(key)
        if found is not None:
            return found
        partition_log = self.broker.partition_log(topic, partition)
        settings = self.settings(group_id)
        restored = self._restored.pop(key, None)
        if restored is not None:
            start_offset, batches = restored
            share_partition = SharePartition(start_offset, settings)
            share_partition.restore(start_offset, batches)
            share_partition.move_start(partition_log.log_start_offset)
            if share_partition.dead_letters:
                self._recheck.add(key)
        else:
            reset = self.group_configs.get(group_id, {}).get("share.auto.offset.reset", "latest")
            start = (partition_log.log_start_offset if reset == "earliest"
                     else partition_log.log_end_offset)
            share_partition = SharePartition(start, settings)
            share_partition.start_moved = True  # persisted with the first write
        self.partitions[key] = share_partition
        return share_partition

    # ------------------------------------------------------------------ cluster mode
    def _on_role(self, tp: TopicPartition, _is_leader: bool) -> None:
        """Leadership of a partition gained or lost here: its share partitions go (a new
        leader reads them from the share coordinator at their next use)."""
        info = self.broker.topics.get(tp.topic)
        if info is None or info.internal:
            return
        for key in {k for k in (*self.partitions, *self._restored, *self._epochs)
                    if k[1] == info.topic_id and k[2] == tp.partition}:
            self._drop(key)

    def _drop(self, key: tuple[str, uuid.UUID, int]) -> None:
        self.partitions.pop(key, None)
        self._restored.pop(key, None)
        self._epochs.pop(key, None)
        name = self._topic_name(key[1])
        if name is not None:  # parked fetches look again (and find the partition gone)
            self.broker.append_waiters.notify(TopicPartition(name, key[2]))

    async def load(self, group_id: str, topic: str, topic_id: uuid.UUID, partition: int) -> None:
        """Cluster mode: before a share partition's first use here, its state from the share
        coordinator (ReadShareGroupState with this leader's epoch). Raises KafkaError."""
        persister = self.persister
        key = (group_id, topic_id, partition)
        if persister is None or key in self.partitions or key in self._epochs:
            return
        lock = self._loads.setdefault(key, asyncio.Lock())
        async with lock:
            if key in self.partitions or key in self._epochs:
                return
            replication = cast("Replication", self.broker.replication)
            leader_epoch = replication.leader_epoch(TopicPartition(topic, partition))
            try:
                found = await persister.read(key, leader_epoch)
            finally:
                self._loads.pop(key, None)
            self._epochs[key] = (found.state_epoch, leader_epoch)
            if found.start_offset >= 0:
                self._restored[key] = (found.start_offset, [
                    StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in found.batches])

    # ------------------------------------------------------------------ share-group offsets
    def knows_group(self, group_id: str) -> bool:
        """A share group with members, or with share-partition state (live or persisted)."""
        if group_id in self.coordinator.groups:
            return True
        return any(k[0] == group_id for k in (*self.partitions, *self._restored, *self._persisted))

    def is_empty(self, group_id: str) -> bool:
        group = self.coordinator.groups.get(group_id)
        return group is None or not group.members

    def start_offset(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int | None:
        """The SPSO of a share partition (None: no state), without creating it."""
        key = (group_id, topic_id, partition)
        live = self.partitions.get(key)
        if live is not None:
            return live.start_offset
        restored = self._restored.get(key)
        return None if restored is None else restored[0]

    def delivery_complete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        """In-flight offsets past the SPSO that are done (acknowledged or archived)."""
        live = self.partitions.get((group_id, topic_id, partition))
        if live is None:
            return 0
        return sum(1 for r in live.records.values() if r.state.value in (2, 4))

    def share_partition_keys(self, group_id: str) -> set[tuple[uuid.UUID, int]]:
        return {(k[1], k[2]) for k in (*self.partitions, *self._restored) if k[0] == group_id}

    async def state_keys(self, group_id: str) -> set[tuple[uuid.UUID, int]]:
        """The share partitions with state: in a cluster, asked of the share coordinators for
        every partition of every topic (at most MAX_SUMMARY_PARTITIONS, concurrently)."""
        if self.persister is None:
            return self.share_partition_keys(group_id)
        wanted = [(info.topic_id, index) for info in self.broker.topics.all()
                  if not info.internal for index in range(info.partitions)]
        found = await self.summaries(group_id, wanted[:MAX_SUMMARY_PARTITIONS])
        return {key for key, (start, _) in found.items() if start is not None}

    async def summaries(self, group_id: str, keys: list[tuple[uuid.UUID, int]]
                        ) -> dict[tuple[uuid.UUID, int], tuple[int | None, int]]:
        """(SPSO or None without state, offsets past it acknowledged or archived) per
        share partition: here on a single node, from the share coordinator in a cluster
        (Kafka's ReadShareGroupStateSummary)."""
        persister = self.persister
        if persister is None:
            return {(t, p): (self.start_offset(group_id, t, p),
                             self.delivery_complete(group_id, t, p)) for t, p in keys}
        limit = asyncio.Semaphore(SUMMARY_CONCURRENCY)

        async def one(key: tuple[uuid.UUID, int]) -> tuple[int | None, int]:
            async with limit:
                found = await persister.read((group_id, *key), -1)
            if found.start_offset < 0:
                return None, 0
            return found.start_offset, sum(b.last_offset - b.first_offset + 1
                                           for b in found.batches if b.delivery_state in (2, 4))

        answers = await asyncio.gather(*(one(key) for key in keys))
        return dict(zip(keys, answers, strict=True))

    async def reset_start(
        self, group_id: str, topic: str, topic_id: uuid.UUID, partition: int, offset: int
    ) -> None:
        """AlterShareGroupOffsets: the share partition starts over at `offset` (an empty
        group: nothing in flight is owned), written as a snapshot."""
        key = (group_id, topic_id, partition)
        if self.persister is not None:  # a new state epoch fences the partition's leader
            state_epoch = max(self._epochs.get(key, (0, -1))[0], await self._state_epoch(key))
            self._drop(key)
            await self.persister.initialize(key, state_epoch + 1, offset)
            return
        self._restored.pop(key, None)
        fresh = SharePartition(offset, self.settings(group_id))
        fresh.start_moved = True
        self.partitions[key] = fresh
        self._persisted.setdefault(key, _Persisted()).updates = SNAPSHOT_EVERY  # a snapshot
        await self._write_state(group_id, topic_id, partition)

    async def _state_epoch(self, key: tuple[str, uuid.UUID, int]) -> int:
        assert self.persister is not None
        return (await self.persister.read(key, -1)).state_epoch

    async def forget_partition(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        """DeleteShareGroupOffsets: the share partition's state goes (a tombstone)."""
        key = (group_id, topic_id, partition)
        self.partitions.pop(key, None)
        self._restored.pop(key, None)
        self._persisted.pop(key, None)
        await self.forget(group_id, topic_id, partition)

    # ------------------------------------------------------------------ __share_group_state
    def _ensure_topic(self) -> None:
        if self.broker.topics.get(SHARE_GROUP_STATE_TOPIC) is None:
            # Kafka's settings for the topic: compacted, 100 MiB segments (one partition on a
            # single node, as for __consumer_offsets here).
            configs = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}
            self.broker.create_topic(SHARE_GROUP_STATE_TOPIC, 1, configs, internal=True)

    def _load_state(self) -> None:
        """Replay `__share_group_state` (blocking reads, at start): per key the latest
        snapshot, then the latest update written after it."""
        partition_log = self.broker.partition_log(SHARE_GROUP_STATE_TOPIC, 0)
        state: dict[tuple[str, uuid.UUID, int], tuple[int, dict[int, StateBatch]]] = {}
        for batch in iter_batches_from(partition_log, partition_log.log_start_offset):
            if batch.is_control:
                continue
            for record in iter_records(batch):
                if record.key is None:
                    raise CorruptRecordError("__share_group_state record without key")
                self._replay(decode_share_record(record.key, record.value), state)
        for key, (start, by_offset) in state.items():
            self._restored[key] = (start, [by_offset[o] for o in sorted(by_offset)])
        log.info("share state loaded for %d share partitions", len(self._restored))

    def _replay(
        self,
        record: ShareStateRecord,
        state: dict[tuple[str, uuid.UUID, int], tuple[int, dict[int, StateBatch]]],
    ) -> None:
        key = (record.key.group_id, record.key.topic_id, record.key.partition)
        value = record.value
        if value is None:
            state.pop(key, None)
            return
        persisted = self._persisted.setdefault(key, _Persisted())
        if isinstance(value, ShareSnapshotValue):
            persisted.snapshot_epoch = value.snapshot_epoch
            by_offset: dict[int, StateBatch] = {}
            start = value.start_offset
        else:
            if key not in state or value.snapshot_epoch != persisted.snapshot_epoch:
                return  # an update of an older snapshot (compaction kept it): superseded
            start, by_offset = state[key]
            if value.start_offset >= 0:
                start = value.start_offset
        for batch in value.state_batches:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                by_offset[offset] = StateBatch(offset, offset, batch.delivery_state,
                                               batch.delivery_count)
        state[key] = (start, {o: b for o, b in by_offset.items() if o >= start})

    async def persist(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        """Write what changed in this share partition since its last write (nothing when
        nothing did); returns once appended (after fsync in durability=sync). Records it
        made ARCHIVING are then copied to the group's dead-letter topic and written ARCHIVED."""
        await self._write_state(group_id, topic_id, partition)
        share_partition = self.partitions.get((group_id, topic_id, partition))
        if share_partition is None or not share_partition.dead_letters:
            return
        info = self.broker.topics.by_id(topic_id)
        name = self.group_configs.get(group_id, {}).get(DEAD_LETTER_TOPIC_CONFIG)
        if info is None:
            return
        if self.persister is not None and name:  # a cluster's DLQ partition may be elsewhere
            log.warning("share group %s: dead-letter copies are single-node only", group_id)
            name = None
        key = (group_id, topic_id, partition)
        copied = copy_dead_letters(
            self.broker, group_id, info.name, partition, share_partition, name or "",
            key in self._recheck,
        ) if name else list(share_partition.dead_letters)
        self._recheck.discard(key)
        share_partition.dead_lettered(copied)
        await self._write_state(group_id, topic_id, partition)

    async def _write_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        key = (group_id, topic_id, partition)
        share_partition = self.partitions.get(key)
        if share_partition is None:  # the group was deleted meanwhile
            return
        dirty, moved = share_partition.drain_dirty()
        if not dirty and not moved:
            return
        if self.persister is not None:
            state_epoch, leader_epoch = self._epochs.get(key, (0, -1))
            try:
                await self.persister.write(
                    key, state_epoch, leader_epoch, share_partition.start_offset,
                    _persisted_batches(share_partition.state_batches(dirty)))
            except KafkaError:
                if self.partitions.get(key) is share_partition:
                    self._drop(key)  # read again from the share coordinator at next use
                raise
            return
        persisted = self._persisted.setdefault(key, _Persisted())
        record_key = SharePartitionKey(group_id, topic_id, partition)
        now_ms = clock.now_ms()
        persisted.since_snapshot |= dirty
        persisted.updates += 1
        if persisted.updates >= SNAPSHOT_EVERY or persisted.snapshot_epoch == 0:
            persisted.snapshot_epoch += 1
            persisted.updates = 0
            persisted.since_snapshot = set()
            record = ShareStateRecord(record_key, ShareSnapshotValue(
                persisted.snapshot_epoch, 0, 0, share_partition.start_offset, now_ms, now_ms,
                _persisted_batches(share_partition.state_batches()),
            ), SNAPSHOT_TYPE)
        else:
            persisted.since_snapshot = {
                o for o in persisted.since_snapshot if o >= share_partition.start_offset
            }
            record = ShareStateRecord(record_key, ShareUpdateValue(
                persisted.snapshot_epoch, 0, share_partition.start_offset,
                _persisted_batches(share_partition.state_batches(persisted.since_snapshot)),
            ), UPDATE_TYPE)
        await self._append([record], now_ms)

    async def forget(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        if self.persister is not None:
            await self.persister.delete((group_id, topic_id, partition))
            return
        record = ShareStateRecord(SharePartitionKey(group_id, topic_id, partition), None)
        await self._append([record], clock.now_ms())

    async def _append(self, records: list[ShareStateRecord], now_ms: int) -> None:
        partition_log = self.broker.partition_log(SHARE_GROUP_STATE_TOPIC, 0)
        buffer = build_batch(
            [NewRecord(value=r.value_bytes(), key=r.key_bytes()) for r in records], now_ms=now_ms
        )
        try:
            appended = partition_log.append([RecordBatch(memoryview(buffer))], now_ms=now_ms)
        except OSError as error:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(error)) from None
        if partition_log.config.durability == "sync":
            await self.broker.wait_durable(partition_log, appended.last_offset + 1)

    def close(self) -> None:
        if self.persister is not None:
            self.persister.close()
        if self.state_coordinator is not None:
            self.state_coordinator.close()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _persisted_batches(batches: list[StateBatch]) -> tuple[PersistedStateBatch, ...]:
    return tuple(
        PersistedStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in batches
    )


def service(broker: Broker) -> ShareService:
    """The broker's share service, created (topic created and replayed) on first use."""
    existing = broker.share_service
    if existing is None:
        existing = broker.share_service = ShareService(broker)
    assert isinstance(existing, ShareService)
    return existing


def started(broker: Broker) -> ShareService | None:
    """The share service if something started it (ListGroups and DeleteGroups must not create
    `__share_group_state` just to find no share groups)."""
    existing = broker.share_service
    return existing if isinstance(existing, ShareService) else None
