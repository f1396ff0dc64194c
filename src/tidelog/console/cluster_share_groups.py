"""Cluster calls for the Share groups page (KIP-932), as `tidelog groups list-share|describe-share|
reset-share-offsets` and Kafka's kafka-share-groups.sh make them, but to the right brokers and as
the signed-in user: ApiVersions (does the cluster offer share groups at all?), ListGroups v5 with
the `share` type filter to every broker, FindCoordinator v4 for the groups, then to each
coordinator ShareGroupDescribe v1 (members, assignments), DescribeShareGroupOffsets v1 (each
share partition's start offset, the SPSO, and its lag), AlterShareGroupOffsets v0 (reset, only
while the group is empty) and DeleteGroups v2. confluent-kafka's admin client has no share-group
calls, so they go through `kafka_raw`.

The in-flight record count is not in any admin answer (only in the broker's metrics), so the
API leaves it out.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import TopicPartition
from kio.schema.errors import ErrorCode

from tidelog.console.cluster_clients import ClusterClients
from tidelog.console.errors import (
    AUTHORIZATION_CODES,
    BadRequest,
    ClusterError,
    Conflict,
    ConsoleError,
    NotFound,
    not_allowed,
)
from tidelog.console.kafka_raw import RawConnection, schema_module

API_VERSIONS, LIST_GROUPS, FIND_COORDINATOR, DELETE_GROUPS = 18, 16, 10, 42
SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_OFFSETS, ALTER_SHARE_OFFSETS = 77, 90, 91
GROUP_KEY = 0  # FindCoordinator key_type
MAX_LISTED = 500  # share groups described per page load
NOT_FOUND_CODES = {int(ErrorCode.group_id_not_found)}
SHARE_STRATEGIES = ("earliest", "latest", "timestamp", "offset")
SHARE_FEATURE = "share.version"


class SharesUnsupported(ConsoleError):
    """The cluster's brokers do not offer the share-group APIs (Kafka before 4.0, or 4.x with
    share groups off)."""

    status = 501


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error {code}"


def _check(code: int, doing: str, group: str) -> None:
    if code == 0:
        return
    name = _name(code)
    if code in {int(c) for c in AUTHORIZATION_CODES}:
        raise not_allowed(doing, name)
    if code in NOT_FOUND_CODES:
        raise NotFound(f"share group {group!r} does not exist ({name})")
    if code == int(ErrorCode.unsupported_version):
        raise SharesUnsupported(f"{doing}: this cluster does not support share groups "
                                f"(KIP-932) or has them switched off ({name})")
    if code == int(ErrorCode.non_empty_group):
        raise Conflict(f"{doing}: share group {group!r} is not empty ({name}); stop its "
                       f"consumers first")
    raise ClusterError(f"{doing}: {name}")


class ShareGroupCalls(ClusterClients):
    def _share_support(self) -> str | None:
        """None when the cluster offers share groups, else why not, in words."""
        module = schema_module(API_VERSIONS, 3)
        with self.raw() as conn:
            answer = conn.call(API_VERSIONS, 3, module.ApiVersionsRequest(
                client_software_name="tidelog-console", client_software_version="1"))
        keys = {int(k.api_key): int(k.max_version) for k in answer.api_keys}
        missing = [name for key, version, name in (
            (SHARE_GROUP_DESCRIBE, 1, "ShareGroupDescribe v1"),
            (DESCRIBE_SHARE_OFFSETS, 1, "DescribeShareGroupOffsets v1"),
            (LIST_GROUPS, 5, "ListGroups v5")) if keys.get(key, -1) < version]
        # Kafka keeps advertising the share APIs when share groups are off: its finalized
        # features tell (isShareGroupsEnabled: share.version 1 or more; a feature at level 0
        # is left out of the list; ApiVersions v3 lists only metadata.version as supported).
        # A broker that finalizes no features at all is judged by its APIs alone (Tidelog
        # finalizes share.version 1, as Kafka with share groups on).
        finalized = {f.name: int(f.max_version_level) for f in answer.finalized_features}
        if not missing and finalized and finalized.get(SHARE_FEATURE, 0) < 1:
            return (f"This cluster has share groups (KIP-932) switched off: its feature "
                    f"{SHARE_FEATURE} is {finalized.get(SHARE_FEATURE, 0)} "
                    f"(kafka-features upgrade --feature {SHARE_FEATURE}=1 turns them on).")
        if not missing:
            return None
        return (f"This cluster does not support share groups (KIP-932): its brokers do not "
                f"offer {', '.join(missing)}. Share groups need Kafka 4.1 or later with share "
                f"groups enabled, or Tidelog.")

    def _require_shares(self) -> None:
        reason = self._share_support()
        if reason is not None:
            raise SharesUnsupported(reason)

    def _share_brokers(self) -> dict[int, tuple[str, int]]:
        return {b.id: (b.host, b.port) for b in self.metadata().brokers.values()}

    def _share_coordinators(self, groups: Sequence[str], brokers: dict[int, tuple[str, int]]
                      ) -> dict[int, list[str]]:
        finder = schema_module(FIND_COORDINATOR, 4)
        with self.raw() as conn:
            answer = conn.call(FIND_COORDINATOR, 4, finder.FindCoordinatorRequest(
                key_type=GROUP_KEY, coordinator_keys=tuple(groups)))
        by_node: dict[int, list[str]] = defaultdict(list)
        for c in answer.coordinators:
            code = c.error_code.value
            if code != 0:
                _check(code, f"finding the coordinator of share group {c.key!r}", c.key)
            brokers.setdefault(int(c.node_id), (c.host, int(c.port)))
            by_node[int(c.node_id)].append(c.key)
        return by_node

    def _share_describe(self, conn: RawConnection, groups: Sequence[str]) -> dict[str, Any]:
        module = schema_module(SHARE_GROUP_DESCRIBE, 1)
        answer = conn.call(SHARE_GROUP_DESCRIBE, 1, module.ShareGroupDescribeRequest(
            group_ids=tuple(groups), include_authorized_operations=False))
        return {g.group_id: g for g in answer.groups}

    def _share_start_offsets(self, conn: RawConnection, groups: Sequence[str]) -> dict[str, Any]:
        module = schema_module(DESCRIBE_SHARE_OFFSETS, 1)
        answer = conn.call(DESCRIBE_SHARE_OFFSETS, 1, module.DescribeShareGroupOffsetsRequest(
            groups=tuple(module.DescribeShareGroupOffsetsRequestGroup(group_id=g, topics=None)
                         for g in groups)))
        return {g.group_id: g for g in answer.groups}

    def share_groups(self) -> dict[str, Any]:
        """Every share group: state, members, partitions with a start offset, total lag."""
        reason = self._share_support()
        if reason is not None:
            return {"supported": False, "reason": reason, "groups": []}
        brokers = self._share_brokers()
        lister = schema_module(LIST_GROUPS, 5)
        listed: dict[str, str] = {}
        for address in list(brokers.values()):
            with self.raw(address) as conn:
                answer = conn.call(LIST_GROUPS, 5, lister.ListGroupsRequest(
                    states_filter=(), types_filter=("share",)))
            code = answer.error_code.value
            if code != 0:
                _check(code, "listing share groups", "")
            for g in answer.groups:
                listed[g.group_id] = g.group_state
        ids = sorted(listed)[:MAX_LISTED]
        rows: list[dict[str, Any]] = []
        for node, keys in (self._share_coordinators(ids, brokers) if ids else {}).items():
            with self.raw(brokers[node]) as conn:
                described = self._share_describe(conn, keys)
                offsets = self._share_start_offsets(conn, keys)
            for gid in keys:
                d, o = described.get(gid), offsets.get(gid)
                ok = d is not None and d.error_code.value == 0
                members = len(d.members) if d is not None and ok else 0
                parts = [p for t in (o.topics if o is not None and o.error_code.value == 0
                                     else ()) for p in t.partitions if p.error_code.value == 0]
                rows.append({
                    "group_id": gid,
                    "state": (d.group_state if d is not None and ok else listed[gid]).upper(),
                    "members": members,
                    "partitions": sum(1 for p in parts if p.start_offset >= 0),
                    "topics": sorted({t.topic_name for t in (o.topics if o is not None else ())}),
                    "lag": sum(max(0, int(p.lag)) for p in parts if p.start_offset >= 0),
                })
        rows.sort(key=lambda r: r["group_id"])
        return {"supported": True, "groups": rows, "truncated": len(listed) > len(ids)}

    def _share_connection(self, group: str) -> RawConnection:
        self._require_shares()
        brokers = self._share_brokers()
        node = next(iter(self._share_coordinators([group], brokers)))
        return self.raw(brokers[node])

    def _share_described(self, conn: RawConnection, group: str) -> Any:
        d = self._share_describe(conn, [group]).get(group)
        if d is None:
            raise ClusterError(f"the coordinator did not describe share group {group!r}")
        _check(d.error_code.value, f"describing share group {group!r}", group)
        return d

    def share_group(self, group: str) -> dict[str, Any]:
        """Members with their assignment; per partition the SPSO, log end offset and lag."""
        with self._share_connection(group) as conn:
            d = self._share_described(conn, group)
            o = self._share_start_offsets(conn, [group]).get(group)
        if o is None:
            raise ClusterError(f"the coordinator did not answer share group {group!r}'s offsets")
        _check(o.error_code.value, f"describing share group {group!r}'s offsets", group)
        assigned: dict[tuple[str, int], list[str]] = defaultdict(list)
        members = []
        for m in d.members:
            tps = sorted((t.topic_name, int(p)) for t in m.assignment.topic_partitions
                         for p in t.partitions)
            for tp in tps:
                assigned[tp].append(m.member_id)
            members.append({"member_id": m.member_id, "client_id": m.client_id,
                            "host": m.client_host, "member_epoch": int(m.member_epoch),
                            "subscribed_topics": sorted(m.subscribed_topic_names),
                            "assignment": [{"topic": t, "partition": p} for t, p in tps]})
        spso: dict[tuple[str, int], tuple[int, int | None, str | None]] = {}
        for t in o.topics:
            for p in t.partitions:
                code = p.error_code.value
                spso[(t.topic_name, int(p.partition_index))] = (
                    int(p.start_offset), int(p.lag) if int(p.lag) >= 0 else None,
                    _name(code) if code else None)
        keys = sorted(set(spso) | set(assigned))
        warning = None
        try:
            ends = self.offsets([TopicPartition(t, p) for t, p in keys])
        except ConsoleError as failure:  # e.g. a user who may describe the group, not its topics
            ends, warning = {}, f"log end offsets unknown: {failure}"
        partitions = []
        for key in keys:
            start, lag, error = spso.get(key, (-1, None, None))
            end = ends[key].end if key in ends else None
            source = "broker" if lag is not None else None
            if lag is None and start >= 0 and end is not None:
                # A broker that answers no lag (-1): the records from the SPSO to the log end,
                # an upper bound (acknowledged records inside the window still count).
                lag, source = max(0, end - start), "log_end_minus_spso"
            partitions.append({
                "topic": key[0], "partition": key[1],
                "start_offset": start if start >= 0 else None,
                "log_end_offset": end,
                "lag": lag if start >= 0 else None,
                "lag_source": source if start >= 0 else None, "error": error,
                "members": assigned.get(key, [])})
        return {"group_id": group, "state": d.group_state.upper(),
                "sampled_at": int(time.time() * 1000),
                "group_epoch": int(d.group_epoch), "assignment_epoch": int(d.assignment_epoch),
                "assignor": d.assignor_name, "members": members, "partitions": partitions,
                "lag": sum(p["lag"] or 0 for p in partitions), "warning": warning}

    def preview_share_reset(self, group: str, topic: str | None, partition: int | None,
                            strategy: str, value: int | None) -> dict[str, Any]:
        """Where each share partition's start offset would move (clamped to the log)."""
        current = self.share_group(group)
        keys = sorted((p["topic"], p["partition"]) for p in current["partitions"]
                      if topic is None or p["topic"] == topic)
        if topic is not None and not keys:
            keys = [(topic, p) for p in sorted(self.topic_metadata(topic).partitions)]
        if partition is not None:
            if topic is None:
                raise BadRequest("partition needs a topic")
            if (topic, partition) not in keys:
                raise BadRequest(f"topic {topic!r} has no partition {partition}")
            keys = [(topic, partition)]
        if not keys:
            raise BadRequest(f"share group {group!r} has no start offsets yet; name a topic")
        tps = [TopicPartition(t, p) for t, p in keys]
        bounds = self.offsets(tps)
        by_time = self.offsets_for_time(tps, value or 0) if strategy == "timestamp" else {}
        old = {(p["topic"], p["partition"]): p["start_offset"] for p in current["partitions"]}
        rows = []
        for key in keys:
            b = bounds[key]
            if strategy == "earliest":
                new = b.start
            elif strategy == "latest":
                new = b.end
            elif strategy == "timestamp":
                found = by_time.get(key[1], -1)
                new = found if found >= 0 else b.end
            else:
                new = value or 0
            new = min(max(new, b.start), b.end)
            rows.append({"topic": key[0], "partition": key[1], "old": old.get(key),
                         "new": new, "log_start_offset": b.start, "log_end_offset": b.end,
                         "lag_after": b.end - new})
        state = current["state"]
        return {"group_id": group, "state": state, "members": len(current["members"]),
                "strategy": strategy, "offsets": rows, "can_apply": state == "EMPTY"}

    def apply_share_reset(self, group: str, rows: Sequence[Mapping[str, Any]]) -> None:
        doing = f"resetting share group {group!r}'s start offsets"
        with self._share_connection(group) as conn:
            d = self._share_described(conn, group)
            if d.group_state.upper() != "EMPTY":
                raise Conflict(f"share group {group!r} is {d.group_state.upper()} with "
                               f"{len(d.members)} members: start offsets can be reset only "
                               f"while it is empty (NON_EMPTY_GROUP); stop its consumers first")
            by_topic: dict[str, list[tuple[int, int]]] = defaultdict(list)
            for r in rows:
                by_topic[r["topic"]].append((r["partition"], r["new"]))
            module = schema_module(ALTER_SHARE_OFFSETS, 0)
            answer = conn.call(ALTER_SHARE_OFFSETS, 0, module.AlterShareGroupOffsetsRequest(
                group_id=group, topics=tuple(
                    module.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(
                        module.AlterShareGroupOffsetsRequestPartition(
                            partition_index=p, start_offset=n) for p, n in sorted(ps)))
                    for t, ps in sorted(by_topic.items()))))
        _check(answer.error_code.value, doing, group)
        for t in answer.responses:
            for p in t.partitions:
                code = p.error_code.value
                if code:
                    _check(code, f"{doing} on {t.topic_name}-{p.partition_index}", group)

    def delete_share_group(self, group: str) -> None:
        doing = f"deleting share group {group!r}"
        with self._share_connection(group) as conn:
            self._share_described(conn, group)  # 404 for an unknown group, in words
            module = schema_module(DELETE_GROUPS, 2)
            answer = conn.call(DELETE_GROUPS, 2, module.DeleteGroupsRequest(
                groups_names=(group,)))
        for result in answer.results:
            _check(result.error_code.value, doing, group)
