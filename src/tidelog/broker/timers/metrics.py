"""Delayed delivery's Prometheus families, read from the timer service at scrape time.

    timer_pending{topic,partition}              gauge    records waiting in the timer log
    timer_next_due_timestamp_ms{topic,partition} gauge   earliest due time (epoch ms)
    timer_delivered_total                       counter  records appended to their target
    timer_cancelled_total                       counter  records a TIMER_CANCEL suppressed
    timer_delivery_lag_ms{quantile}             gauge    delivery time - due time, p50 and
                                                         p99 of the last 10,000 deliveries

Registered on the broker's metrics registry by the timer service when it starts (it starts
after the metrics endpoint), so the metrics package needs no knowledge of timers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric


def lag_quantiles(lags_ms: Iterable[int]) -> tuple[float, float] | None:
    """p50 and p99 of delivery lags (ms), None without samples."""
    ordered = sorted(lags_ms)
    if not ordered:
        return None
    last = len(ordered) - 1
    return float(ordered[last * 50 // 100]), float(ordered[last * 99 // 100])


@dataclass(frozen=True, slots=True)
class TopicTimers:
    """Pending delayed records of one target partition (metrics, `tidelog timers`)."""

    topic: str
    partition: int
    pending: int
    next_due_ms: int | None


class TimerStats(Protocol):
    """What the collector reads of the timer service."""

    @property
    def delivered_total(self) -> int: ...

    @property
    def cancelled_total(self) -> int: ...

    def listing(self) -> list[TopicTimers]: ...

    def lag_quantiles(self) -> tuple[float, float] | None: ...


class TimerCollector:
    def __init__(self, timers: TimerStats) -> None:
        self._timers = timers

    def describe(self) -> Iterable[Metric]:
        return ()

    def collect(self) -> Iterator[Metric]:
        timers = self._timers
        labels = ("topic", "partition")
        pending = GaugeMetricFamily(
            "tidelog_timer_pending", "Delayed records waiting to be delivered.", labels=labels
        )
        next_due = GaugeMetricFamily(
            "tidelog_timer_next_due_timestamp_ms", "Earliest due time (epoch ms).",
            labels=labels,
        )
        for entry in timers.listing():
            key = (entry.topic, str(entry.partition))
            pending.add_metric(key, entry.pending)
            if entry.next_due_ms is not None:
                next_due.add_metric(key, entry.next_due_ms)
        yield pending
        yield next_due
        yield CounterMetricFamily(
            "tidelog_timer_delivered", "Delayed records appended to their target.",
            value=timers.delivered_total,
        )
        yield CounterMetricFamily(
            "tidelog_timer_cancelled", "Delayed records suppressed by TIMER_CANCEL.",
            value=timers.cancelled_total,
        )
        lag = GaugeMetricFamily(
            "tidelog_timer_delivery_lag_ms",
            "Delivery time minus due time over the last 10,000 deliveries.",
            labels=("quantile",),
        )
        quantiles = timers.lag_quantiles()
        if quantiles is not None:
            lag.add_metric(("0.5",), quantiles[0])
            lag.add_metric(("0.99",), quantiles[1])
        yield lag
