"""Clients for the quota tests: Describe/AlterClientQuotas on the wire (kio over a socket), and
confluent-kafka producers/consumers that measure the rate their acks or records arrive at and
the throttle time librdkafka reports in its statistics (`brokers[*].throttle`)."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from kio.schema.errors import ErrorCode as KioErrorCode

from broker.raw import RawClient, request_module

DESCRIBE_CLIENT_QUOTAS = 48
ALTER_CLIENT_QUOTAS = 49
MESSAGE = b"q" * 1000

Entity = tuple[tuple[str, str | None], ...]


def _code(value: Any) -> str:
    return KioErrorCode(int(value)).name.upper() if int(value) else ""


def alter(bootstrap: str, entries: list[tuple[Entity, list[tuple[str, float, bool]]]],
          validate_only: bool = False, version: int = 1) -> list[tuple[str, str | None, Entity]]:
    """AlterClientQuotas: per answered entry (error name or "", message, entity)."""
    module = request_module(ALTER_CLIENT_QUOTAS, version)
    body = module.AlterClientQuotasRequest(
        entries=tuple(
            module.EntryData(
                entity=tuple(module.EntityData(entity_type=t, entity_name=n) for t, n in entity),
                ops=tuple(module.OpData(key=k, value=v, remove=r) for k, v, r in ops),
            )
            for entity, ops in entries
        ),
        validate_only=validate_only,
    )
    with RawClient(bootstrap) as client:
        response = client.call(ALTER_CLIENT_QUOTAS, version, body)
    return [
        (_code(entry.error_code), entry.error_message,
         tuple((e.entity_type, e.entity_name) for e in entry.entity))
        for entry in response.entries
    ]


def describe(bootstrap: str, components: list[tuple[str, int, str | None]] = (),  # type: ignore[assignment]
             strict: bool = False, version: int = 1, source_host: str | None = None
             ) -> tuple[str, str | None, dict[Entity, dict[str, float]]]:
    """DescribeClientQuotas: (error name or "", message, {sorted entity: values});
    `source_host`: connect from this local address (e.g. 127.0.0.2, for host ACLs)."""
    module = request_module(DESCRIBE_CLIENT_QUOTAS, version)
    body = module.DescribeClientQuotasRequest(
        components=tuple(
            module.ComponentData(entity_type=t, match_type=m, match=s) for t, m, s in components
        ),
        strict=strict,
    )
    with RawClient(bootstrap) as client:
        if source_host is not None:
            host, _, port = bootstrap.rpartition(":")
            client.sock.close()
            client.sock = socket.create_connection((host, int(port)), timeout=30,
                                                   source_address=(source_host, 0))
        response = client.call(DESCRIBE_CLIENT_QUOTAS, version, body)
    found = {
        tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
            {v.key: v.value for v in entry.values}
        for entry in response.entries or ()
    }
    return _code(response.error_code), response.error_message, found


@dataclass
class Flow:
    """Bytes acked (producer) or received (consumer) with their arrival times."""

    events: list[tuple[float, int]] = field(default_factory=list)
    throttle_ms_max: int = 0

    def on_stats(self, text: str) -> None:
        for broker in json.loads(text)["brokers"].values():
            throttle_ms = broker.get("throttle", {}).get("max", 0)
            self.throttle_ms_max = max(self.throttle_ms_max, throttle_ms)

    def rate(self, start: float, end: float) -> float:
        """Bytes/s between the two times."""
        return sum(size for at, size in self.events if start <= at < end) / (end - start)


def produce_for(bootstrap: str, topic: str, client_id: str, seconds: float,
                **settings: Any) -> tuple[Flow, float]:
    """Produce 1 KB records as fast as the producer's queue allows for `seconds`; returns the
    acked flow and the start time. 16 KB batches, so every request is a small part of a
    quota window (as in Kafka, one request larger than the window is throttled on its own),
    and at most 64 KB queued, so the flush at the end is short even at the quota's pace."""
    flow = Flow()
    producer = Producer({
        "bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
        "batch.size": 16384, "queue.buffering.max.kbytes": 64,
        "statistics.interval.ms": 200, "stats_cb": flow.on_stats, **settings,
    })

    def acked(error: Any, message: Any) -> None:
        if error is None:
            flow.events.append((time.monotonic(), len(message.value())))

    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            producer.produce(topic, MESSAGE, on_delivery=acked)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(60) == 0
    producer.poll(0.5)  # a last statistics callback
    return flow, start


def fill(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "filler",
                         "linger.ms": 5, "batch.size": 16384})
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, MESSAGE)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def consume_for(bootstrap: str, topic: str, client_id: str, seconds: float, limit: int
                ) -> tuple[Flow, float]:
    """Read partition 0 from the start for `seconds` after the first record (or until `limit`
    records); 64 KB fetches (a small part of the quota window)."""
    flow = Flow()
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "client.id": client_id, "group.id": f"g-{client_id}",
        "auto.offset.reset": "earliest", "fetch.max.bytes": 65536,
        "max.partition.fetch.bytes": 65536, "message.max.bytes": 65536,
        "statistics.interval.ms": 200, "stats_cb": flow.on_stats,
    })
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])  # no group: no rebalance
    start: float | None = None
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and len(flow.events) < limit:
            message = consumer.poll(0.05)
            if message is not None and message.error() is None:
                now = time.monotonic()
                start = now if start is None else start
                flow.events.append((now, len(message.value())))
            if start is not None and time.monotonic() - start >= seconds:
                break
        consumer.poll(0.3)  # a last statistics callback
    finally:
        consumer.close()
    assert start is not None, "no record arrived"
    return flow, start
