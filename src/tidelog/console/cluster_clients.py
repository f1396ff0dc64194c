"""The clients every cluster call goes through (confluent-kafka's admin, producer and browsing
consumers), plus the metadata and offset look-ups the admin, message and group calls share.

Every method is blocking (confluent-kafka's futures) and is called from a worker thread by the
web layer.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exports, untyped
    AdminClient,
    OffsetSpec,
)

from tidelog.console.errors import (
    AUTHORIZATION_CODES,
    ClusterError,
    NotFound,
    describe_error,
    not_allowed,
    wait_for,
)
from tidelog.console.kafka_raw import RawConnection

MAX_IDLE_BROWSERS = 2  # per Cluster (the shared one, or a signed-in user's)


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    start: int
    end: int


class ClusterClients:
    """The clients and the look-ups shared by `Cluster`'s admin, message and group calls."""

    def __init__(self, bootstrap: str, timeout_s: float = 10.0,
                 client_config: Mapping[str, Any] | None = None) -> None:
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        # Against a SASL cluster client_config carries the signed-in user's credentials
        # (cluster_sessions).
        self._base: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "client.id": "tidelog-console",
            "socket.connection.setup.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 2000,
            **(client_config or {}),
        }
        self._admin: AdminClient | None = None
        self._producer: Producer | None = None
        # Browsing consumers kept between pages: making one (threads, connections, metadata)
        # cost more than the page itself on a loaded machine (docs/benchmarks.md).
        self._idle_browsers: list[tuple[str, Consumer]] = []
        self._browsers_lock = threading.Lock()

    # -- clients ------------------------------------------------------------------------------

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            # Never create a topic by asking about it (the producer-type default is true).
            self._admin = AdminClient({**self._base, "allow.auto.create.topics": False})
        return self._admin

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer({**self._base, "linger.ms": 0,
                                       "message.timeout.ms": int(self.timeout_s * 1000)})
        return self._producer

    def consumer(self, *, tail: bool = False) -> Consumer:
        # A page is small: don't fetch (and decode) a megabyte ahead of it. A live tail must
        # keep up with a busy topic instead (10,000 msg/s: docs/console.md).
        ahead: dict[str, Any] = (
            {"max.partition.fetch.bytes": 1048576, "queued.min.messages": 100000,
             "fetch.wait.max.ms": 100} if tail else
            {"max.partition.fetch.bytes": 262144, "queued.min.messages": 1000,
             # A pooled browser's next page waits behind its last fetch: one that reached
             # the log end long-polls (500 ms by default), and a full queue backs off (1 s).
             "fetch.wait.max.ms": 10, "fetch.queue.backoff.ms": 10})
        return Consumer({**self._base, "group.id": f"tidelog-console-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "auto.offset.reset": "earliest", **ahead})

    @contextmanager
    def browser(self, topic: str) -> Iterator[Consumer]:
        """A browsing consumer for `topic`: one kept from an earlier page of the same topic
        (at most MAX_IDLE_BROWSERS are kept, unassigned), else a new one. librdkafka tags
        each fetch with the assignment's version, so nothing fetched for an earlier page
        reaches a later one. Per topic: assigning a topic new to a running consumer waited
        about a second for its metadata, three times what a new consumer costs."""
        with self._browsers_lock:
            found = next((i for i, (t, _) in enumerate(self._idle_browsers) if t == topic), None)
            consumer = self._idle_browsers.pop(found)[1] if found is not None else None
        if consumer is None:
            consumer = self.consumer()
        reusable = False
        try:
            yield consumer
            consumer.unassign()
            reusable = True
        finally:
            evicted = [consumer] if not reusable else []
            if reusable:
                with self._browsers_lock:
                    self._idle_browsers.append((topic, consumer))
                    while len(self._idle_browsers) > MAX_IDLE_BROWSERS:
                        evicted.append(self._idle_browsers.pop(0)[1])
            for old in evicted:
                old.close()

    def close(self) -> None:
        with self._browsers_lock:
            idle, self._idle_browsers = self._idle_browsers, []
        for _, consumer in idle:
            consumer.close()
        if self._producer is not None:
            self._producer.flush(1)

    def raw(self, address: tuple[str, int] | None = None) -> RawConnection:
        """A hand-made connection (kafka_raw) with this client's security settings, to
        `address` or to any live broker, for requests confluent-kafka lacks or mishandles."""
        if address is None:
            try:
                brokers = list(self.metadata().brokers.values())
            except ClusterError:
                # librdkafka could not reach the cluster, e.g. its reconnection was refused
                # because the user's password changed: ask a bootstrap broker directly, so a
                # refused sign-in is told as such (401), not as an unreachable cluster.
                brokers = []
            address = ((brokers[0].host, brokers[0].port) if brokers
                       else self._bootstrap_address())
        return RawConnection(address[0], address[1], self._base, self.timeout_s)

    def _bootstrap_address(self) -> tuple[str, int]:
        first = self.bootstrap.split(",")[0].strip()
        host, separator, port = first.rpartition(":")
        if not separator or not port.isdigit():
            raise ClusterError(f"bootstrap server {first!r} is not HOST:PORT", 503)
        return host.strip("[]"), int(port)

    # -- metadata and offsets ----------------------------------------------------------------

    def metadata(self, topic: str | None = None) -> Any:
        try:
            return self.admin.list_topics(topic=topic, timeout=self.timeout_s)
        except Exception as error:
            raise describe_error(error, "reading the cluster's metadata") from None

    def topic_metadata(self, name: str) -> Any:
        md = self.metadata()
        topic = md.topics.get(name)
        if topic is None:
            # All-topics metadata leaves out topics the user may not describe: ask by name,
            # so a refusal is told as one (Kafka answers it before existence).
            topic = self.metadata(name).topics.get(name)
        error = topic.error if topic is not None else None
        if error is not None and error.code() in AUTHORIZATION_CODES:
            raise not_allowed(f"describing topic {name!r}", error.name())
        if topic is None or (error is not None and error.code() in
                             (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC)):
            raise NotFound(f"topic {name!r} does not exist")
        return topic

    def offsets(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[tuple[str, int], PartitionOffsets]:
        if not partitions:
            return {}
        result: dict[tuple[str, int], list[int]] = {}
        specs = ((OffsetSpec.earliest(), 0), (OffsetSpec.latest(), 1))  # type: ignore[no-untyped-call]
        # Both asked at once: one round trip, not two.
        asked = [(slot, self.admin.list_offsets({tp: spec for tp in partitions},
                                                request_timeout=self.timeout_s))
                 for spec, slot in specs]
        for slot, futures in asked:
            for tp, future in futures.items():
                info = wait_for(future, f"listing offsets of {tp.topic}", self.timeout_s)
                result.setdefault((tp.topic, tp.partition), [0, 0])[slot] = info.offset
        return {k: PartitionOffsets(v[0], v[1]) for k, v in result.items()}

    def offsets_for_time(self, partitions: Sequence[TopicPartition], ms: int) -> dict[int, int]:
        futures = self.admin.list_offsets({tp: OffsetSpec.for_timestamp(ms) for tp in partitions},
                                          request_timeout=self.timeout_s)
        return {tp.partition: wait_for(f, "listing offsets by time", self.timeout_s).offset
                for tp, f in futures.items()}
