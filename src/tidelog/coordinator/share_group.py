"""The share-group coordinator (KIP-932): membership and assignment of share groups. Pure.

Same shape as the KIP-848 coordinator (ARCHITECTURE D9, D15): an operation returns
`ShareResult(records, response)` and state changes only by `replay(record)`; the operation
computes its answer by replaying its own records. The records are Kafka's share-group record
kinds (ShareGroupMetadata, ShareGroupMemberMetadata, ShareGroupCurrentMemberAssignment), kept
as typed values; `None` values are tombstones.

Rules (GroupMetadataManager.shareGroupHeartbeat): member epoch 0 joins (member id chosen by
the client, subscription required), -1 leaves; any other epoch must be the member's current
one (FENCED_MEMBER_EPOCH), of a known member (UNKNOWN_MEMBER_ID). A new member, a leaving one,
a subscription change or a partition-count change bumps the group epoch and recomputes the
target assignment with the `simple` assignor. Share groups have no revocation: a member takes
its new target (and the group epoch as its epoch) at its next heartbeat. A member silent for
`group.share.session.timeout.ms` is removed (`expire`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tidelog.errors import ErrorCode

Assignment = tuple[tuple[str, tuple[int, ...]], ...]  # (topic, partitions) sorted


@dataclass(frozen=True, slots=True)
class ShareGroupMetadata:
    group_id: str
    epoch: int
    subscription: tuple[tuple[str, int], ...]  # subscribed topics and their partition counts


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadata:
    group_id: str
    member_id: str
    value: ShareMemberValue | None  # None: the member left (tombstone)


@dataclass(frozen=True, slots=True)
class ShareMemberValue:
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignment:
    group_id: str
    member_id: str
    member_epoch: int
    assignment: Assignment


@dataclass(frozen=True, slots=True)
class ShareGroupTombstone:
    group_id: str  # the group is deleted


ShareRecord = (ShareGroupMetadata | ShareGroupMemberMetadata | ShareGroupCurrentMemberAssignment
               | ShareGroupTombstone)


@dataclass(slots=True)
class ShareMember:
    member_id: str
    value: ShareMemberValue
    member_epoch: int = 0
    assignment: Assignment = ()


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    epoch: int = 0
    subscription: tuple[tuple[str, int], ...] = ()
    members: dict[str, ShareMember] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def target(self) -> dict[str, Assignment]:
        partitions = dict(self.subscription)
        subscribers = {
            member_id: member.value.subscribed_topic_names
            for member_id, member in self.members.items()
        }
        return simple_assign(subscribers, partitions)


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...] | None
    client_id: str
    client_host: str


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResponse:
    error: ErrorCode
    member_id: str | None = None
    member_epoch: int = 0
    assignment: Assignment | None = None  # None: unchanged, not sent
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ShareResult:
    records: list[ShareRecord]
    response: ShareHeartbeatResponse
    left: tuple[str, ...] = ()  # members removed by this operation (their locks go back)


def simple_assign(
    subscribers: Mapping[str, tuple[str, ...]], partitions: Mapping[str, int]
) -> dict[str, Assignment]:
    """Kafka's `simple` share assignor, per topic: with at least as many subscribers as
    partitions each subscriber gets one partition round robin (partitions shared by several
    members), else the partitions are dealt round robin over the subscribers. Every partition
    of a subscribed topic has an owner; deterministic (sorted member ids)."""
    given: dict[str, dict[str, list[int]]] = {member_id: {} for member_id in subscribers}
    for topic in sorted(partitions):
        count = partitions[topic]
        members = sorted(m for m, topics in subscribers.items() if topic in topics)
        if not members or count <= 0:
            continue
        if len(members) >= count:
            for index, member_id in enumerate(members):
                given[member_id].setdefault(topic, []).append(index % count)
        else:
            for partition in range(count):
                member_id = members[partition % len(members)]
                given[member_id].setdefault(topic, []).append(partition)
    return {
        member_id: tuple((topic, tuple(sorted(ps))) for topic, ps in sorted(topics.items()))
        for member_id, topics in given.items()
    }


class ShareGroupCoordinator:
    MAX_MEMBERS = 200  # group.share.max.size (Kafka's default)

    def __init__(self, session_timeout_ms: int = 45_000) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.groups: dict[str, ShareGroup] = {}
        self.deadlines: dict[tuple[str, str], int] = {}  # (group, member) -> session deadline

    # ------------------------------------------------------------------ replay
    def replay(self, record: ShareRecord) -> None:
        if isinstance(record, ShareGroupTombstone):
            self.groups.pop(record.group_id, None)
            return
        group = self.groups.setdefault(record.group_id, ShareGroup(record.group_id))
        if isinstance(record, ShareGroupMetadata):
            group.epoch = record.epoch
            group.subscription = record.subscription
        elif isinstance(record, ShareGroupMemberMetadata):
            if record.value is None:
                group.members.pop(record.member_id, None)
                self.deadlines.pop((record.group_id, record.member_id), None)
            else:
                member = group.members.get(record.member_id)
                if member is None:
                    group.members[record.member_id] = ShareMember(record.member_id, record.value)
                else:
                    member.value = record.value
        else:
            member = group.members[record.member_id]
            member.member_epoch = record.member_epoch
            member.assignment = record.assignment

    def _replay_all(self, records: list[ShareRecord]) -> None:
        for record in records:
            self.replay(record)

    # ------------------------------------------------------------------ operations
    def heartbeat(
        self, request: ShareHeartbeatRequest, topics: Mapping[str, int], now_ms: int,
        session_timeout_ms: int | None = None,
    ) -> ShareResult:
        """`topics`: every existing topic and its partition count. `session_timeout_ms`: the
        group's own `share.session.timeout.ms` when it has one (else the broker's)."""
        if not request.member_id:
            return self._refuse(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        group = self.groups.get(request.group_id)
        member = group.members.get(request.member_id) if group else None
        if request.member_epoch == -1:
            if group is None or member is None:
                return ShareResult([], ShareHeartbeatResponse(
                    ErrorCode.NONE, request.member_id, -1))
            left = ShareHeartbeatResponse(ErrorCode.NONE, request.member_id, -1)
            return ShareResult(self._leave(group, request.member_id, topics), left,
                               left=(request.member_id,))
        if request.member_epoch == 0:
            if not request.subscribed_topic_names:
                return self._refuse(ErrorCode.INVALID_REQUEST,
                                    "SubscribedTopicNames must be set in first request.")
            if member is None and group is not None and len(group.members) >= self.MAX_MEMBERS:
                return self._refuse(ErrorCode.GROUP_MAX_SIZE_REACHED, None)
        elif member is None:
            return self._refuse(ErrorCode.UNKNOWN_MEMBER_ID, None)
        elif request.member_epoch != member.member_epoch:
            return self._refuse(ErrorCode.FENCED_MEMBER_EPOCH, None)
        group = group or ShareGroup(request.group_id)
        records: list[ShareRecord] = []
        subscribed = (request.subscribed_topic_names if request.subscribed_topic_names
                      is not None else member.value.subscribed_topic_names if member else ())
        value = ShareMemberValue(
            request.client_id, request.client_host,
            request.rack_id if request.rack_id is not None
            else (member.value.rack_id if member else None),
            tuple(sorted(set(subscribed))),
        )
        bump = member is None or member.value.subscribed_topic_names != value.subscribed_topic_names
        if member is None or member.value != value:
            records.append(ShareGroupMemberMetadata(group.group_id, request.member_id, value))
        subscription = self._subscription(group, request.member_id, value, topics)
        if bump or subscription != group.subscription:
            records.append(ShareGroupMetadata(group.group_id, group.epoch + 1, subscription))
        if request.group_id not in self.groups:
            self.groups[request.group_id] = group
        self._replay_all(records)
        joined = member is None
        member = group.members[request.member_id]
        if joined or request.member_epoch == 0 or member.member_epoch != group.epoch:
            # Catch up with the group: the current target, the group epoch as member epoch.
            catch_up: list[ShareRecord] = [ShareGroupCurrentMemberAssignment(
                group.group_id, request.member_id, group.epoch,
                group.target().get(request.member_id, ()),
            )]
            self._replay_all(catch_up)
            records += catch_up
            send = True
        else:
            send = False
        timeout_ms = self.session_timeout_ms if session_timeout_ms is None else session_timeout_ms
        self.deadlines[(group.group_id, request.member_id)] = now_ms + timeout_ms
        return ShareResult(records, ShareHeartbeatResponse(
            ErrorCode.NONE, request.member_id, member.member_epoch,
            member.assignment if send else None,
        ))

    def _subscription(
        self, group: ShareGroup, member_id: str, value: ShareMemberValue,
        topics: Mapping[str, int],
    ) -> tuple[tuple[str, int], ...]:
        names = set(value.subscribed_topic_names)
        for other_id, other in group.members.items():
            if other_id != member_id:
                names |= set(other.value.subscribed_topic_names)
        return tuple(sorted((name, topics[name]) for name in names if name in topics))

    def _leave(self, group: ShareGroup, member_id: str,
               topics: Mapping[str, int]) -> list[ShareRecord]:
        records: list[ShareRecord] = [ShareGroupMemberMetadata(group.group_id, member_id, None)]
        self._replay_all(records)
        remaining = set()
        for other in group.members.values():
            remaining |= set(other.value.subscribed_topic_names)
        subscription = tuple(sorted((n, topics[n]) for n in remaining if n in topics))
        bump: list[ShareRecord] = [ShareGroupMetadata(group.group_id, group.epoch + 1,
                                                      subscription)]
        self._replay_all(bump)
        return records + bump

    def _refuse(self, error: ErrorCode, message: str | None) -> ShareResult:
        return ShareResult([], ShareHeartbeatResponse(error, None, 0, None, message))

    def expire(
        self, now_ms: int, topics: Mapping[str, int]
    ) -> list[tuple[str, str, list[ShareRecord]]]:
        """Remove members whose session deadline passed: (group, member, records) each."""
        gone: list[tuple[str, str, list[ShareRecord]]] = []
        for (group_id, member_id), deadline in list(self.deadlines.items()):
            if deadline > now_ms:
                continue
            group = self.groups.get(group_id)
            if group is None or member_id not in group.members:
                self.deadlines.pop((group_id, member_id), None)
                continue
            gone.append((group_id, member_id, self._leave(group, member_id, topics)))
        return gone

    def next_deadline_ms(self) -> int | None:
        return min(self.deadlines.values()) if self.deadlines else None

    def delete(self, group_id: str) -> tuple[ErrorCode, list[ShareRecord]]:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, []
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP, []
        records: list[ShareRecord] = [ShareGroupTombstone(group_id)]
        self._replay_all(records)
        return ErrorCode.NONE, records

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members
