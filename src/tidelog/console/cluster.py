"""The console's view of a cluster, through confluent-kafka only (so any Kafka cluster works).

Every method is blocking (confluent-kafka's futures) and is called from a worker thread by the
web layer. Cluster failures become `ClusterError` with a sentence for the user; bad requests
become `BadRequest`; both carry the HTTP status the API answers with.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exports, untyped
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

T = TypeVar("T")

MAX_PAGE = 1000
EMPTY_GROUP_STATES = {"EMPTY", "DEAD"}


class ConsoleError(Exception):
    status = 500

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status


class BadRequest(ConsoleError):
    status = 400


class NotFound(ConsoleError):
    status = 404


class Conflict(ConsoleError):
    status = 409


class ClusterError(ConsoleError):
    """The cluster refused or could not be reached (503 when unreachable, 502 when it refused)."""

    status = 502


def _describe(error: BaseException, doing: str) -> ConsoleError:
    kafka_error = error.args[0] if isinstance(error, KafkaException) and error.args else None
    if isinstance(kafka_error, KafkaError):
        code = kafka_error.code()
        words = kafka_error.str() or kafka_error.name()
        if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC,
                    KafkaError._UNKNOWN_PARTITION, KafkaError.GROUP_ID_NOT_FOUND):
            return NotFound(f"{doing}: {words}")
        if code in (KafkaError.TOPIC_ALREADY_EXISTS, KafkaError.NON_EMPTY_GROUP):
            return Conflict(f"{doing}: {words}")
        if code in (KafkaError.INVALID_PARTITIONS, KafkaError.INVALID_REPLICATION_FACTOR,
                    KafkaError.INVALID_CONFIG, KafkaError.TOPIC_EXCEPTION,
                    KafkaError.INVALID_REQUEST, KafkaError.POLICY_VIOLATION,
                    KafkaError._INVALID_ARG):
            return BadRequest(f"{doing}: {words}")
        if code in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
                    KafkaError.REQUEST_TIMED_OUT, KafkaError._RESOLVE):
            return ClusterError(f"{doing}: the cluster did not answer ({words})", 503)
        return ClusterError(f"{doing}: {words}")
    if isinstance(error, TimeoutError) or type(error).__name__ == "TimeoutError":
        return ClusterError(f"{doing}: the cluster did not answer in time", 503)
    if isinstance(error, ValueError | TypeError):
        return BadRequest(f"{doing}: {error}")
    return ClusterError(f"{doing}: {error}")


def _wait(future: Future[T], doing: str, timeout: float) -> T:
    try:
        return future.result(timeout)
    except ConsoleError:
        raise
    except Exception as error:
        raise _describe(error, doing) from None


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    return data.decode("utf-8", "replace")


def encode_bytes(data: bytes | None) -> dict[str, Any] | None:
    """Message bytes for the API: text when UTF-8, always base64 (the browser decodes the rest)."""
    if data is None:
        return None
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {"text": text, "base64": base64.b64encode(data).decode("ascii"), "size": len(data)}


def message_dict(message: Message) -> dict[str, Any]:
    ts_type, ts = message.timestamp()
    raw_headers: list[tuple[str, bytes | None]] = list(message.headers() or [])  # type: ignore[arg-type]
    headers = [(name, _text(value)) for name, value in raw_headers]
    return {
        "topic": message.topic(),
        "partition": message.partition(),
        "offset": message.offset(),
        "timestamp": ts if ts_type else None,
        "key": _text(message.key()),
        "value": _text(message.value()),
        "key_raw": encode_bytes(message.key()),
        "value_raw": encode_bytes(message.value()),
        "headers": headers,
    }


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    start: int
    end: int


class Cluster:
    def __init__(self, bootstrap: str, timeout_s: float = 10.0,
                 client_config: Mapping[str, str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        # The seat for SASL sign-in (security issue): per-user settings go in client_config.
        self._base: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "client.id": "tidelog-console",
            "socket.connection.setup.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 2000,
            **(client_config or {}),
        }
        self._admin: AdminClient | None = None
        self._producer: Producer | None = None

    # -- clients ------------------------------------------------------------------------------

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(dict(self._base))
        return self._admin

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer({**self._base, "linger.ms": 0,
                                       "message.timeout.ms": int(self.timeout_s * 1000)})
        return self._producer

    def consumer(self) -> Consumer:
        return Consumer({**self._base, "group.id": f"tidelog-console-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "auto.offset.reset": "earliest",
                         # A page is small: don't fetch (and decode) a megabyte ahead of it.
                         "max.partition.fetch.bytes": 262144, "queued.min.messages": 1000})

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(1)

    # -- cluster ------------------------------------------------------------------------------

    def metadata(self, topic: str | None = None) -> Any:
        try:
            return self.admin.list_topics(topic=topic, timeout=self.timeout_s)
        except Exception as error:
            raise _describe(error, "reading the cluster's metadata") from None

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

    # -- topics -------------------------------------------------------------------------------

    def offsets(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[tuple[str, int], PartitionOffsets]:
        if not partitions:
            return {}
        result: dict[tuple[str, int], list[int]] = {}
        specs = ((OffsetSpec.earliest(), 0), (OffsetSpec.latest(), 1))  # type: ignore[no-untyped-call]
        for spec, slot in specs:
            futures = self.admin.list_offsets({tp: spec for tp in partitions},
                                              request_timeout=self.timeout_s)
            for tp, future in futures.items():
                info = _wait(future, f"listing offsets of {tp.topic}", self.timeout_s)
                result.setdefault((tp.topic, tp.partition), [0, 0])[slot] = info.offset
        return {k: PartitionOffsets(v[0], v[1]) for k, v in result.items()}

    def offsets_for_time(self, partitions: Sequence[TopicPartition], ms: int) -> dict[int, int]:
        futures = self.admin.list_offsets({tp: OffsetSpec.for_timestamp(ms) for tp in partitions},
                                          request_timeout=self.timeout_s)
        return {tp.partition: _wait(f, "listing offsets by time", self.timeout_s).offset
                for tp, f in futures.items()}

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

    def _topic_metadata(self, name: str) -> Any:
        md = self.metadata()
        topic = md.topics.get(name)
        if topic is None or (topic.error is not None and topic.error.code() in
                             (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC)):
            raise NotFound(f"topic {name!r} does not exist")
        return topic

    def topic(self, name: str, sizes: Mapping[tuple[str, int], float] | None = None
              ) -> dict[str, Any]:
        topic = self._topic_metadata(name)
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
        entries: dict[str, ConfigEntry] = _wait(futures[resource], f"describing {name!r}",
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
        _wait(futures[name], f"creating topic {name!r}", self.timeout_s)

    def delete_topic(self, name: str) -> None:
        self._topic_metadata(name)
        futures = self.admin.delete_topics([name], request_timeout=self.timeout_s,
                                           operation_timeout=self.timeout_s)
        _wait(futures[name], f"deleting topic {name!r}", self.timeout_s)

    def alter_topic_configs(self, name: str, set_: Mapping[str, str],
                            delete: Iterable[str]) -> None:
        self._topic_metadata(name)
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in set_.items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k in delete]
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        futures = self.admin.incremental_alter_configs([resource], request_timeout=self.timeout_s)
        _wait(futures[resource], f"altering configs of {name!r}", self.timeout_s)

    # -- messages -----------------------------------------------------------------------------

    def read(self, topic: str, partitions: Sequence[int] | None, *, start: str,
             offset: int | None, timestamp: int | None, limit: int,
             keep: Callable[[dict[str, Any]], bool], scan_limit: int = 10_000
             ) -> dict[str, Any]:
        """Read up to `limit` matching messages. start: oldest | newest | offset | timestamp.
        newest reads the last `limit` messages of each partition. At most `scan_limit`
        messages are examined (the answer says how many, so a filter never hangs the API)."""
        meta = self._topic_metadata(topic)
        all_partitions = sorted(meta.partitions)
        chosen = list(partitions) if partitions else all_partitions
        for p in chosen:
            if p not in meta.partitions:
                raise NotFound(f"topic {topic!r} has no partition {p}")
        tps = [TopicPartition(topic, p) for p in chosen]
        bounds = self.offsets(tps)
        starts: dict[int, int] = {}
        if start == "timestamp":
            assert timestamp is not None
            by_time = self.offsets_for_time(tps, timestamp)
            starts = {p: (o if o >= 0 else bounds[(topic, p)].end) for p, o in by_time.items()}
        for p in chosen:
            b = bounds[(topic, p)]
            if start == "oldest":
                starts[p] = b.start
            elif start == "newest":
                starts[p] = max(b.start, b.end - limit)
            elif start == "offset":
                assert offset is not None
                starts[p] = min(max(offset, b.start), b.end)
        pending = {p for p in chosen if starts[p] < bounds[(topic, p)].end}
        messages: list[dict[str, Any]] = []
        scanned = 0
        if pending:
            consumer = self.consumer()
            try:
                consumer.assign([TopicPartition(topic, p, starts[p]) for p in sorted(pending)])
                position = {p: starts[p] for p in pending}
                deadline = time.monotonic() + self.timeout_s
                while pending and scanned < scan_limit and time.monotonic() < deadline:
                    if start != "newest" and len(messages) >= limit:
                        break
                    # Ask for no more than remain, or consume() waits out its timeout.
                    left = sum(bounds[(topic, p)].end - position[p] for p in pending)
                    for m in consumer.consume(max(1, min(500, left)), 0.5):
                        error, part, at = m.error(), m.partition() or 0, m.offset() or 0
                        if error is not None:
                            if error.code() == KafkaError._PARTITION_EOF:
                                pending.discard(part)
                                continue
                            raise _describe(KafkaException(error), f"reading {topic!r}")
                        position[part] = at + 1
                        if at >= bounds[(topic, part)].end - 1:
                            pending.discard(part)
                        scanned += 1
                        decoded = message_dict(m)
                        if keep(decoded):
                            messages.append(decoded)
            finally:
                consumer.close()
        if start == "newest":
            messages.sort(key=lambda m: (m["timestamp"] or 0, m["partition"], m["offset"]))
            messages = messages[-limit:]
        elif len(chosen) > 1:
            messages.sort(key=lambda m: (m["timestamp"] or 0, m["partition"], m["offset"]))
            messages = messages[:limit]
        else:
            messages = messages[:limit]
        return {"messages": messages, "scanned": scanned,
                "partitions": [{"partition": p, "log_start_offset": bounds[(topic, p)].start,
                                "log_end_offset": bounds[(topic, p)].end} for p in chosen]}

    def produce(self, topic: str, *, key: bytes | None, value: bytes | None,
                headers: Sequence[tuple[str, bytes | None]], partition: int | None
                ) -> dict[str, Any]:
        meta = self._topic_metadata(topic)
        if partition is not None and partition not in meta.partitions:
            raise NotFound(f"topic {topic!r} has no partition {partition}")
        delivered: list[Any] = []

        def on_delivery(error: KafkaError | None, message: Message) -> None:
            delivered.append(error if error is not None else message)

        kwargs: dict[str, Any] = {"key": key, "value": value, "headers": list(headers),
                                  "on_delivery": on_delivery}
        if partition is not None:
            kwargs["partition"] = partition
        try:
            self.producer.produce(topic, **kwargs)
        except (KafkaException, BufferError, ValueError, TypeError) as error:
            raise _describe(error, f"producing to {topic!r}") from None
        deadline = time.monotonic() + self.timeout_s + 1
        while not delivered and time.monotonic() < deadline:
            self.producer.poll(0.1)
        if not delivered:
            raise ClusterError(f"producing to {topic!r}: no acknowledgement in time", 503)
        result = delivered[0]
        if isinstance(result, KafkaError):
            raise _describe(KafkaException(result), f"producing to {topic!r}")
        return {"topic": topic, "partition": result.partition(), "offset": result.offset()}

    def fetch_one(self, topic: str, partition: int, offset: int) -> dict[str, Any]:
        page = self.read(topic, [partition], start="offset", offset=offset, timestamp=None,
                         limit=1, keep=lambda m: True)
        found = [m for m in page["messages"] if m["offset"] == offset]
        if not found:
            raise NotFound(f"no message at {topic}/{partition}@{offset}")
        message: dict[str, Any] = found[0]
        return message

    # -- consumer groups ----------------------------------------------------------------------

    def groups(self) -> list[dict[str, Any]]:
        listing = _wait(self.admin.list_consumer_groups(request_timeout=self.timeout_s),
                        "listing consumer groups", self.timeout_s)
        ids = sorted(g.group_id for g in listing.valid)
        if not ids:
            return []
        descriptions = self.admin.describe_consumer_groups(ids, request_timeout=self.timeout_s)
        out = []
        for gid in ids:
            d = _wait(descriptions[gid], f"describing group {gid!r}", self.timeout_s)
            committed = self._committed(gid)
            ends = self.offsets([TopicPartition(t, p) for t, p in committed])
            lag = sum(max(0, ends[k].end - v) for k, v in committed.items() if k in ends
                      and v >= 0)
            out.append({"group_id": gid, "state": _state(d.state),
                        "protocol_type": getattr(d, "protocol_type", None) or "consumer",
                        "protocol": d.partition_assignor or "", "members": len(d.members),
                        "topics": sorted({t for t, _ in committed}), "lag": lag})
        return out

    def _committed(self, group: str) -> dict[tuple[str, int], int]:
        futures = self.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout_s)
        result = _wait(futures[group], f"fetching offsets of {group!r}", self.timeout_s)
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions
                if tp.error is None}

    def _describe_group(self, group: str) -> Any:
        futures = self.admin.describe_consumer_groups([group], request_timeout=self.timeout_s)
        return _wait(futures[group], f"describing group {group!r}", self.timeout_s)

    def group(self, group: str) -> dict[str, Any]:
        d = self._describe_group(group)
        committed = self._committed(group)
        if _state(d.state) == "DEAD" and not committed:
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
        return {"group_id": group, "state": _state(d.state),
                "protocol": d.partition_assignor or "", "members": members,
                "offsets": offsets,
                "lag": sum(o["lag"] or 0 for o in offsets)}

    def preview_reset(self, group: str, topic: str | None, strategy: str,
                      value: int | None) -> dict[str, Any]:
        d = self._describe_group(group)
        committed = self._committed(group)
        keys = sorted(k for k in committed if topic is None or k[0] == topic)
        if topic is not None and not keys:
            meta = self._topic_metadata(topic)
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
        state = _state(d.state)
        return {"group_id": group, "state": state, "strategy": strategy, "offsets": rows,
                "can_apply": state in EMPTY_GROUP_STATES}

    def apply_reset(self, group: str, rows: Sequence[Mapping[str, Any]]) -> None:
        state = _state(self._describe_group(group).state)
        if state not in EMPTY_GROUP_STATES:
            raise Conflict(f"group {group!r} is {state}: offsets can be reset only while it "
                           f"has no members (stop its consumers first)")
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(r["topic"], r["partition"], r["new"]) for r in rows])
        futures = self.admin.alter_consumer_group_offsets([request],
                                                          request_timeout=self.timeout_s)
        _wait(futures[group], f"resetting offsets of {group!r}", self.timeout_s)

    def delete_group(self, group: str) -> None:
        futures = self.admin.delete_consumer_groups([group], request_timeout=self.timeout_s)
        _wait(futures[group], f"deleting group {group!r}", self.timeout_s)


def _state(state: Any) -> str:
    name = getattr(state, "name", None) or str(state)
    return str(name).upper()



def _source_name(source: Any) -> str:
    """Kafka's config source names (DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG, ...)."""
    try:
        return str(ConfigSource(source).name)
    except ValueError:
        return str(getattr(source, "name", source))
