"""Masking and field-by-field comparison of two brokers' plain-data responses.

Masking happens per broker, before the two answers meet, and only ever replaces a value by a
label that both brokers can produce; every rule says why the raw value may legitimately
differ. ``MASK_RULES`` is the list docs/compatibility.md reproduces.

Lists whose elements carry a natural key (a topic name, a partition index, a group id, a
config name, ...) are compared by that key, so the order of a list never counts: Kafka builds
most response lists from hash maps and does not promise an order. The key shows in the path:
``topics/m1/partitions/0/error_code``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# (rule, why): the masks applied to every response of both brokers.
MASK_RULES: list[tuple[str, str]] = [
    (
        "the run's token is cut from topic and group names (`d1a2b3c-p` reads `p`)",
        "names carry a random token so sessions can be replayed against long-lived brokers",
    ),
    (
        "`throttle_time_ms` is dropped",
        "quota state of the broker, not an answer to the request",
    ),
    (
        "`error_message` is compared by presence only (null vs `<message>`), and not at all "
        "next to `error_code` NONE",
        "free text; clients show it, none parse it. Kafka fills it on success in some APIs "
        "(`NONE` in FindCoordinator v1-3, `\"\"` in DescribeConfigs), which no client reads",
    ),
    (
        "`cluster_id` becomes `<cluster-id>` when not null",
        "random per cluster",
    ),
    (
        "`host` and `port` become `<host>` / `<port>`",
        "each broker listens where the harness started it",
    ),
    (
        "node ids equal to the broker's own id become `<self>` (`node_id`, `leader_id`, "
        "`controller_id`, `broker_id`, `replica_nodes`, `isr_nodes`, ..., and a DescribeConfigs "
        "`resource_name` naming the broker)",
        "node ids are configuration; the peer runs KRaft with its own node id. -1 and other "
        "ids are compared as they are",
    ),
    (
        "UUIDs (topic ids, ...) other than the zero UUID become `<uuid>`",
        "random per topic; whether a broker sends an id or null/zero is still compared",
    ),
    (
        "member ids (`member_id`, JoinGroup `leader`) that are not empty become `<member>`",
        "server-generated from a random UUID",
    ),
    (
        "`producer_id` >= 0 (responses and record batches) becomes `<pid>`",
        "allocated from a per-cluster counter; -1 (none) is compared",
    ),
    (
        "Fetch `session_id` != 0 becomes `<session>`",
        "random per broker; 0 (no session) is compared",
    ),
    (
        "timestamps (any integer field whose name contains `time`) within two days of the run "
        "become `<now>`",
        "wall clock: LogAppendTime, ListOffsets of the latest record... The scripts write "
        "records with fixed timestamps in 2020, so those are compared exactly",
    ),
]

_NODE_FIELDS = {
    "node_id",
    "leader_id",
    "controller_id",
    "broker_id",
    "replica_nodes",
    "isr_nodes",
    "offline_replicas",
    "eligible_leader_replicas",
    "last_known_elr",
    "preferred_read_replica",
    "leader",  # Fetch/ListOffsets current_leader.leader
}
_DROP_FIELDS = {"throttle_time_ms", "throttle_time"}
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_ZERO_UUID = "00000000-0000-0000-0000-000000000000"
_TWO_DAYS_MS = 2 * 86_400_000
# Natural keys of list elements, in order of preference.
_KEYS = (
    "name",
    "topic",
    "topic_name",
    "group_id",
    "api_key",
    "resource_name",
    "partition_index",
    "partition",
    "index",
    "key",
)


@dataclass
class BrokerMasks:
    """Per-broker masking state: the run's clock and the broker's own node id."""

    now_ms: int
    self_node_id: int | None = None

    def apply(self, data: Any, name: str = "") -> Any:
        if isinstance(data, dict):
            out = {k: self.apply(v, k) for k, v in data.items() if k not in _DROP_FIELDS}
            if out.get("error_code") == "NONE(0)" and "error_message" in out:
                out["error_message"] = None
            return out
        if isinstance(data, list):
            return [self.apply(item, name) for item in data]
        return self._scalar(name, data)

    def _scalar(self, name: str, value: Any) -> Any:
        if name == "error_message":
            return None if value is None else "<message>"
        if name == "cluster_id":
            return None if value is None else "<cluster-id>"
        if name == "resource_name" and self.self_node_id is not None and value == str(
            self.self_node_id
        ):
            return "<self>"
        if name == "host":
            return "<host>"
        if name == "port":
            return "<port>"
        if name in ("member_id", "leader") and isinstance(value, str) and value:
            return "<member>"
        if isinstance(value, str) and _UUID.match(value) and value != _ZERO_UUID:
            return "<uuid>"
        if name == "producer_id" and isinstance(value, int) and value >= 0:
            return "<pid>"
        if name == "session_id" and isinstance(value, int) and value != 0:
            return "<session>"
        if (
            name in _NODE_FIELDS
            and isinstance(value, int)
            and not isinstance(value, bool)
            and value == self.self_node_id
        ):
            return "<self>"
        if (
            "time" in name
            and isinstance(value, int)
            and not isinstance(value, bool)
            and abs(value - self.now_ms) < _TWO_DAYS_MS
        ):
            return "<now>"
        return value


@dataclass(frozen=True)
class Difference:
    exchange: str
    path: str
    kafka: Any
    tidelog: Any

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.exchange, self.path, render(self.kafka), render(self.tidelog))


def render(value: Any) -> str:
    if value is _MISSING:
        return "<absent>"
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 200 else text[:197] + "..."


class _Missing:
    def __repr__(self) -> str:
        return "<absent>"


_MISSING: Any = _Missing()


def _list_key(*lists: list[Any]) -> str | None:
    """The natural key every element of every list has, unique within each list."""
    if not all(lists) or not all(isinstance(i, dict) for items in lists for i in items):
        return None
    for key in _KEYS:
        if all(_unique_key(items, key) for items in lists):
            return key
    return None


def _unique_key(items: list[Any], key: str) -> bool:
    values = [item.get(key, _MISSING) for item in items]
    return all(v is not _MISSING and isinstance(v, str | int) for v in values) and len(
        set(values)
    ) == len(values)


def diff(kafka: Any, tidelog: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(path, kafka value, tidelog value) for every leaf that differs."""
    if isinstance(kafka, dict) and isinstance(tidelog, dict):
        out: list[tuple[str, Any, Any]] = []
        for key in list(kafka) + [k for k in tidelog if k not in kafka]:
            sub = f"{path}/{key}" if path else str(key)
            out += diff(kafka.get(key, _MISSING), tidelog.get(key, _MISSING), sub)
        return out
    if isinstance(kafka, list) and isinstance(tidelog, list):
        key = _list_key(kafka, tidelog)
        if key is not None:
            left = {item[key]: item for item in kafka}
            right = {item[key]: item for item in tidelog}
            out = []
            for item_key in list(left) + [k for k in right if k not in left]:
                sub = f"{path}/{item_key}"
                out += diff(left.get(item_key, _MISSING), right.get(item_key, _MISSING), sub)
            return out
        if len(kafka) != len(tidelog):
            return [(f"{path}/<length>", len(kafka), len(tidelog))] + [
                (f"{path}/{i}", kafka[i] if i < len(kafka) else _MISSING,
                 tidelog[i] if i < len(tidelog) else _MISSING)
                for i in range(min(len(kafka), len(tidelog)), max(len(kafka), len(tidelog)))
            ] + diff(kafka[: len(tidelog)], tidelog[: len(kafka)], path)
        out = []
        for index, (a, b) in enumerate(zip(kafka, tidelog, strict=True)):
            out += diff(a, b, f"{path}/{index}")
        return out
    if kafka == tidelog and type(kafka) is type(tidelog):
        return []
    return [(path or "<response>", kafka, tidelog)]
