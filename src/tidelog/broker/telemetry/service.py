"""The broker's client telemetry service: subscriptions (from the config store), client
instances (`coordinator/client_metrics.py`, pure) and the export of accepted metrics.

Runs on the event loop. The store is blocking (file or ZooKeeper): handlers call `write` on a
worker thread, then `replace_subscriptions`; in a cluster the ZooKeeper agent calls
`replace_subscriptions` on every `/config/changes` notice, so every broker serves the same
subscriptions.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import Metric

from tidelog.broker.telemetry.export import ClientMetricsExport
from tidelog.broker.telemetry.store import ClientMetricsStore, Subscriptions
from tidelog.coordinator.client_metrics import ClientInstance, ClientMetricsManager
from tidelog.errors import CorruptRecordError, ErrorCode
from tidelog.protocol.otlp import OtlpError, decode_metrics_data
from tidelog.records.batch import Codec
from tidelog.records.codecs import decompress

# A pushed payload may decompress to at most this many times telemetry.max.bytes.
MAX_EXPANSION = 16


class TelemetryService:
    def __init__(
        self, store: ClientMetricsStore, max_bytes: int, clock_ms: Callable[[], int]
    ) -> None:
        self.store = store
        self.max_bytes = max_bytes
        self.clock_ms = clock_ms
        self.manager = ClientMetricsManager()
        self.export = ClientMetricsExport()
        self.manager.replace_subscriptions(store.load())

    def replace_subscriptions(self, subscriptions: Mapping[str, Mapping[str, str]]) -> None:
        self.manager.replace_subscriptions(subscriptions)

    def subscriptions(self) -> Subscriptions:
        """The stored configs of every subscription (blocking: the store's read)."""
        return self.store.load()

    def accept(self, instance: ClientInstance, compression_type: int, payload: bytes) -> None:
        """Decode and keep a push's metrics; raises OtlpError or CorruptRecordError (Kafka:
        INVALID_RECORD) when the payload cannot be read."""
        data = decompress(Codec(compression_type), payload, self.max_bytes * MAX_EXPANSION)
        decoded = decode_metrics_data(data)
        attributes = instance.attributes
        self.export.accept(
            instance.instance_id,
            attributes.get("client_id") or "",
            attributes.get("client_software_name") or "",
            decoded.points,
        )

    def expire(self) -> None:
        self.manager.expire(self.clock_ms())
        instances = self.manager.instances
        self.export.forget([key for key in self.export.clients if key not in instances])

    def collect(self) -> Iterator[Metric]:
        self.expire()
        yield from self.export.collect()


def new_instance_id() -> uuid.UUID:
    return uuid.uuid4()


READ_ERRORS = (OtlpError, CorruptRecordError)
INVALID_RECORD = ErrorCode.INVALID_RECORD
