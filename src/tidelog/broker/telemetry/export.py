"""Accepted client metrics, kept per client instance and exposed in the broker's /metrics.

Kafka hands pushed metrics to a `ClientTelemetryReceiver` plugin; Tidelog's receiver is its own
Prometheus endpoint. Each OTLP metric becomes one family `tidelog_client_<name>` (dots and other
characters Prometheus refuses become `_`), labelled `client_instance_id`, `client_id`,
`client_software_name` and the data point's own attributes (`node.id` -> `node_id`):

- gauge: the last value pushed;
- sum: the running total (the broker asks for delta temporality, as Kafka does, so every push
  carries what changed since the previous one) exposed as a counter `..._total`;
- histogram: running `_count` and `_sum` gauges.

Bounded: at most `MAX_CLIENTS` client instances (the least recently pushing one goes first)
and `MAX_SERIES_PER_CLIENT` series each; a series past that is dropped and counted in
`tidelog_client_telemetry_dropped_series_total`. A client instance leaves when the broker
forgets it (expiry, `max(60 s, 3 x push interval)` after its last request).
Runs on the event loop (pushes and scrapes alike).
"""

from __future__ import annotations

import re
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from tidelog.protocol.otlp import DataPoint, PointKind

MAX_CLIENTS = 1_000
MAX_SERIES_PER_CLIENT = 1_000
CLIENT_LABELS = ("client_instance_id", "client_id", "client_software_name")
_NOT_NAME = re.compile(r"[^a-zA-Z0-9_]")


def prometheus_name(name: str) -> str:
    cleaned = _NOT_NAME.sub("_", name)
    return cleaned if cleaned[:1].isalpha() or cleaned[:1] == "_" else f"_{cleaned}"


SeriesKey = tuple[str, PointKind, tuple[tuple[str, str], ...]]


@dataclass(slots=True)
class ExportedClient:
    labels: tuple[str, str, str]
    series: dict[SeriesKey, list[float]] = field(default_factory=dict)  # value[, sum]


class ClientMetricsExport:
    def __init__(
        self, max_clients: int = MAX_CLIENTS, max_series: int = MAX_SERIES_PER_CLIENT
    ) -> None:
        self.clients: OrderedDict[uuid.UUID, ExportedClient] = OrderedDict()
        self.max_clients = max_clients
        self.max_series = max_series
        self.dropped_series = 0
        self.pushes: dict[str, int] = {}  # outcome (error name or NONE) -> count

    def accept(
        self, instance_id: uuid.UUID, client_id: str, software_name: str,
        points: Iterable[DataPoint],
    ) -> None:
        client = self.clients.get(instance_id)
        if client is None:
            client = self.clients[instance_id] = ExportedClient(
                (str(instance_id), client_id, software_name)
            )
            while len(self.clients) > self.max_clients:
                self.clients.popitem(last=False)
        self.clients.move_to_end(instance_id)
        for point in points:
            attributes = tuple(
                sorted(
                    (prometheus_name(key), value)
                    for key, value in point.attributes
                    if key and prometheus_name(key) not in CLIENT_LABELS
                )
            )
            key: SeriesKey = (point.metric, point.kind, attributes)
            values = client.series.get(key)
            if values is None:
                if len(client.series) >= self.max_series:
                    self.dropped_series += 1
                    continue
                values = client.series[key] = [0.0, 0.0]
            if point.kind is PointKind.GAUGE:
                values[0] = point.value
            else:  # delta temporality: accumulate
                values[0] += point.value
                values[1] += point.histogram_sum or 0.0

    def forget(self, instance_ids: Iterable[uuid.UUID]) -> None:
        for instance_id in instance_ids:
            self.clients.pop(instance_id, None)

    def record_push(self, outcome: str) -> None:
        self.pushes[outcome] = self.pushes.get(outcome, 0) + 1

    def collect(self) -> Iterator[Metric]:
        pushes = CounterMetricFamily(
            "tidelog_client_telemetry_pushes", "PushTelemetry requests by outcome (KIP-714).",
            labels=("error",),
        )
        for outcome, count in sorted(self.pushes.items()):
            pushes.add_metric((outcome,), count)
        yield pushes
        yield CounterMetricFamily(
            "tidelog_client_telemetry_dropped_series",
            "Client metric series not kept (past the per-client bound).",
            value=self.dropped_series,
        )
        yield GaugeMetricFamily(
            "tidelog_client_telemetry_clients", "Client instances whose metrics are exposed.",
            value=len(self.clients),
        )
        # family name -> (kind, label names, rows)
        families: dict[str, tuple[PointKind, set[str], list[tuple[dict[str, str], float]]]] = {}
        for client in self.clients.values():
            base = dict(zip(CLIENT_LABELS, client.labels, strict=True))
            for (metric, kind, attributes), values in client.series.items():
                name = "tidelog_client_" + prometheus_name(metric)
                rows: list[tuple[str, float]] = [(name, values[0])]
                if kind is PointKind.HISTOGRAM:
                    rows = [(name + "_count", values[0]), (name + "_sum", values[1])]
                for family_name, value in rows:
                    entry = families.setdefault(family_name, (kind, set(CLIENT_LABELS), []))
                    labels = base | dict(attributes)
                    entry[1].update(labels)
                    entry[2].append((labels, value))
        for family_name, (kind, label_names, rows_of) in sorted(families.items()):
            names = sorted(label_names)
            family: Metric
            if kind is PointKind.SUM:
                family = CounterMetricFamily(family_name, "Client metric (KIP-714).", labels=names)
            else:
                family = GaugeMetricFamily(family_name, "Client metric (KIP-714).", labels=names)
            for labels, value in rows_of:
                family.add_metric([labels.get(name, "") for name in names], value)
            yield family
