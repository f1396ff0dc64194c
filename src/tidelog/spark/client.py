"""The Kafka client side of the data source, on confluent_kafka (librdkafka), per D12.

`Cluster` runs on the driver: partitions of a subscription, log start offsets and high
watermarks, offsets for timestamps. `read_range` runs in an executor task: it reads
[start_offset, end_offset) of one partition with assign + consume and yields Arrow batches.
Blocking network I/O; called from Spark's Python workers, never from an event loop.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from tidelog.spark.options import Subscription
from tidelog.spark.planning import DataLossError, OffsetRange
from tidelog.spark.schema import messages_to_batch

METADATA_TIMEOUT_S = 30.0
# Records per consume() call: small enough that the Message objects of one call stay in the
# CPU cache while they are turned into Arrow columns (10,000 per call cost ~0.4 us more per
# record than 2,000 here), big enough to amortise the call.
CONSUME_BATCH = 2_000
# Rows per Arrow batch handed to Spark: the chunks of several consume() calls are joined.
ARROW_BATCH_ROWS = 10_000


class SourceTimeoutError(TimeoutError):
    """The broker sent nothing for kafkaConsumer.pollTimeoutMs while records were still due."""


def consumer_config(kafka_config: Mapping[str, str]) -> dict[str, Any]:
    """Client settings for a consumer that only assigns: no group, no commits."""
    config: dict[str, Any] = dict(kafka_config)
    config.setdefault("group.id", "tidelog-spark")
    # Spark's Kafka source reads uncommitted records unless told otherwise (librdkafka's own
    # default is read_committed).
    config.setdefault("isolation.level", "read_uncommitted")
    config.update(
        {
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
            "enable.partition.eof": False,
        }
    )
    # A task reads a known range as fast as it can: prefetch deep (librdkafka's default of
    # 100,000 queued messages made consume() wait on fetches, ~5x slower here), and do not let
    # the broker park a fetch long when the tail of the range is all that is left.
    config.setdefault("fetch.max.bytes", 52_428_800)
    config.setdefault("max.partition.fetch.bytes", 16_777_216)
    config.setdefault("queued.max.messages.kbytes", 262_144)
    config.setdefault("queued.min.messages", 1_000_000)
    config.setdefault("fetch.wait.max.ms", 5)
    # When the queue does pass those limits, look again after 1 ms, not librdkafka's 1 s.
    config.setdefault("fetch.queue.backoff.ms", 1)
    return config


class Cluster:
    """Driver-side metadata queries. Owns one consumer; call `close()` when done."""

    def __init__(self, kafka_config: Mapping[str, str]) -> None:
        self._consumer = Consumer(consumer_config(kafka_config))

    def close(self) -> None:
        self._consumer.close()

    def partitions(self, subscription: Subscription) -> list[tuple[str, int]]:
        if subscription.kind == "assign":
            return sorted(subscription.assigned)
        if subscription.kind == "subscribe":
            # Ask for the named topics only: cheaper than listing the whole cluster.
            listed = {}
            for wanted in subscription.topics:
                listed.update(self._consumer.list_topics(wanted, timeout=METADATA_TIMEOUT_S).topics)
        else:
            listed = self._consumer.list_topics(timeout=METADATA_TIMEOUT_S).topics
        found: list[tuple[str, int]] = []
        for name, topic in listed.items():
            if topic.error is not None or not subscription.matches(name):
                continue
            if subscription.kind == "subscribePattern" and name.startswith("__"):
                continue
            found.extend((name, index) for index in topic.partitions)
        return sorted(found)

    def leaders(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], str]:
        """host:port of each partition's leader, for executors' direct reads (fetch_reader)."""
        result: dict[tuple[str, int], str] = {}
        wanted = sorted(set(partitions))
        for name in sorted({topic for topic, _ in wanted}):
            metadata = self._consumer.list_topics(name, timeout=METADATA_TIMEOUT_S)
            topic = metadata.topics.get(name)
            if topic is None or topic.error is not None:
                continue
            for (t, index) in wanted:
                partition = topic.partitions.get(index) if t == name else None
                broker = metadata.brokers.get(partition.leader) if partition else None
                if broker is not None:
                    result[(t, index)] = f"{broker.host}:{broker.port}"
        return result

    def watermarks(
        self, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], tuple[int, int]]:
        """(log_start_offset, high_watermark) of each partition."""
        result: dict[tuple[str, int], tuple[int, int]] = {}
        for topic, partition in partitions:
            low, high = self._consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=METADATA_TIMEOUT_S, cached=False
            )
            result[(topic, partition)] = (int(low), int(high))
        return result

    def offsets_for_times(
        self, timestamps: Mapping[tuple[str, int], int]
    ) -> dict[tuple[str, int], int | None]:
        """Earliest offset whose timestamp >= the given one, or None when there is none."""
        if not timestamps:
            return {}
        query = [TopicPartition(t, p, ts) for (t, p), ts in timestamps.items()]
        answers = self._consumer.offsets_for_times(query, timeout=METADATA_TIMEOUT_S)
        result: dict[tuple[str, int], int | None] = {}
        for answer in answers:
            if answer.error is not None:
                raise KafkaException(answer.error)
            result[(answer.topic, answer.partition)] = answer.offset if answer.offset >= 0 else None
        return result


# One consumer per configuration per Python worker, reassigned for each task: Spark reuses
# workers, and creating plus closing a consumer costs ~0.2 s, a lot for a short range.
_CONSUMERS: dict[tuple[tuple[str, str], ...], Any] = {}


def _task_consumer(kafka_config: Mapping[str, str]) -> tuple[tuple[tuple[str, str], ...], Any]:
    config = consumer_config(kafka_config)
    key = tuple(sorted((k, str(v)) for k, v in config.items()))
    consumer = _CONSUMERS.pop(key, None)
    return key, consumer if consumer is not None else Consumer(config)


def commit_group_offsets(consumer: Any, offsets: Mapping[tuple[str, int], int]) -> None:
    """Commit `offsets` (next offset to read) for the consumer's group, synchronously."""
    if offsets:
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())],
            asynchronous=False,
        )


