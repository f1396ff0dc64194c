"""Cluster calls for the Overview and Topics pages: the brokers, the topics with their
partitions and offsets, and creating, deleting and configuring topics."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exports, untyped
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from tidelog.console.cluster_clients import ClusterClients, PartitionOffsets
from tidelog.console.errors import wait_for


class AdminCalls(ClusterClients):
    def overview(self) -> dict[str, Any]:
        md = self.metadata()
        led: dict[int, int] = {}
        partitions = 0
        for topic in md.topics.values():
            for p in topic.partitions.values():
                partitions += 1
                led[p.leader] = led.get(p.leader, 0) + 1
        brokers = [
            {"id": b.id, "host": b.host, "port": b.port, "controller": b.id == md.controller_id,
             "partitions_led": led.get(b.id, 0)}
            for b in sorted(md.brokers.values(), key=lambda b: b.id)
        ]
        return {"cluster_id": md.cluster_id, "controller_id": md.controller_id,
                "brokers": brokers, "topics": len(md.topics), "partitions": partitions}

    def topics(self, sizes: Mapping[tuple[str, int], float] | None = None) -> list[dict[str, Any]]:
        md = self.metadata()
        tps = [TopicPartition(t.topic, p) for t in md.topics.values() for p in t.partitions
               if not t.topic.startswith("__")]
        offsets = self.offsets(tps)
        retention = self._retention([n for n in md.topics if not n.startswith("__")])
        out = []
        for name in sorted(md.topics):
            topic = md.topics[name]
            parts = topic.partitions.values()
            messages = sum(offsets[(name, p.id)].end - offsets[(name, p.id)].start
                           for p in parts if (name, p.id) in offsets)
            size = None
            if sizes is not None:
                size = int(sum(sizes.get((name, p.id), 0) for p in parts))
            out.append({
                "name": name,
                "internal": name.startswith("__"),
                "partitions": len(topic.partitions),
                "replicas": max((len(p.replicas) for p in parts), default=0),
                "under_replicated": sum(1 for p in parts if len(p.isrs) < len(p.replicas)),
                "messages": messages if not name.startswith("__") else None,
                "size": size,
                "retention_ms": retention.get(name),
            })
        return out

    def _retention(self, names: Sequence[str]) -> dict[str, int | None]:
        """retention.ms per topic in one DescribeConfigs (None: unknown or unlimited)."""
        if not names:
            return {}
        resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
        futures = self.admin.describe_configs(resources, request_timeout=self.timeout_s)
        out: dict[str, int | None] = {}
        for resource, future in futures.items():
            try:
                entry = future.result(self.timeout_s).get("retention.ms")
                value = int(entry.value) if entry is not None and entry.value else -1
            except Exception:  # a topic deleted meanwhile: the list still answers
                value = -1
            out[resource.name] = value if value >= 0 else None
        return out

    def topic(self, name: str, sizes: Mapping[tuple[str, int], float] | None = None
              ) -> dict[str, Any]:
        topic = self.topic_metadata(name)
        tps = [TopicPartition(name, p) for p in sorted(topic.partitions)]
        offsets = self.offsets(tps)
        partitions = []
        for tp in tps:
            p = topic.partitions[tp.partition]
            o = offsets.get((name, tp.partition), PartitionOffsets(0, 0))
            partitions.append({
                "partition": tp.partition, "leader": p.leader, "replicas": list(p.replicas),
                "isr": list(p.isrs), "log_start_offset": o.start, "log_end_offset": o.end,
                "size": int(sizes[(name, tp.partition)]) if sizes and (name, tp.partition)
                in sizes else None,
            })
        return {"name": name, "partitions": partitions, "configs": self.topic_configs(name)}

    def topic_configs(self, name: str) -> list[dict[str, Any]]:
        resource = ConfigResource(ResourceType.TOPIC, name)
        futures = self.admin.describe_configs([resource], request_timeout=self.timeout_s)
        entries: dict[str, ConfigEntry] = wait_for(futures[resource], f"describing {name!r}",
                                                   self.timeout_s)
        return [
            {"name": e.name, "value": None if e.is_sensitive else e.value,
             "default": bool(e.is_default), "read_only": bool(e.is_read_only),
             "source": _source_name(e.source)}
            for e in sorted(entries.values(), key=lambda e: e.name)
        ]

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     configs: Mapping[str, str]) -> None:
        futures = self.admin.create_topics(
            [NewTopic(name, partitions, replication_factor, config=dict(configs))],
            request_timeout=self.timeout_s, operation_timeout=self.timeout_s)
        wait_for(futures[name], f"creating topic {name!r}", self.timeout_s)

    def delete_topic(self, name: str) -> None:
        self.topic_metadata(name)
        futures = self.admin.delete_topics([name], request_timeout=self.timeout_s,
                                           operation_timeout=self.timeout_s)
        wait_for(futures[name], f"deleting topic {name!r}", self.timeout_s)

    def alter_topic_configs(self, name: str, set_: Mapping[str, str],
                            delete: Iterable[str]) -> None:
        self.topic_metadata(name)
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in set_.items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k in delete]
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        futures = self.admin.incremental_alter_configs([resource], request_timeout=self.timeout_s)
        wait_for(futures[resource], f"altering configs of {name!r}", self.timeout_s)


def _source_name(source: Any) -> str:
    """Kafka's config source names (DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG, ...)."""
    try:
        return str(ConfigSource(source).name)
    except ValueError:
        return str(getattr(source, "name", source))
