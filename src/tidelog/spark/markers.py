"""The sink's exactly-once markers (docs/decisions.md), read incrementally.

Marker keys in the one-partition marker topic (values are small JSON documents)::

    "<query id>/<batch id>/<task partition id>"   a task's records are all acknowledged
    "<query id>/<batch id>"                        the driver committed the batch

Spark creates the stream writer again for every micro-batch, and a task must know whether its
(query, batch, task) already published. Rescanning the whole topic with a new consumer in
every task cost ~0.2 s per task and grew with the topic; instead each Python worker keeps a
`MarkerIndex` per marker topic that reads only the markers appended since its last look.

Only the newest batches of a query can be replayed (Spark reruns at most the last batch whose
commit it did not record), so the index keeps the markers of the last `KEEP_BATCHES` batch
ids per query and forgets older ones: memory stays bounded however long a query runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from tidelog.spark.client import METADATA_TIMEOUT_S, consumer_config

KEEP_BATCHES = 4
MAX_QUERIES = 10_000


class MarkerTopicError(RuntimeError):
    """The marker topic could not be read up to its high watermark."""


class MarkerIndex:
    """Marker keys of one marker topic, by query id and batch id."""

    def __init__(self, kafka_config: Mapping[str, str], topic: str) -> None:
        self.topic = topic
        self._consumer = Consumer(consumer_config(kafka_config))
        self._next_offset: int | None = None
        self._queries: dict[str, dict[int, set[str]]] = {}

    def close(self) -> None:
        self._consumer.close()

    def contains(self, *keys: str) -> bool:
        """Whether any of `keys` is a marker, after reading every marker written so far."""
        self.refresh()
        for key in keys:
            query_id, batch_id = _split(key)
            if key in self._queries.get(query_id, {}).get(batch_id, ()):
                return True
        return False

    def refresh(self) -> None:
        partition = TopicPartition(self.topic, 0)
        low, high = self._consumer.get_watermark_offsets(
            partition, timeout=METADATA_TIMEOUT_S, cached=False
        )
        if self._next_offset is None or self._next_offset < low:
            self._next_offset = int(low)
        if self._next_offset >= high:
            return
        self._consumer.assign([TopicPartition(self.topic, 0, self._next_offset)])
        try:
            while self._next_offset < high:
                wanted = min(10_000, high - self._next_offset)
                messages = self._consumer.consume(num_messages=wanted,
                                                  timeout=METADATA_TIMEOUT_S)
                if not messages:
                    raise MarkerTopicError(
                        f"{self.topic}: nothing read at offset {self._next_offset} of {high}"
                    )
                for message in messages:
                    error = message.error()
                    if error is not None:
                        if error.retriable():
                            continue
                        raise KafkaException(error)
                    offset = int(message.offset() or 0)
                    if offset < self._next_offset:
                        continue
                    self._next_offset = offset + 1
                    self._add((message.key() or b"").decode("utf-8", "replace"))
        finally:
            self._consumer.unassign()

    def _add(self, key: str) -> None:
        try:
            query_id, batch_id = _split(key)
        except ValueError:
            return  # not a marker this version writes
        batches = self._queries.get(query_id)
        if batches is None:
            if len(self._queries) >= MAX_QUERIES:
                self._queries.pop(next(iter(self._queries)))  # the longest-known query
            batches = self._queries[query_id] = {}
        batches.setdefault(batch_id, set()).add(key)
        if len(batches) > KEEP_BATCHES:
            for old in sorted(batches)[:-KEEP_BATCHES]:
                del batches[old]


def _split(key: str) -> tuple[str, int]:
    """(query id, batch id) of a batch or task marker key; ValueError otherwise."""
    parts = key.split("/")
    if len(parts) not in (2, 3):
        raise ValueError(key)
    return parts[0], int(parts[1])


# One index per (client settings, marker topic) per Python worker.
_INDEXES: dict[tuple[Any, ...], MarkerIndex] = {}


def marker_index(kafka_config: Mapping[str, str], topic: str) -> MarkerIndex:
    key = (tuple(sorted((k, str(v)) for k, v in kafka_config.items())), topic)
    index = _INDEXES.get(key)
    if index is None:
        index = _INDEXES[key] = MarkerIndex(kafka_config, topic)
    return index


def forget_index(kafka_config: Mapping[str, str], topic: str) -> None:
    """Drop a worker's index after an error, so the next task starts from a fresh read."""
    key = (tuple(sorted((k, str(v)) for k, v in kafka_config.items())), topic)
    index = _INDEXES.pop(key, None)
    if index is not None:
        index.close()