def read_range(
    kafka_config: Mapping[str, str],
    offset_range: OffsetRange,
    include_headers: bool,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
) -> Iterator[pa.RecordBatch]:
    """Yield the records of one partition in [start_offset, end_offset) as Arrow batches.

    Offsets inside the range may be missing (compaction); offsets below the log start offset
    mean data loss, which raises `DataLossError` or, with failOnDataLoss=false, is skipped."""
    topic, partition = offset_range.topic, offset_range.partition
    end = offset_range.end_offset
    next_offset = offset_range.start_offset
    if next_offset >= end:
        return
    key, consumer = _task_consumer(kafka_config)
    healthy = False
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    try:
        consumer.assign([TopicPartition(topic, partition, next_offset)])
        deadline = time.monotonic() + poll_timeout_ms / 1000
        while next_offset < end:
            # consume() returns when it has num_messages or at the timeout: never ask for more
            # than the range still holds, or the last call of every range waits it out.
            wanted = min(CONSUME_BATCH, end - next_offset)
            messages = consumer.consume(num_messages=wanted, timeout=0.5)
            errors = any(map(Message.error, messages))
            good = [m for m in messages if m.error() is None] if errors else messages
            if good and _stale(good[0], topic, partition, next_offset):
                # Prefetched for this consumer's previous assignment: not ours.
                good = [m for m in good if not _stale(m, topic, partition, next_offset)]
            if len(good) != len(messages):
                next_offset = _handle_errors(
                    consumer, messages, topic, partition, next_offset, fail_on_data_loss
                )
            if good:
                reached_end = good[-1].offset() >= end - 1
                if good[-1].offset() >= end:
                    good = [m for m in good if m.offset() < end]
                if good:
                    next_offset = good[-1].offset() + 1
                    pending.append(messages_to_batch(good, topic, partition, include_headers))
                    pending_rows += len(good)
                    if pending_rows >= ARROW_BATCH_ROWS:
                        yield _joined(pending)
                        pending, pending_rows = [], 0
                if reached_end:
                    break
                deadline = time.monotonic() + poll_timeout_ms / 1000
                continue
            position = consumer.position([TopicPartition(topic, partition)])[0].offset
            if position >= end:
                break  # the tail of the range was compacted away
            if time.monotonic() > deadline:
                raise SourceTimeoutError(
                    f"{topic}/{partition}: no records for {poll_timeout_ms} ms while reading "
                    f"offset {next_offset} of [{offset_range.start_offset}, {end})"
                )
        if pending:
            yield _joined(pending)
        healthy = True
    finally:
        if healthy and key not in _CONSUMERS:
            consumer.unassign()
            _CONSUMERS[key] = consumer
        else:
            consumer.close()


def _joined(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    return batches[0] if len(batches) == 1 else pa.concat_batches(batches)


def _stale(message: Any, topic: str, partition: int, next_offset: int) -> bool:
    return bool(
        message.offset() < next_offset
        or message.partition() != partition
        or message.topic() != topic
    )


def _handle_errors(
    consumer: Any,
    messages: list[Any],
    topic: str,
    partition: int,
    next_offset: int,
    fail_on_data_loss: bool,
) -> int:
    """Deal with error events from consume(); return the offset to continue from."""
    for message in messages:
        error = message.error()
        if error is None:
            continue
        if error.code() in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
            low, _high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=METADATA_TIMEOUT_S, cached=False
            )
            if next_offset >= low:
                raise KafkaException(error)
            if fail_on_data_loss:
                raise DataLossError(
                    f"{topic}/{partition}: offsets {next_offset}..{low - 1} were removed by "
                    "retention before they were read; set failOnDataLoss=false to skip them"
                )
            consumer.assign([TopicPartition(topic, partition, low)])
            return int(low)
        if error.retriable() or error.code() == KafkaError._PARTITION_EOF:
            continue
        raise KafkaException(error)
    return next_offset
