"""Server-side partition assignors for consumer (KIP-848) groups: `uniform` and `range`.

Both are pure functions of an `AssignmentSpec`: each member's subscribed topic ids, each topic's
partition count, and the previous target assignment. They return member id -> topic id ->
partitions. Every subscribed partition is owned by exactly one member that subscribes to its topic.

- `uniform` (Kafka's UniformAssignor, the default) is balanced and sticky: a member keeps what it
  had as long as that does not exceed its fair share, and only the surplus moves. With identical
  subscriptions every member gets floor(P/N) or ceil(P/N) partitions; with different
  subscriptions a partition never sits on a member holding 2+ more than another eligible member.
- `range` (Kafka's RangeAssignor) gives each member, per topic, a contiguous range of partitions,
  members sorted by id, the first P mod N members one extra.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tidelog.errors import ErrorCode, KafkaError

Partition = tuple[uuid.UUID, int]
MemberAssignment = dict[uuid.UUID, frozenset[int]]
Assignment = dict[str, MemberAssignment]


@dataclass(frozen=True, slots=True)
class AssignmentSpec:
    members: Mapping[str, frozenset[uuid.UUID]]  # member id -> subscribed topic ids
    partition_counts: Mapping[uuid.UUID, int]  # topic id -> number of partitions
    previous: Mapping[str, Mapping[uuid.UUID, frozenset[int]]]  # previous target assignment


def _sort_key(partition: Partition) -> tuple[str, int]:
    return (str(partition[0]), partition[1])


def _to_assignment(
    owned: Mapping[str, list[Partition]], members: Mapping[str, object]
) -> Assignment:
    result: Assignment = {member_id: {} for member_id in members}
    for member_id, partitions in owned.items():
        by_topic: dict[uuid.UUID, set[int]] = {}
        for topic_id, index in partitions:
            by_topic.setdefault(topic_id, set()).add(index)
        result[member_id] = {topic_id: frozenset(items) for topic_id, items in by_topic.items()}
    return result


def _eligible(spec: AssignmentSpec) -> dict[Partition, list[str]]:
    """Every subscribed, existing partition -> members that may own it (sorted by id)."""
    eligible: dict[Partition, list[str]] = {}
    for member_id in sorted(spec.members):
        for topic_id in spec.members[member_id]:
            for index in range(spec.partition_counts.get(topic_id, 0)):
                eligible.setdefault((topic_id, index), []).append(member_id)
    return eligible


def _retained(
    spec: AssignmentSpec, eligible: Mapping[Partition, list[str]]
) -> dict[str, list[Partition]]:
    """Each member's previous partitions that still exist and that it still subscribes to."""
    kept: dict[str, list[Partition]] = {member_id: [] for member_id in spec.members}
    for member_id, topics in spec.previous.items():
        if member_id not in kept:
            continue
        for topic_id, partitions in topics.items():
            for index in partitions:
                if member_id in eligible.get((topic_id, index), ()):
                    kept[member_id].append((topic_id, index))
        kept[member_id].sort(key=_sort_key)
    return kept


def uniform_assign(spec: AssignmentSpec) -> Assignment:
    if not spec.members:
        return {}
    eligible = _eligible(spec)
    kept = _retained(spec, eligible)
    subscriptions = set(spec.members.values())
    if len(subscriptions) == 1:
        owned = _uniform_homogeneous(sorted(eligible, key=_sort_key), kept)
    else:
        owned = _uniform_heterogeneous(eligible, kept)
    return _to_assignment(owned, spec.members)


def _uniform_homogeneous(
    partitions: list[Partition], kept: dict[str, list[Partition]]
) -> dict[str, list[Partition]]:
    member_ids = sorted(kept)
    min_quota, extra = divmod(len(partitions), len(member_ids))
    owned: dict[str, list[Partition]] = {}
    # Members that held the most keep the "+1" slots first: fewer partitions move.
    for member_id in sorted(member_ids, key=lambda m: (-len(kept[m]), m)):
        previous = kept[member_id]
        quota = min_quota
        if len(previous) > min_quota and extra > 0:
            quota += 1
            extra -= 1
        owned[member_id] = previous[:quota]
    taken = {partition for items in owned.values() for partition in items}
    free = [partition for partition in partitions if partition not in taken]
    position = 0
    for member_id in member_ids:  # fill everyone up to the minimum quota
        need = max(0, min_quota - len(owned[member_id]))
        owned[member_id].extend(free[position : position + need])
        position += need
    for member_id in member_ids:  # then hand out the remaining "+1" slots
        if position >= len(free):
            break
        if len(owned[member_id]) == min_quota and extra > 0:
            owned[member_id].append(free[position])
            position += 1
            extra -= 1
    return owned


def _uniform_heterogeneous(
    eligible: Mapping[Partition, list[str]], kept: dict[str, list[Partition]]
) -> dict[str, list[Partition]]:
    owned = {member_id: list(items) for member_id, items in kept.items()}
    owner = {partition: member_id for member_id, items in owned.items() for partition in items}
    for partition in sorted(eligible, key=_sort_key):
        if partition not in owner:
            target = min(eligible[partition], key=lambda m: (len(owned[m]), m))
            owned[target].append(partition)
            owner[partition] = target
    # Move partitions from heavier to lighter eligible members until no move helps. Each move
    # lowers the sum of squared counts, so the loop ends; the bound only guards mistakes.
    for _ in range(len(owner) * len(owned) + 1):
        moved = False
        for partition in sorted(owner, key=_sort_key):
            current = owner[partition]
            target = min(eligible[partition], key=lambda m: (len(owned[m]), m))
            if len(owned[target]) < len(owned[current]) - 1:
                owned[current].remove(partition)
                owned[target].append(partition)
                owner[partition] = target
                moved = True
        if not moved:
            break
    return owned


def range_assign(spec: AssignmentSpec) -> Assignment:
    result: Assignment = {member_id: {} for member_id in spec.members}
    topics = sorted({t for subscribed in spec.members.values() for t in subscribed}, key=str)
    for topic_id in topics:
        count = spec.partition_counts.get(topic_id, 0)
        subscribers = sorted(m for m, subscribed in spec.members.items() if topic_id in subscribed)
        if count == 0 or not subscribers:
            continue
        size, extra = divmod(count, len(subscribers))
        start = 0
        for position, member_id in enumerate(subscribers):
            length = size + (1 if position < extra else 0)
            if length:
                result[member_id][topic_id] = frozenset(range(start, start + length))
            start += length
    return result


ASSIGNORS: dict[str, Callable[[AssignmentSpec], Assignment]] = {
    "uniform": uniform_assign,
    "range": range_assign,
}


def assignor(name: str) -> Callable[[AssignmentSpec], Assignment]:
    try:
        return ASSIGNORS[name]
    except KeyError:
        raise KafkaError(ErrorCode.UNSUPPORTED_ASSIGNOR, f"unknown assignor {name!r}") from None
