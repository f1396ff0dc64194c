"""Offset commit/fetch/delete, retention, group deletion and the group -> partition mapping."""

from __future__ import annotations

from tidelog.coordinator.coordinator import java_string_hash, partition_for
from tidelog.coordinator.messages import (
    CommitPartition,
    GroupConfig,
    OffsetCommitRequest,
    OffsetFetchRequest,
    Result,
)
from tidelog.errors import ErrorCode

from .harness import Harness, persisted_view

DAY_MS = 24 * 3600 * 1000


def admin_commit(
    h: Harness, now: int, *parts: tuple[str, int, int], retention: int = -1, version: int = 8
) -> list[ErrorCode]:
    request = OffsetCommitRequest(
        "g",
        tuple(CommitPartition(t, p, o, 4, "meta") for t, p, o in parts),
        retention_time_ms=retention,
        api_version=version,
    )
    return [error for _, _, error in h.run(h.shard.offset_commit(request, now)).partitions]


def test_java_string_hash_and_partition_for() -> None:
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    assert java_string_hash("polygenelubricants") == -(2**31)  # abs() would overflow in Java
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert java_string_hash("ä") == 228
    assert java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00  # UTF-16 surrogates


def test_commit_fetch_delete() -> None:
    h = Harness()
    assert admin_commit(h, 0, ("t", 0, 10), ("t", 1, 20)) == [ErrorCode.NONE, ErrorCode.NONE]
    fetched = h.shard.offset_fetch(OffsetFetchRequest("g", None)).partitions
    assert [(p.partition, p.offset, p.leader_epoch, p.metadata) for p in fetched] == [
        (0, 10, 4, "meta"),
        (1, 20, 4, "meta"),
    ]
    too_big = OffsetCommitRequest("g", (CommitPartition("t", 2, 1, metadata="x" * 5000),))
    assert (
        h.run(h.shard.offset_commit(too_big, 1)).partitions[0][2]
        is ErrorCode.OFFSET_METADATA_TOO_LARGE
    )
    deleted = h.run(h.shard.offset_delete("g", (("t", 0),)))
    assert deleted.partitions == (("t", 0, ErrorCode.NONE),)
    assert [
        p.offset for p in h.shard.offset_fetch(OffsetFetchRequest("g", (("t", 0),))).partitions
    ] == [-1]
    assert h.run(h.shard.offset_delete("nope", (("t", 0),))).error is ErrorCode.GROUP_ID_NOT_FOUND
    assert persisted_view(h.reloaded()) == persisted_view(h.shard)


def test_retention_expires_offsets_of_empty_groups_then_the_group() -> None:
    h = Harness(GroupConfig(offsets_retention_ms=7 * DAY_MS))
    admin_commit(h, 0, ("t", 0, 10))
    admin_commit(h, 2 * DAY_MS, ("t", 1, 11))
    admin_commit(h, 0, ("t", 2, 12), retention=DAY_MS, version=2)  # explicit expiry (v2-4)
    assert [r.key for r in h.shard.expire_offsets(DAY_MS - 1)] == []
    first = h.shard.expire_offsets(DAY_MS)
    assert [r.key.partition for r in first] == [2]  # type: ignore[union-attr]
    # Offset 0 was committed at day 0, offset 1 at day 2; the group is empty since day 0.
    assert [r.key.partition for r in h.shard.expire_offsets(7 * DAY_MS)] == [0, 2]  # type: ignore[union-attr]
    expired = h.shard.expire_offsets(9 * DAY_MS)
    assert [getattr(r.key, "partition", "group") for r in expired] == [0, 1, 2, "group"]
    h.run(Result(records=expired))
    assert "g" not in h.shard.groups and not h.shard.offsets.has_offsets("g")
    assert persisted_view(h.reloaded()) == persisted_view(h.shard)


def test_delete_groups_and_list() -> None:
    h = Harness()
    admin_commit(h, 0, ("t", 0, 1))
    listed = h.shard.list_groups()
    assert [(g.group_id, g.state, g.group_type) for g in listed] == [("g", "Empty", "classic")]
    assert h.shard.list_groups(states=["Stable"]) == []
    result = h.run(h.shard.delete_groups(["g", "missing"]))
    assert result == [("g", ErrorCode.NONE), ("missing", ErrorCode.GROUP_ID_NOT_FOUND)]
    assert h.shard.list_groups() == [] and h.reloaded().list_groups() == []


def test_active_groups_refuse_deletion_and_protect_subscribed_offsets() -> None:
    from .test_classic import commit, join, subscription, sync

    h = Harness()
    join(h, 0, new_id="a", protocols=(("range", subscription("t")),))
    sync(h, 1, "a", 1, (("a", b""),))
    assert commit(h, 2, "a", 1) is ErrorCode.NONE
    admin_other = OffsetCommitRequest("g", (CommitPartition("other", 0, 3),), 1, "a")
    h.run(h.shard.offset_commit(admin_other, 3))
    assert h.run(h.shard.delete_groups(["g"])) == [("g", ErrorCode.NON_EMPTY_GROUP)]
    # An active group's offsets for topics it does not consume expire from their commit time;
    # those of its subscribed topics never do.
    expiring = h.shard.expire_offsets(3 + h.config.offsets_retention_ms)
    assert [(r.key.topic, r.value) for r in expiring] == [("other", None)]  # type: ignore[union-attr]
    deleted = h.run(h.shard.offset_delete("g", (("t", 0), ("other", 0))))
    assert deleted.partitions == (
        ("t", 0, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC),
        ("other", 0, ErrorCode.NONE),
    )
    assert h.shard.expire_offsets(3 + h.config.offsets_retention_ms) == []
    fetched = h.shard.offset_fetch(OffsetFetchRequest("g", None)).partitions
    assert [(p.topic, p.offset) for p in fetched] == [("t", 5)]


def test_negative_offsets_are_stored_as_kafka_stores_them() -> None:
    """Kafka keeps a negative commit (clients read it as no position); only oversized
    metadata is refused."""
    h = Harness()
    assert admin_commit(h, 0, ("t", 0, -5)) == [ErrorCode.NONE]
    fetched = h.shard.offset_fetch(OffsetFetchRequest("g", (("t", 0),))).partitions
    assert [p.offset for p in fetched] == [-5]
