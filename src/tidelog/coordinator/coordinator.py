"""One group coordinator shard: the groups and offsets of one `__consumer_offsets` partition.

The broker owns one shard per `__consumer_offsets` partition (a group lives in partition
abs(java_string_hash(group_id)) mod partitions). Every operation returns a `Result`; the caller
appends `result.records` to the partition and then calls `replay()` on each of them — the one
path that changes persisted state, also used by `load()` at start. Classic-group rebalance
bookkeeping (parked requests, join deadlines) and timer deadlines are in-memory only, as in Kafka.

Runs on the broker's event loop; no I/O, no clock reads (every call takes `now_ms`).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from tidelog.coordinator import (
    classic,
    classic_members,
    classic_sync,
    consumer_heartbeat,
    migration,
)
from tidelog.coordinator.consumer_group import ConsumerGroup
from tidelog.coordinator.group import ClassicGroup, GroupState, validate_commit
from tidelog.coordinator.messages import (
    HEARTBEAT_TIMER,
    SESSION_TIMER,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedGroup,
    GroupConfig,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListedGroup,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    Result,
    SyncGroupRequest,
    SyncGroupResponse,
    TimerKey,
    TimerRequest,
    TopicsImage,
)
from tidelog.coordinator.offsets import OffsetStore, Partition
from tidelog.coordinator.records import (
    ConsumerGroupMetadataKey,
    CoordinatorRecord,
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
)
from tidelog.coordinator.txn_offsets import PendingTxnOffsets, TransactionalRecord, TransactionEnd
from tidelog.errors import CorruptRecordError, ErrorCode

Group = ClassicGroup | ConsumerGroup


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (UTF-16 code units, 32-bit signed overflow)."""
    value = 0
    data = text.encode("utf-16-be")
    for position in range(0, len(data), 2):
        value = (31 * value + ((data[position] << 8) | data[position + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's Utils.abs(groupId.hashCode) % partitions (abs(MIN_VALUE) is 0 there)."""
    value = java_string_hash(group_id)
    return (0 if value == -(1 << 31) else abs(value)) % partitions


@dataclass(frozen=True, slots=True)
class ShardSnapshot:
    """Some groups' whole state (in-memory and replayed) at one moment, to revert to: the
    broker applies an operation before its records are durable and reverts if they never
    become so (Kafka's coordinator runtime keeps such snapshots in its SnapshotRegistry)."""

    groups: dict[str, bytes | None]  # each group pickled (a deep copy, ~3x faster); None: absent
    offsets: dict[str, dict[Partition, OffsetCommitValue] | None]
    deadlines: dict[TimerKey, int]  # the deadlines of these groups


def _pickled(group: Group | None) -> bytes | None:
    return None if group is None else pickle.dumps(group, pickle.HIGHEST_PROTOCOL)


class GroupCoordinatorShard:
    def __init__(self, config: GroupConfig) -> None:
        self.config = config
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetStore()
        self.deadlines: dict[TimerKey, int] = {}  # consumer-group session/revocation deadlines
        self.pending_txn_offsets = PendingTxnOffsets()  # TxnOffsetCommit until the marker

    # ------------------------------------------------------------ snapshots (undo)

    def snapshot(self, group_ids: Iterable[str]) -> ShardSnapshot:
        """Everything about `group_ids`; costs a copy of those groups only."""
        ids = set(group_ids)
        return ShardSnapshot(
            {g: _pickled(self.groups.get(g)) for g in ids},
            {g: self.offsets.group_offsets(g) for g in ids},
            {k: v for k, v in self.deadlines.items() if k[1] in ids},
        )

    def restore(self, snapshot: ShardSnapshot) -> None:
        """Put the snapshot's groups back as they were (later changes to them are lost)."""
        for group_id, group in snapshot.groups.items():
            if group is None:
                self.groups.pop(group_id, None)
            else:
                self.groups[group_id] = pickle.loads(group)  # a fresh copy each time
            self.offsets.restore_group(group_id, snapshot.offsets[group_id])
        for key in [k for k in self.deadlines if k[1] in snapshot.groups]:
            del self.deadlines[key]
        self.deadlines.update(snapshot.deadlines)

    # ------------------------------------------------------------ replay and load

    def replay(self, record: CoordinatorRecord | TransactionalRecord | TransactionEnd) -> None:
        if isinstance(record, TransactionalRecord):
            self.pending_txn_offsets.add(record.producer_id, record.record)
            return
        if isinstance(record, TransactionEnd):
            for pending in self.pending_txn_offsets.end(record.producer_id):
                if record.committed:
                    self.replay(pending)
            return
        key, value = record.key, record.value
        if isinstance(key, OffsetCommitKey):
            self.offsets.replay(key, value)  # type: ignore[arg-type]
        elif isinstance(key, GroupMetadataKey):
            existing = self.groups.get(key.group)
            if value is None:
                if isinstance(existing, ClassicGroup):
                    existing.state = GroupState.DEAD
                    del self.groups[key.group]
                return
            if not isinstance(existing, ClassicGroup):
                existing = ClassicGroup(key.group)
                self.groups[key.group] = existing
            existing.replay(value)  # type: ignore[arg-type]
        else:
            group_id = key.group_id
            group = self.groups.get(group_id)
            if not isinstance(group, ConsumerGroup):
                if value is None:
                    return
                group = ConsumerGroup(group_id)
                self.groups[group_id] = group
            group.replay(record)
            if value is None and isinstance(key, ConsumerGroupMetadataKey):
                del self.groups[group_id]

    def load(
        self, records: Iterable[CoordinatorRecord | TransactionalRecord | TransactionEnd],
        now_ms: int,
    ) -> list[TimerRequest]:
        """Replay a whole partition; returns session timers for the members it brought back."""
        for record in records:
            self.replay(record)
        timers: list[TimerRequest] = []
        for group in self.groups.values():
            if isinstance(group, ConsumerGroup):
                for member_id, member in group.members.items():
                    key = (SESSION_TIMER, group.group_id, member_id)
                    session = self.config.consumer_session_timeout_ms
                    if member.classic is not None:  # joined by JoinGroup (mixed group)
                        session = member.classic.session_timeout_ms
                    self.deadlines[key] = now_ms + session
                    timers.append(TimerRequest(key, self.deadlines[key]))
            else:
                for item in group.members.values():
                    item.session_deadline_ms = now_ms + item.session_timeout_ms
                    key = (HEARTBEAT_TIMER, group.group_id, item.member_id)
                    timers.append(TimerRequest(key, item.session_deadline_ms))
        return timers

    # ------------------------------------------------------------ classic protocol

    def join_group(
        self, request: JoinGroupRequest, now_ms: int, topics: TopicsImage | None = None
    ) -> Result[JoinGroupResponse]:
        if not request.group_id:
            return Result(response=JoinGroupResponse(ErrorCode.INVALID_GROUP_ID))
        group = self.groups.get(request.group_id)
        prefix: list[CoordinatorRecord] = []
        if isinstance(group, ConsumerGroup):
            if not (
                self.config.min_session_timeout_ms
                <= request.session_timeout_ms
                <= self.config.max_session_timeout_ms
            ):
                error = JoinGroupResponse(ErrorCode.INVALID_SESSION_TIMEOUT, request.member_id)
                return Result(response=error)
            if group.members:
                # A classic member joins a consumer group (KIP-848 mixed group).
                return self._join_consumer_group(group, request, topics or {}, now_ms)
            # An empty consumer group becomes a classic group (Kafka: its records go).
            prefix = consumer_heartbeat.delete_records(group)
            del self.groups[request.group_id]
            group = None
        created = group is None
        if group is None:
            if request.member_id:
                error = JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID, member_id=request.member_id)
                return Result(response=error)
            group = ClassicGroup(request.group_id, state_timestamp_ms=now_ms)
            self.groups[request.group_id] = group
        result = classic.join_group(group, request, self.config, now_ms)
        if created and not group.members and not group.pending_members and not result.records:
            if prefix:
                result.records[:0] = prefix  # the consumer group's tombstones, still
            else:
                del self.groups[request.group_id]  # a refused first join leaves no group behind
            return result
        result.records[:0] = prefix
        return result

    def _join_consumer_group(
        self, group: ConsumerGroup, request: JoinGroupRequest, topics: TopicsImage, now_ms: int
    ) -> Result[JoinGroupResponse]:
        replaced = migration.replaced_last_consumer_member(group, request, self.config)
        result = classic_members.join_group(
            group, request, topics, self.config, self.deadlines, now_ms
        )
        if replaced is None or result.response is None:
            return result
        if result.response.error is not ErrorCode.NONE:
            return result
        # The last consumer-protocol member was replaced by a classic static member: the group
        # becomes classic at once, the newcomer holding its predecessor's target (Kafka).
        joined = ConsumerGroup(group.group_id, group.group_epoch, group.assignment_epoch,
                               dict(group.members), dict(group.target),
                               dict(group.subscription_metadata))
        for record in result.records:
            joined.replay(record)
        converted, conversion = migration.to_classic_group(
            group, replaced, self.config, self.deadlines, now_ms,
            replacement=joined.members[result.response.member_id],
        )
        self.groups[group.group_id] = converted
        response = replace(result.response, generation_id=converted.generation_id)
        return Result(
            conversion.records, response, result.completions + conversion.completions,
            result.timers + conversion.timers,
        )

    def _classic(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    def sync_group(self, request: SyncGroupRequest, now_ms: int) -> Result[SyncGroupResponse]:
        mixed = self.groups.get(request.group_id)
        if isinstance(mixed, ConsumerGroup):
            return classic_members.sync_group(mixed, request, self.deadlines, now_ms)
        group = self._classic(request.group_id)
        if group is None:
            return Result(response=SyncGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID))
        return classic_sync.sync_group(group, request, self.config, now_ms)

    def heartbeat(self, request: HeartbeatRequest, now_ms: int) -> Result[ErrorCode]:
        if not request.group_id:
            return Result(response=ErrorCode.INVALID_GROUP_ID)  # checked before the member
        mixed = self.groups.get(request.group_id)
        if isinstance(mixed, ConsumerGroup):
            return classic_members.heartbeat(mixed, request, self.deadlines, now_ms)
        group = self._classic(request.group_id)
        if group is None:
            return Result(response=ErrorCode.UNKNOWN_MEMBER_ID)
        return classic_sync.heartbeat(group, request, self.config, now_ms)

    def leave_group(
        self, request: LeaveGroupRequest, now_ms: int, topics: TopicsImage | None = None
    ) -> Result[LeaveGroupResponse]:
        mixed = self.groups.get(request.group_id)
        if isinstance(mixed, ConsumerGroup):
            return classic_members.leave_group(
                mixed, request, topics or {}, self.config, self.deadlines
            )
        group = self._classic(request.group_id)
        if group is None:
            return Result(response=LeaveGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID))
        return classic_sync.leave_group(group, request, self.config, now_ms)

    # ------------------------------------------------------------ consumer protocol

    def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest, topics: TopicsImage, now_ms: int
    ) -> Result[ConsumerGroupHeartbeatResponse]:
        if not request.group_id:
            error = ConsumerGroupHeartbeatResponse(
                ErrorCode.INVALID_REQUEST, "GroupId can't be empty"
            )
            return Result(response=error)
        if request.member_id_required and not request.member_id:
            # Kafka's request validation for v1+ (KIP-1082): no broker-generated ids.
            error = ConsumerGroupHeartbeatResponse(
                ErrorCode.INVALID_REQUEST, "MemberId can't be empty."
            )
            return Result(response=error)
        group = self.groups.get(request.group_id)
        prefix: list[CoordinatorRecord] = []
        upgrade: Result[None] | None = None
        if isinstance(group, ClassicGroup):
            if group.members or group.state is not GroupState.EMPTY:
                message = f"Group {request.group_id} is not a consumer group"
                # Only a joining member (epoch 0) may create, hence upgrade, a consumer group.
                if request.member_epoch != 0 or not migration.can_upgrade(group, self.config):
                    return Result(
                        response=ConsumerGroupHeartbeatResponse(
                            ErrorCode.GROUP_ID_NOT_FOUND, message
                        )
                    )
                try:  # online upgrade: the classic members become members of a consumer group
                    group, upgrade = migration.to_consumer_group(group, topics, {}, now_ms)
                except CorruptRecordError:
                    return Result(
                        response=ConsumerGroupHeartbeatResponse(
                            ErrorCode.GROUP_ID_NOT_FOUND, message
                        )
                    )
                prefix = upgrade.records
            else:
                # An empty classic group converts: its metadata goes, its offsets stay.
                prefix.append(CoordinatorRecord(GroupMetadataKey(request.group_id), None))
                group = None
        consumer = group if isinstance(group, ConsumerGroup) else ConsumerGroup(request.group_id)
        leaving = request.member_epoch == consumer_heartbeat.LEAVE_GROUP_MEMBER_EPOCH
        if leaving and migration.can_downgrade(consumer, request.member_id, self.config):
            return self._downgrade(consumer, request.member_id, now_ms)
        result = consumer_heartbeat.consumer_group_heartbeat(
            consumer, request, topics, self.config, self.deadlines, now_ms
        )
        if result.records:
            result.records[:0] = prefix
            if upgrade is not None:
                # The conversion happens: parked classic requests rejoin, sessions carry over.
                timers = upgrade.timers
                for timer in timers:
                    if timer.deadline_ms is not None:
                        self.deadlines[timer.key] = timer.deadline_ms
                result.timers[:0] = timers
                result.completions[:0] = upgrade.completions
        return result

    def _downgrade(self, group: ConsumerGroup, leaving: str, now_ms: int) -> Result[Any]:
        """The last consumer-protocol member goes: the group becomes classic, in place (its
        join phase is in memory, as every classic group's); the records persist it."""
        converted, result = migration.to_classic_group(
            group, leaving, self.config, self.deadlines, now_ms
        )
        self.groups[group.group_id] = converted
        response = ConsumerGroupHeartbeatResponse(
            ErrorCode.NONE, None, leaving, consumer_heartbeat.LEAVE_GROUP_MEMBER_EPOCH
        )
        return Result(result.records, response, result.completions, result.timers)

    # ------------------------------------------------------------ timers

    def on_timer(self, key: TimerKey, topics: TopicsImage, now_ms: int) -> Result[object]:
        group = self.groups.get(key[1])
        if isinstance(group, ClassicGroup):
            return classic_sync.on_timer(group, key, self.config, now_ms)  # type: ignore[return-value]
        if isinstance(group, ConsumerGroup):
            deadline = self.deadlines.get(key)
            member_id = key[2]
            if (
                deadline is not None
                and now_ms >= deadline
                and migration.can_downgrade(group, member_id, self.config)
            ):
                return self._downgrade(group, member_id, now_ms)  # fenced: downgrade
            return consumer_heartbeat.on_timer(  # type: ignore[return-value]
                group, key, topics, self.config, self.deadlines, now_ms
            )
        self.deadlines.pop(key, None)
        return Result()

    # ------------------------------------------------------------ offsets

    def offset_commit(
        self, request: OffsetCommitRequest, now_ms: int
    ) -> Result[OffsetCommitResponse]:
        error = self._validate_commit(request)
        if error is not ErrorCode.NONE:
            failed = tuple((p.topic, p.partition, error) for p in request.partitions)
            return Result(response=OffsetCommitResponse(failed))
        group = self.groups.get(request.group_id)
        records: list[CoordinatorRecord] = []
        if group is None:
            # A commit outside group management creates an empty classic ("simple") group.
            simple = ClassicGroup(request.group_id, state_timestamp_ms=now_ms)
            records.append(
                CoordinatorRecord(GroupMetadataKey(request.group_id), simple.to_record(now_ms))
            )
        retention = request.retention_time_ms if request.api_version <= 4 else -1
        commits, outcomes = self.offsets.commit(
            request.group_id, request.partitions, retention, self.config, now_ms
        )
        return Result(records=records + commits, response=OffsetCommitResponse(tuple(outcomes)))

    def txn_offset_commit(
        self, request: OffsetCommitRequest, now_ms: int
    ) -> Result[OffsetCommitResponse]:
        """TxnOffsetCommit: the OffsetCommit records to append inside the producer's
        transaction (the caller replays them as `TransactionalRecord`s). KIP-447: a member id
        or generation, when given, is checked as an OffsetCommit's is; a request with neither
        (TxnOffsetCommit before v3, or a producer outside the group) is accepted, as Kafka's
        validateTransactionalOffsetCommit does."""
        if not request.group_id:
            error = ErrorCode.INVALID_GROUP_ID
        elif not request.member_id and request.generation_id < 0:
            error = ErrorCode.NONE
        else:
            error = self._validate_commit(request)
        if error is not ErrorCode.NONE:
            failed = tuple((p.topic, p.partition, error) for p in request.partitions)
            return Result(response=OffsetCommitResponse(failed))
        commits, outcomes = self.offsets.commit(
            request.group_id, request.partitions, -1, self.config, now_ms
        )
        return Result(records=commits, response=OffsetCommitResponse(tuple(outcomes)))

    def _validate_commit(self, request: OffsetCommitRequest) -> ErrorCode:
        if not request.group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(request.group_id)
        if group is None:
            if request.generation_id < 0:
                return ErrorCode.NONE
            return (
                ErrorCode.GROUP_ID_NOT_FOUND
                if request.api_version >= 9
                else ErrorCode.ILLEGAL_GENERATION
            )
        if isinstance(group, ClassicGroup):
            return validate_commit(
                group, request.generation_id, request.member_id, request.group_instance_id
            )
        if request.generation_id < 0 and not group.members:
            return ErrorCode.NONE
        if request.member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.members[request.member_id].classic is not None:
            # A classic member of a mixed group commits as classic members do (any version).
            if request.generation_id != group.members[request.member_id].member_epoch:
                return ErrorCode.ILLEGAL_GENERATION
            return ErrorCode.NONE
        if request.api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        return group.validate_epoch(request.member_id, request.generation_id)

    def offset_fetch(self, request: OffsetFetchRequest) -> OffsetFetchResponse:
        group = self.groups.get(request.group_id)
        # As Kafka: no member id and a negative epoch is an admin client or a client outside
        # the group (accepted); anything else from a consumer group is checked like a commit.
        identified = bool(request.member_id) or request.member_epoch >= 0
        if isinstance(group, ConsumerGroup) and identified:
            error = group.validate_epoch(request.member_id or "", request.member_epoch)
            if error is not ErrorCode.NONE:
                return OffsetFetchResponse(error)
        return OffsetFetchResponse(
            ErrorCode.NONE, tuple(self.offsets.fetch(request.group_id, request.partitions))
        )

    def offset_delete(
        self, group_id: str, partitions: tuple[tuple[str, int], ...]
    ) -> Result[OffsetDeleteResponse]:
        group = self.groups.get(group_id)
        if group is None and not self.offsets.has_offsets(group_id):
            return Result(response=OffsetDeleteResponse(ErrorCode.GROUP_ID_NOT_FOUND))
        subscribed: set[str] = set()
        if isinstance(group, ClassicGroup) and group.members:
            subscribed = group.subscribed_topics() or set()
            if group.protocol_type != "consumer":
                return Result(response=OffsetDeleteResponse(ErrorCode.NON_EMPTY_GROUP))
        elif isinstance(group, ConsumerGroup):
            subscribed = group.subscribed_topic_names()
        outcomes: list[tuple[str, int, ErrorCode]] = []
        deletable: list[tuple[str, int]] = []
        for topic, partition in partitions:
            if topic in subscribed:
                outcomes.append((topic, partition, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC))
            else:
                outcomes.append((topic, partition, ErrorCode.NONE))
                deletable.append((topic, partition))
        records = self.offsets.tombstones(group_id, deletable)
        return Result(
            records=records, response=OffsetDeleteResponse(ErrorCode.NONE, tuple(outcomes))
        )

    def expire_offsets(self, now_ms: int) -> list[CoordinatorRecord]:
        """Tombstones for offsets past retention, and for empty groups left with none."""
        records: list[CoordinatorRecord] = []
        retention = self.config.offsets_retention_ms
        for group_id in sorted(set(self.offsets.groups()) | set(self.groups)):
            group = self.groups.get(group_id)
            empty_since: int | None = None
            subscribed: set[str] | None = None
            if group is None:
                empty_since = 0  # offsets without a group: commit time counts
            elif isinstance(group, ClassicGroup):
                if group.state is GroupState.EMPTY:
                    empty_since = max(group.state_timestamp_ms, 0)
                else:
                    subscribed = group.subscribed_topics()
            elif not group.members:
                empty_since = 0
            else:
                subscribed = group.subscribed_topic_names()
            expired = self.offsets.expired(group_id, now_ms, retention, empty_since, subscribed)
            records.extend(expired)
            remaining = len(self.offsets.partitions(group_id)) - len(expired)
            if (
                remaining == 0
                and isinstance(group, ClassicGroup)
                and group.state is GroupState.EMPTY
            ):
                records.append(CoordinatorRecord(GroupMetadataKey(group_id), None))
            elif remaining == 0 and isinstance(group, ConsumerGroup) and not group.members:
                records.extend(consumer_heartbeat.delete_records(group))
        return records

    # ------------------------------------------------------------ admin

    def delete_groups(self, group_ids: Iterable[str]) -> Result[list[tuple[str, ErrorCode]]]:
        result: Result[list[tuple[str, ErrorCode]]] = Result(response=[])
        assert result.response is not None
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None and not self.offsets.has_offsets(group_id):
                result.response.append((group_id, ErrorCode.GROUP_ID_NOT_FOUND))
                continue
            if group is not None and group.members:
                result.response.append((group_id, ErrorCode.NON_EMPTY_GROUP))
                continue
            result.records.extend(self.offsets.tombstones(group_id))
            if isinstance(group, ConsumerGroup):
                result.records.extend(consumer_heartbeat.delete_records(group))
            else:
                result.records.append(CoordinatorRecord(GroupMetadataKey(group_id), None))
            result.response.append((group_id, ErrorCode.NONE))
        return result

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> list[ListedGroup]:
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        listed = []
        for _, group in sorted(self.groups.items()):
            item = group.listed()
            if wanted_states and item.state.lower() not in wanted_states:
                continue
            if wanted_types and item.group_type not in wanted_types:
                continue
            listed.append(item)
        return listed

    def describe_group(self, group_id: str) -> DescribedGroup:
        group = self.groups.get(group_id)
        if not isinstance(group, ClassicGroup):
            # Kafka 4 answers a KIP-848 group here as it does an unknown one: Dead, no
            # members (the classic API describes classic groups only).
            return DescribedGroup(group_id, ErrorCode.NONE)
        return group.describe()

    def describe_consumer_group(self, group_id: str) -> DescribedGroup:
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            return DescribedGroup(group_id, ErrorCode.GROUP_ID_NOT_FOUND, group_type="consumer")
        return group.describe(self.config.consumer_assignors[0])
