"""Single-node cluster metadata in the data directory: topics.json and meta.properties.

topics.json (UTF-8 JSON, rewritten whole and atomically: write tmp, fsync, rename, fsync dir)::

    {"version": 1,
     "topics": [{"name": "orders",                 topic name (Kafka rules: [A-Za-z0-9._-]{1,249})
                 "topic_id": "1b4e...-uuid",        stable topic id (Metadata v10+, Fetch v13+)
                 "partitions": 3,                    partition count (only grows)
                 "configs": {"retention.ms": "..."}, topic-level overrides only
                 "internal": false}]}                true for __consumer_offsets

meta.properties (Java properties text, Kafka's own file)::

    version=1
    cluster.id=<22-char url-safe base64 of a random UUID, no padding>
    node.id=<int>

Blocking file I/O, short; called from the event loop only for admin operations.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tidelog.errors import ErrorCode, KafkaError

TOPICS_FILE = "topics.json"
META_FILE = "meta.properties"
_LEGAL_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)
    internal: bool = False


def validate_topic_name(name: str) -> None:
    """Kafka's topic name rules; raises KafkaError(INVALID_TOPIC_EXCEPTION)."""
    if name in (".", "..") or not _LEGAL_TOPIC.match(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} must be 1-249 of [A-Za-z0-9._-] and not '.' or '..'",
        )


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so a crash leaves either the old or the new file."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as stream:
        stream.write(data)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(tmp, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


class TopicStore:
    """Topic names, ids, partition counts and configs; every change is persisted before return."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / TOPICS_FILE
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        if self._path.exists():
            for entry in json.loads(self._path.read_text("utf-8"))["topics"]:
                self._put(
                    TopicInfo(
                        name=entry["name"],
                        topic_id=uuid.UUID(entry["topic_id"]),
                        partitions=int(entry["partitions"]),
                        configs=dict(entry.get("configs", {})),
                        internal=bool(entry.get("internal", False)),
                    )
                )

    def _put(self, info: TopicInfo) -> None:
        self._topics[info.name] = info
        self._by_id[info.topic_id] = info

    def _save(self) -> None:
        document: dict[str, Any] = {
            "version": 1,
            "topics": [
                {
                    "name": info.name,
                    "topic_id": str(info.topic_id),
                    "partitions": info.partitions,
                    "configs": dict(info.configs),
                    "internal": info.internal,
                }
                for info in sorted(self._topics.values(), key=lambda item: item.name)
            ],
        }
        write_atomically(self._path, json.dumps(document, indent=1).encode("utf-8"))

    def get(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[TopicInfo]:
        return sorted(self._topics.values(), key=lambda item: item.name)

    def _require(self, name: str) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        return info

    def create(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str],
        *,
        internal: bool = False,
        topic_id: uuid.UUID | None = None,
    ) -> TopicInfo:
        """`topic_id`: given in cluster mode (the id in ZooKeeper), else a new uuid4."""
        validate_topic_name(name)
        if name in self._topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if partitions < 1:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "partitions must be at least 1")
        # uuid4 is never the all-zero id Kafka reserves for "no id".
        info = TopicInfo(name, topic_id or uuid.uuid4(), partitions, dict(configs), internal)
        self._put(info)
        self._save()
        return info

    def delete(self, name: str) -> None:
        info = self._require(name)
        del self._topics[name]
        del self._by_id[info.topic_id]
        self._save()

    def set_partitions(self, name: str, count: int) -> TopicInfo:
        info = self._require(name)
        if count <= info.partitions:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"topic {name!r} has {info.partitions} partitions; new count must be larger",
            )
        info = replace(info, partitions=count)
        self._put(info)
        self._save()
        return info

    def set_configs(self, name: str, configs: Mapping[str, str]) -> TopicInfo:
        info = replace(self._require(name), configs=dict(configs))
        self._put(info)
        self._save()
        return info


def new_cluster_id() -> str:
    """Kafka's cluster id format: a random UUID as url-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def load_or_create_cluster_id(data_dir: Path, node_id: int) -> str:
    """Read meta.properties, or write it with a fresh cluster id on first start."""
    path = data_dir / META_FILE
    if path.exists():
        properties = {}
        for line in path.read_text("utf-8").splitlines():
            key, separator, value = line.partition("=")
            if separator and not line.startswith("#"):
                properties[key.strip()] = value.strip()
        cluster_id = properties.get("cluster.id")
        if cluster_id:
            return cluster_id
    cluster_id = new_cluster_id()
    text = f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n"
    write_atomically(path, text.encode("utf-8"))
    return cluster_id
