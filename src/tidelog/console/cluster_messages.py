"""Cluster calls for the Messages page: browse (also behind export and live tail's decoding),
produce, and fetch one message to re-produce it."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from tidelog.console.cluster_clients import ClusterClients
from tidelog.console.errors import ClusterError, NotFound, describe_error

MAX_PAGE = 1000


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


class MessageCalls(ClusterClients):
    def read(self, topic: str, partitions: Sequence[int] | None, *, start: str,
             offset: int | None, timestamp: int | None, limit: int,
             keep: Callable[[dict[str, Any]], bool], scan_limit: int = 10_000
             ) -> dict[str, Any]:
        """Read up to `limit` matching messages. start: oldest | newest | offset | timestamp.
        newest reads the last `limit` messages of each partition. At most `scan_limit`
        messages are examined (the answer says how many, so a filter never hangs the API)."""
        meta = self.topic_metadata(topic)
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
            with self.browser(topic) as consumer:
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
                        if m.topic() is not None and (m.topic() != topic or part not in position):
                            continue  # not this page's (a pooled consumer's earlier page)
                        if error is not None:
                            if error.code() == KafkaError._PARTITION_EOF:
                                pending.discard(part)
                                continue
                            if error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                                continue  # the coordinator look-up; browsing needs no group
                            raise describe_error(KafkaException(error), f"reading topic {topic!r}")
                        position[part] = at + 1
                        if at >= bounds[(topic, part)].end - 1:
                            pending.discard(part)
                        scanned += 1
                        decoded = message_dict(m)
                        if keep(decoded):
                            messages.append(decoded)
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
        meta = self.topic_metadata(topic)
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
            raise describe_error(error, f"producing to topic {topic!r}") from None
        deadline = time.monotonic() + self.timeout_s + 1
        while not delivered and time.monotonic() < deadline:
            self.producer.poll(0.1)
        if not delivered:
            raise ClusterError(f"producing to {topic!r}: no acknowledgement in time", 503)
        result = delivered[0]
        if isinstance(result, KafkaError):
            raise describe_error(KafkaException(result), f"producing to topic {topic!r}")
        return {"topic": topic, "partition": result.partition(), "offset": result.offset()}

    def fetch_one(self, topic: str, partition: int, offset: int) -> dict[str, Any]:
        page = self.read(topic, [partition], start="offset", offset=offset, timestamp=None,
                         limit=1, keep=lambda m: True)
        found = [m for m in page["messages"] if m["offset"] == offset]
        if not found:
            raise NotFound(f"no message at {topic}/{partition}@{offset}")
        message: dict[str, Any] = found[0]
        return message
