"""Server-side assignors: every partition owned exactly once, balanced, sticky (hypothesis)."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog.coordinator.assignors import (
    Assignment,
    AssignmentSpec,
    assignor,
    range_assign,
    uniform_assign,
)
from tidelog.errors import KafkaError

TOPICS = [uuid.UUID(int=i + 1) for i in range(4)]


@st.composite
def specs(draw: st.DrawFn, homogeneous: bool | None = None) -> AssignmentSpec:
    counts = {t: draw(st.integers(0, 12)) for t in TOPICS[: draw(st.integers(1, 4))]}
    member_ids = draw(
        st.lists(st.text("abcdef", min_size=1, max_size=3), min_size=1, max_size=6, unique=True)
    )
    same = draw(st.booleans()) if homogeneous is None else homogeneous
    shared = frozenset(
        draw(st.lists(st.sampled_from(sorted(counts, key=str)), min_size=1, unique=True))
    )
    members = {
        m: shared
        if same
        else frozenset(
            draw(st.lists(st.sampled_from(sorted(counts, key=str)), min_size=1, unique=True))
        )
        for m in member_ids
    }
    previous = draw(
        st.just({}) | st.builds(lambda: uniform_assign(AssignmentSpec(members, counts, {})))
    )
    return AssignmentSpec(members, counts, previous)


def _owners(spec: AssignmentSpec, result: Assignment) -> Counter[tuple[uuid.UUID, int]]:
    owners: Counter[tuple[uuid.UUID, int]] = Counter()
    for member_id, topics in result.items():
        for topic_id, partitions in topics.items():
            assert topic_id in spec.members[member_id], "assigned an unsubscribed topic"
            for index in partitions:
                assert 0 <= index < spec.partition_counts[topic_id]
                owners[(topic_id, index)] += 1
    return owners


def _check_exactly_once(spec: AssignmentSpec, result: Assignment) -> None:
    owners = _owners(spec, result)
    subscribed = {t for topics in spec.members.values() for t in topics}
    expected = {(t, i) for t in subscribed for i in range(spec.partition_counts[t])}
    assert set(owners) == expected
    assert all(count == 1 for count in owners.values())


def _count(result: Assignment, member_id: str) -> int:
    return sum(len(p) for p in result.get(member_id, {}).values())


@settings(max_examples=150, deadline=None)
@given(specs())
def test_uniform_owns_every_partition_once_and_is_balanced(spec: AssignmentSpec) -> None:
    result = uniform_assign(spec)
    _check_exactly_once(spec, result)
    counts = {m: _count(result, m) for m in spec.members}
    if len(set(spec.members.values())) == 1:
        assert max(counts.values()) - min(counts.values()) <= 1
    for member_id, topics in result.items():  # no partition could move to a lighter member
        for topic_id in topics:
            for other, subscribed in spec.members.items():
                if topic_id in subscribed:
                    assert counts[other] >= counts[member_id] - 1


@settings(max_examples=100, deadline=None)
@given(specs(homogeneous=True), st.text("ghij", min_size=1, max_size=2))
def test_uniform_is_sticky_when_a_member_joins(spec: AssignmentSpec, newcomer: str) -> None:
    before = uniform_assign(AssignmentSpec(spec.members, spec.partition_counts, {}))
    assert uniform_assign(AssignmentSpec(spec.members, spec.partition_counts, before)) == before
    members = dict(spec.members)
    members[newcomer] = next(iter(spec.members.values()))
    after = uniform_assign(AssignmentSpec(members, spec.partition_counts, before))
    _check_exactly_once(AssignmentSpec(members, spec.partition_counts, before), after)
    for member_id, topics in after.items():
        if member_id == newcomer:
            continue
        for topic_id, partitions in topics.items():  # old members only give partitions away
            assert partitions <= before[member_id].get(topic_id, frozenset())


@settings(max_examples=100, deadline=None)
@given(specs())
def test_range_owns_every_partition_once_in_contiguous_ranges(spec: AssignmentSpec) -> None:
    result = range_assign(spec)
    _check_exactly_once(spec, result)
    for topics in result.values():
        for partitions in topics.values():
            assert max(partitions) - min(partitions) + 1 == len(partitions)


def test_range_gives_the_first_members_the_extra_partition() -> None:
    topic = TOPICS[0]
    spec = AssignmentSpec({"a": frozenset({topic}), "b": frozenset({topic})}, {topic: 5}, {})
    assert range_assign(spec) == {
        "a": {topic: frozenset({0, 1, 2})},
        "b": {topic: frozenset({3, 4})},
    }


def test_uniform_twelve_partitions_three_members() -> None:
    topic = TOPICS[0]
    subscribed = frozenset({topic})
    spec = AssignmentSpec({m: subscribed for m in "abc"}, {topic: 12}, {})
    result = uniform_assign(spec)
    assert [len(result[m][topic]) for m in "abc"] == [4, 4, 4]
    without_b = AssignmentSpec({"a": subscribed, "c": subscribed}, {topic: 12}, result)
    moved = uniform_assign(without_b)
    assert result["a"][topic] <= moved["a"][topic] and result["c"][topic] <= moved["c"][topic]


def test_unknown_assignor_is_a_typed_error() -> None:
    with pytest.raises(KafkaError, match="UNSUPPORTED_ASSIGNOR"):
        assignor("sticky-ish")
