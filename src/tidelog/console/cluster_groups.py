"""Cluster calls for the Consumer groups page: groups with their lag, one group's members and
offsets, offset resets (preview, then apply while the group is empty), and deleting a group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

from tidelog.console.cluster_clients import ClusterClients
from tidelog.console.errors import BadRequest, Conflict, NotFound, describe_error, wait_for

EMPTY_GROUP_STATES = {"EMPTY", "DEAD"}


class GroupCalls(ClusterClients):
    def groups(self) -> list[dict[str, Any]]:
        listing = wait_for(self.admin.list_consumer_groups(request_timeout=self.timeout_s),
                           "listing consumer groups", self.timeout_s)
        ids = sorted(g.group_id for g in listing.valid)
        if not ids and listing.errors:
            # Every broker failed (e.g. the only one is down): an error, not "no groups".
            first = listing.errors[0]
            raise describe_error(first if isinstance(first, BaseException)
                                 else KafkaException(first), "listing consumer groups")
        if not ids:
            return []
        descriptions = self.admin.describe_consumer_groups(ids, request_timeout=self.timeout_s)
        out = []
        for gid in ids:
            d = wait_for(descriptions[gid], f"describing group {gid!r}", self.timeout_s)
            committed = self._committed(gid)
            ends = self.offsets([TopicPartition(t, p) for t, p in committed])
            lag = sum(max(0, ends[k].end - v) for k, v in committed.items() if k in ends
                      and v >= 0)
            out.append({"group_id": gid, "state": group_state(d.state),
                        "protocol_type": getattr(d, "protocol_type", None) or "consumer",
                        "protocol": d.partition_assignor or "", "members": len(d.members),
                        "topics": sorted({t for t, _ in committed}), "lag": lag})
        return out

    def _committed(self, group: str) -> dict[tuple[str, int], int]:
        futures = self.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout_s)
        result = wait_for(futures[group], f"fetching offsets of {group!r}", self.timeout_s)
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions
                if tp.error is None}

    def _describe_group(self, group: str) -> Any:
        futures = self.admin.describe_consumer_groups([group], request_timeout=self.timeout_s)
        return wait_for(futures[group], f"describing group {group!r}", self.timeout_s)

    def group(self, group: str) -> dict[str, Any]:
        d = self._describe_group(group)
        committed = self._committed(group)
        if group_state(d.state) == "DEAD" and not committed:
            raise NotFound(f"consumer group {group!r} does not exist")
        members = []
        assigned: dict[tuple[str, int], str] = {}
        for m in d.members:
            tps = list(m.assignment.topic_partitions) if m.assignment else []
            for tp in tps:
                assigned[(tp.topic, tp.partition)] = m.member_id
            members.append({"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                            "assignment": [{"topic": tp.topic, "partition": tp.partition}
                                           for tp in tps]})
        keys = sorted(set(committed) | set(assigned))
        ends = self.offsets([TopicPartition(t, p) for t, p in keys])
        offsets = []
        for key in keys:
            c = committed.get(key, -1)
            end = ends[key].end if key in ends else None
            offsets.append({"topic": key[0], "partition": key[1],
                            "committed": c if c >= 0 else None, "log_end_offset": end,
                            "lag": max(0, end - c) if end is not None and c >= 0 else None,
                            "member_id": assigned.get(key)})
        return {"group_id": group, "state": group_state(d.state),
                "protocol": d.partition_assignor or "", "members": members,
                "offsets": offsets,
                "lag": sum(o["lag"] or 0 for o in offsets)}

    def preview_reset(self, group: str, topic: str | None, strategy: str,
                      value: int | None) -> dict[str, Any]:
        d = self._describe_group(group)
        committed = self._committed(group)
        keys = sorted(k for k in committed if topic is None or k[0] == topic)
        if topic is not None and not keys:
            meta = self.topic_metadata(topic)
            keys = [(topic, p) for p in sorted(meta.partitions)]
        if not keys:
            raise BadRequest(f"group {group!r} has no committed offsets; name a topic")
        tps = [TopicPartition(t, p) for t, p in keys]
        bounds = self.offsets(tps)
        by_time = self.offsets_for_time(tps, value or 0) if strategy == "timestamp" else {}
        rows = []
        for key in keys:
            b = bounds[key]
            old = committed.get(key, -1)
            if strategy == "earliest":
                new = b.start
            elif strategy == "latest":
                new = b.end
            elif strategy == "timestamp":
                found = by_time.get(key[1], -1)
                new = found if found >= 0 else b.end
            elif strategy == "shift":
                new = (old if old >= 0 else b.end) + (value or 0)
            else:
                new = value if value is not None else 0
            new = min(max(new, b.start), b.end)
            rows.append({"topic": key[0], "partition": key[1],
                         "old": old if old >= 0 else None, "new": new,
                         "log_start_offset": b.start, "log_end_offset": b.end,
                         "lag_after": b.end - new})
        state = group_state(d.state)
        return {"group_id": group, "state": state, "strategy": strategy, "offsets": rows,
                "can_apply": state in EMPTY_GROUP_STATES}

    def apply_reset(self, group: str, rows: Sequence[Mapping[str, Any]]) -> None:
        state = group_state(self._describe_group(group).state)
        if state not in EMPTY_GROUP_STATES:
            raise Conflict(f"group {group!r} is {state}: offsets can be reset only while it "
                           f"has no members (stop its consumers first)")
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(r["topic"], r["partition"], r["new"]) for r in rows])
        futures = self.admin.alter_consumer_group_offsets([request],
                                                          request_timeout=self.timeout_s)
        wait_for(futures[group], f"resetting offsets of {group!r}", self.timeout_s)

    def delete_group(self, group: str) -> None:
        futures = self.admin.delete_consumer_groups([group], request_timeout=self.timeout_s)
        wait_for(futures[group], f"deleting group {group!r}", self.timeout_s)


def group_state(state: Any) -> str:
    name = getattr(state, "name", None) or str(state)
    return str(name).upper()
