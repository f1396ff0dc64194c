"""Throughput from Tidelog's Prometheus /metrics: scraped every few seconds into a 15-minute
ring of rates (messages and bytes in/out per second, request latency p99). Brokers without the
endpoint (Apache Kafka) simply have no charts."""

from __future__ import annotations

import time
import urllib.request
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

WINDOW_S = 15 * 60
# Share partitions (Tidelog's broker/share/metrics.py): records locked by a member now, and
# offsets between the start offset and the end of the in-flight window.
_SHARE_GAUGES = {"tidelog_share_acquired_records": "acquired",
                 "tidelog_share_in_flight_records": "in_flight"}
_COUNTERS = {"tidelog_messages_in": "messages_in", "tidelog_bytes_in": "bytes_in",
             "tidelog_messages_out": "messages_out", "tidelog_bytes_out": "bytes_out"}


@dataclass
class Scrape:
    at: float
    totals: dict[str, float]
    sizes: dict[tuple[str, int], float]
    latency_buckets: dict[str, list[tuple[float, float]]]
    share: dict[tuple[str, str, int], dict[str, int]] = field(default_factory=dict)


def scrape(url: str, timeout_s: float = 3.0) -> Scrape:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        text = response.read().decode("utf-8", "replace")
    totals = dict.fromkeys(_COUNTERS.values(), 0.0)
    sizes: dict[tuple[str, int], float] = {}
    buckets: dict[str, list[tuple[float, float]]] = {}
    share: dict[tuple[str, str, int], dict[str, int]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            base = sample.name.removesuffix("_total")
            if base in _COUNTERS:
                totals[_COUNTERS[base]] += sample.value
            elif sample.name == "tidelog_log_size_bytes":
                key = (sample.labels.get("topic", ""), int(sample.labels.get("partition", "0")))
                sizes[key] = sample.value
            elif sample.name in _SHARE_GAUGES:
                labels = sample.labels
                key3 = (labels.get("group", ""), labels.get("topic", ""),
                        int(labels.get("partition", "0")))
                share.setdefault(key3, {})[_SHARE_GAUGES[sample.name]] = int(sample.value)
            elif sample.name.endswith("_bucket") and "latency" in sample.name:
                api = sample.labels.get("api", "")
                if api in ("Produce", "Fetch"):
                    le = sample.labels.get("le", "+Inf")
                    buckets.setdefault(api, []).append((float(le), sample.value))
    return Scrape(time.time(), totals, sizes, buckets, share)


def _p99(now: Sequence[tuple[float, float]], before: Sequence[tuple[float, float]]) -> float | None:
    old = dict(before)
    deltas = sorted((le, count - old.get(le, 0.0)) for le, count in now)
    if not deltas or deltas[-1][1] <= 0:
        return None
    target = deltas[-1][1] * 0.99
    for le, count in deltas:
        if count >= target:
            return le * 1000 if le != float("inf") else None
    return None


@dataclass
class MetricsHistory:
    """Per-interval rates from consecutive scrapes of every configured /metrics URL."""

    urls: Sequence[str]
    points: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=2000))
    last: dict[str, Scrape] = field(default_factory=dict)
    up: dict[str, bool] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def sample(self) -> dict[str, Any] | None:
        """Scrape every URL once; append and return the summed rates since the last scrape."""
        rates = dict.fromkeys(_COUNTERS.values(), 0.0)
        p99: dict[str, float | None] = {"produce_p99_ms": None, "fetch_p99_ms": None}
        have_rates = False
        for url in self.urls:
            try:
                current = scrape(url)
            except (OSError, ValueError) as error:
                self.up[url] = False
                self.errors[url] = str(error)
                self.last.pop(url, None)
                continue
            self.up[url], self.errors[url] = True, ""
            previous = self.last.get(url)
            self.last[url] = current
            if previous is None:
                continue
            elapsed = max(current.at - previous.at, 1e-3)
            have_rates = True
            for name, total in current.totals.items():
                # A restarted broker's counters start again at zero: count from zero.
                delta = total - previous.totals.get(name, 0.0)
                rates[name] += (delta if delta >= 0 else total) / elapsed
            for api, key in (("Produce", "produce_p99_ms"), ("Fetch", "fetch_p99_ms")):
                value = _p99(current.latency_buckets.get(api, []),
                             previous.latency_buckets.get(api, []))
                if value is not None:
                    p99[key] = max(value, p99[key] or 0.0)
        if not have_rates:
            return None
        point = {"t": int(time.time() * 1000), **{k: round(v, 2) for k, v in rates.items()},
                 **p99}
        self.points.append(point)
        cutoff = (time.time() - WINDOW_S) * 1000
        while self.points and self.points[0]["t"] < cutoff:
            self.points.popleft()
        return point

    def disk_bytes(self, url: str) -> int | None:
        """Bytes of log on the broker behind `url` (its last scrape), None when unknown."""
        scrape = self.last.get(url)
        return int(sum(scrape.sizes.values())) if scrape is not None else None

    def share_partitions(self, group: str) -> dict[tuple[str, int], dict[str, int]] | None:
        """A share group's acquired and in-flight counts per partition from the last scrapes
        (as old as `metrics_interval`); None without a scrape (Kafka has no /metrics)."""
        if not self.last:
            return None
        return {(topic, partition): values for s in self.last.values()
                for (g, topic, partition), values in s.share.items() if g == group}

    def sizes(self) -> Mapping[tuple[str, int], float] | None:
        if not self.last:
            return None
        merged: dict[tuple[str, int], float] = {}
        for s in self.last.values():
            for key, value in s.sizes.items():
                merged[key] = max(merged.get(key, 0.0), value)
        return merged
