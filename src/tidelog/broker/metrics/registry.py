"""Broker metrics: cheap counters on the hot path, Prometheus exposition at scrape time.

The produce path targets 600k+ msg/s, so recording must cost a handful of dict increments per
request (never per message) and take no lock. prometheus-client's own Counter/Histogram take a
mutex on every `inc()`; instead the broker updates plain ints and dicts here (single writer: the
event loop; the fsync histogram's single writer is the group-commit thread), and a custom
collector turns them into metric families when Prometheus scrapes. Anything that can be read
from the broker's state (offsets, disk usage, segments, groups, lag) is read at scrape time and
costs nothing between scrapes.

Runs on the event loop; `collect()` is called by the /metrics handler on the same loop, so it
reads the log manager and group state without racing the request handlers.

Exposed families (all prefixed `tidelog_`):

    messages_in_total{topic,partition}          counter  records appended (produce)
    bytes_in_total{topic,partition}             counter  record-batch bytes appended
    messages_out_total{topic,partition}         counter  records served (fetch; whole batches)
    bytes_out_total{topic,partition}            counter  record-batch bytes served
    requests_total{api}                         counter  requests handled, per Kafka API
    request_errors_total{api,error}             counter  top-level errors, and per-partition
                                                         errors of Produce and Fetch
    request_latency_seconds{api}                histogram  receipt -> response queued
    fsync_latency_seconds                       histogram  sync-mode append -> its fsync done
                                                         (includes waiting for the shared
                                                         group-commit fsync)
    connections_open                            gauge    (scrape time)
    fetches_parked                              gauge    fetches long-polling for data (Kafka's
                                                         fetch purgatory size)
    fetch_requests_total{kind}                  counter  Fetch requests by session kind (KIP-227):
                                                         full, incremental, sessionless, error
    fetch_sessions                              gauge    sessions in the fetch session cache
    fetch_session_partitions                    gauge    partitions cached by those sessions
    fetch_session_evictions_total               counter  sessions evicted to make room
    log_start_offset{topic,partition}           gauge    (scrape time)
    log_end_offset{topic,partition}             gauge    (scrape time)
    log_size_bytes{topic,partition}             gauge    bytes on disk (scrape time)
    log_segments{topic,partition}               gauge    segment count (scrape time)
    consumer_groups{state}                      gauge    groups per state (scrape time)
    consumer_group_committed_offset{group,topic,partition}  gauge (scrape time)
    consumer_group_lag{group,topic,partition}   gauge    log_end_offset - committed (scrape time)
    client_telemetry_pushes_total{error}        counter  PushTelemetry requests by outcome
    client_<metric>{client_instance_id,client_id,client_software_name,...}
                                                pushed client metrics (KIP-714,
                                                broker/telemetry/export.py)
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from tidelog.broker.fetch_session import CacheStats
from tidelog.broker.quotas.manager import QuotaStats
from tidelog.broker.services import FetchedPartition
from tidelog.protocol.versions import api_name
from tidelog.protocol.wire import FetchTopicData

log = logging.getLogger(__name__)

# Bucket upper bounds in seconds. Request latency: 50 us .. 10 s (long-poll fetches wait up to
# fetch.max.wait.ms, so the top buckets matter). fsync: 100 us .. 5 s.
REQUEST_BUCKETS_S: tuple[float, ...] = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
FSYNC_BUCKETS_S: tuple[float, ...] = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    5.0,
)


class Histogram:
    """Fixed-bucket histogram: `observe` is one bisect and two additions, no lock.

    `counts[i]` holds observations with bounds[i-1] < value <= bounds[i]; the last slot is +Inf.
    Cumulative bucket counts are computed only when scraped.
    """

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip(self.bounds, self.counts, strict=False):
            running += count
            out.append((_format_bound(bound), float(running)))
        out.append(("+Inf", float(running + self.counts[-1])))
        return out


def _format_bound(bound: float) -> str:
    return repr(bound)


@dataclass(frozen=True, slots=True)
class PartitionStats:
    """One partition's log state, read at scrape time."""

    topic: str
    partition: int
    log_start_offset: int
    log_end_offset: int
    size_bytes: int
    segments: int


@dataclass(frozen=True, slots=True)
class GroupOffset:
    """One committed offset of one group, read at scrape time."""

    group: str
    topic: str
    partition: int
    committed_offset: int


@dataclass(frozen=True, slots=True)
class GroupStats:
    """Groups per state and their committed offsets (lag is derived against log end offsets)."""

    states: Mapping[str, int]
    offsets: tuple[GroupOffset, ...]


PartitionSource = Callable[[], Iterable[PartitionStats]]
GroupSource = Callable[[], GroupStats | None]
FetchSessionSource = Callable[[], CacheStats]

class BrokerMetrics:
    """All broker counters. Hot-path methods are O(1) dict updates; call once per request or
    per partition of a request, never per record."""

    def __init__(self) -> None:
        self.messages_in: dict[tuple[str, int], int] = {}
        self.bytes_in: dict[tuple[str, int], int] = {}
        self.messages_out: dict[tuple[str, int], int] = {}
        self.bytes_out: dict[tuple[str, int], int] = {}
        self.requests: dict[int, int] = {}
        self.errors: dict[tuple[int, str], int] = {}
        self.latency: dict[int, Histogram] = {}
        self.fsync_latency = Histogram(FSYNC_BUCKETS_S)
        self.fetches_parked = 0
        self.fetch_kinds: dict[str, int] = {}
        self._fetch_session_source: FetchSessionSource | None = None
        self._connection_source: Callable[[], int] | None = None
        self._partition_source: PartitionSource | None = None
        self._group_source: GroupSource | None = None
        self._quota_source: Callable[[], Iterable[QuotaStats]] | None = None
        self._client_metrics_source: Callable[[], Iterable[Metric]] | None = None
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(self))

    # --- wiring (start-up) -------------------------------------------------------------
    def set_partition_source(self, source: PartitionSource) -> None:
        self._partition_source = source

    def set_group_source(self, source: GroupSource) -> None:
        self._group_source = source

    def set_connection_source(self, source: Callable[[], int]) -> None:
        self._connection_source = source

    def set_quota_source(self, source: Callable[[], Iterable[QuotaStats]]) -> None:
        self._quota_source = source

    def set_client_metrics_source(self, source: Callable[[], Iterable[Metric]]) -> None:
        """KIP-714: the families of the metrics clients pushed (broker/telemetry/export.py)."""
        self._client_metrics_source = source

    def client_metrics(self) -> Iterable[Metric]:
        source = self._client_metrics_source
        return () if source is None else source()

    def quota_stats(self) -> Iterable[QuotaStats]:
        return () if self._quota_source is None else self._quota_source()

    def set_fetch_session_source(self, source: FetchSessionSource) -> None:
        self._fetch_session_source = source

    # --- hot path ----------------------------------------------------------------------
    def record_request(self, api_key: int, latency_s: float, error: str | None = None) -> None:
        """One request handled (error = Kafka error name when the response carries one)."""
        requests = self.requests
        requests[api_key] = requests.get(api_key, 0) + 1
        histogram = self.latency.get(api_key)
        if histogram is None:
            histogram = self.latency[api_key] = Histogram(REQUEST_BUCKETS_S)
        histogram.observe(latency_s)
        if error is not None:
            key = (api_key, error)
            self.errors[key] = self.errors.get(key, 0) + 1

    def record_error(self, api_key: int, error: str) -> None:
        key = (api_key, error)
        self.errors[key] = self.errors.get(key, 0) + 1

    def record_produce(self, topic: str, partition: int, records: int, size: int) -> None:
        key = (topic, partition)
        self.messages_in[key] = self.messages_in.get(key, 0) + records
        self.bytes_in[key] = self.bytes_in.get(key, 0) + size

    def record_fetch(self, topic: str, partition: int, records: int, size: int) -> None:
        key = (topic, partition)
        self.messages_out[key] = self.messages_out.get(key, 0) + records
        self.bytes_out[key] = self.bytes_out.get(key, 0) + size

    def record_fetch_response(
        self, wanted: Iterable[FetchedPartition], topics: Iterable[FetchTopicData]
    ) -> None:
        """After a Fetch is answered: bytes and records served per partition.

        The broker never decodes fetched batches (D2), so records are counted as offsets served:
        from fetch_offset to the base offset of the batch that follows the last slice (one
        8-byte pread per partition), capped at the high watermark.
        """
        fetch_offsets = {(w.name, w.partition): w.fetch_offset for w in wanted}
        for topic in topics:
            for partition in topic.partitions:
                slices = partition.records
                if not slices:
                    continue
                index = partition.partition_index
                last = slices[-1]
                served = served_offsets(
                    last.file.fileno(),
                    last.position + last.length,
                    fetch_offsets.get((topic.name, index), partition.high_watermark),
                    partition.high_watermark,
                )
                self.record_fetch(topic.name, index, served, sum(s.length for s in slices))

    def record_fetch_parked(self, delta: int) -> None:
        """+1 when a Fetch parks waiting for data, -1 when it wakes (not per request)."""
        self.fetches_parked += delta

    def record_fetch_session(self, kind: str) -> None:
        """One Fetch request: full, incremental, sessionless or error (KIP-227 sessions)."""
        self.fetch_kinds[kind] = self.fetch_kinds.get(kind, 0) + 1

    def record_fsync(self, latency_s: float) -> None:
        """Called on the group-commit thread; it is the histogram's only writer."""
        self.fsync_latency.observe(latency_s)

    # --- scrape time -------------------------------------------------------------------
    def partitions(self) -> list[PartitionStats]:
        if self._partition_source is None:
            return []
        return list(self._partition_source())

    def fetch_sessions(self) -> CacheStats:
        if self._fetch_session_source is None:
            return CacheStats(0, 0, 0)
        return self._fetch_session_source()

    def connections_open(self) -> int:
        return 0 if self._connection_source is None else self._connection_source()

    def groups(self) -> GroupStats | None:
        if self._group_source is None:
            return None
        return self._group_source()


def _labelled_counter(
    name: str, doc: str, values: Mapping[tuple[str, int], int]
) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=("topic", "partition"))
    for (topic, partition), value in sorted(values.items()):
        family.add_metric((topic, str(partition)), value)
    return family


class _Collector:
    """Turns BrokerMetrics' plain counters and the broker's state into metric families."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> Iterable[Metric]:
        return ()

    def collect(self) -> Iterator[Metric]:
        m = self._metrics
        yield _labelled_counter("tidelog_messages_in", "Records appended.", m.messages_in)
        yield _labelled_counter("tidelog_bytes_in", "Record-batch bytes appended.", m.bytes_in)
        yield _labelled_counter("tidelog_messages_out", "Records served by fetch.", m.messages_out)
        yield _labelled_counter("tidelog_bytes_out", "Record-batch bytes served.", m.bytes_out)

        requests = CounterMetricFamily("tidelog_requests", "Requests handled.", labels=("api",))
        for api_key, count in sorted(m.requests.items()):
            requests.add_metric((api_name(api_key),), count)
        yield requests
        errors = CounterMetricFamily(
            "tidelog_request_errors",
            "Errors answered (top-level; per partition for Produce, Fetch).",
            labels=("api", "error"),
        )
        for (api_key, error), count in sorted(m.errors.items()):
            errors.add_metric((api_name(api_key), error), count)
        yield errors
        latency = HistogramMetricFamily(
            "tidelog_request_latency_seconds",
            "Time from request receipt to response queued.",
            labels=("api",),
        )
        for api_key, histogram in sorted(m.latency.items()):
            latency.add_metric((api_name(api_key),), histogram.cumulative(), histogram.sum)
        yield latency
        fsync = HistogramMetricFamily(
            "tidelog_fsync_latency_seconds",
            "Sync-durability append to fsync done (group commit, per waiting produce).",
        )
        fsync.add_metric((), m.fsync_latency.cumulative(), m.fsync_latency.sum)
        yield fsync

        yield GaugeMetricFamily(
            "tidelog_connections_open", "Open client connections.", value=m.connections_open()
        )
        yield GaugeMetricFamily(
            "tidelog_fetches_parked",
            "Fetch requests parked until data arrives or their max wait passes.",
            value=m.fetches_parked,
        )
        yield from self._collect_fetch_sessions()
        yield from self._collect_logs_and_groups()
        yield from _collect_quotas(m.quota_stats())
        yield from m.client_metrics()

    def _collect_fetch_sessions(self) -> Iterator[Metric]:
        kinds = CounterMetricFamily(
            "tidelog_fetch_requests",
            "Fetch requests by fetch session kind (KIP-227).",
            labels=("kind",),
        )
        for kind, count in sorted(self._metrics.fetch_kinds.items()):
            kinds.add_metric((kind,), count)
        yield kinds
        stats = self._metrics.fetch_sessions()
        yield GaugeMetricFamily(
            "tidelog_fetch_sessions", "Sessions in the fetch session cache.", value=stats.sessions
        )
        yield GaugeMetricFamily(
            "tidelog_fetch_session_partitions",
            "Partitions cached by fetch sessions.",
            value=stats.partitions,
        )
        yield CounterMetricFamily(
            "tidelog_fetch_session_evictions",
            "Fetch sessions evicted to make room for another.",
            value=stats.evictions,
        )

    def _collect_logs_and_groups(self) -> Iterator[Metric]:
        labels = ("topic", "partition")
        start = GaugeMetricFamily("tidelog_log_start_offset", "First offset kept.", labels=labels)
        end = GaugeMetricFamily("tidelog_log_end_offset", "Next offset to assign.", labels=labels)
        size = GaugeMetricFamily("tidelog_log_size_bytes", "Bytes on disk.", labels=labels)
        segments = GaugeMetricFamily("tidelog_log_segments", "Segment count.", labels=labels)
        log_end: dict[tuple[str, int], int] = {}
        for stats in sorted(self._metrics.partitions(), key=lambda s: (s.topic, s.partition)):
            key = (stats.topic, str(stats.partition))
            start.add_metric(key, stats.log_start_offset)
            end.add_metric(key, stats.log_end_offset)
            size.add_metric(key, stats.size_bytes)
            segments.add_metric(key, stats.segments)
            log_end[(stats.topic, stats.partition)] = stats.log_end_offset
        yield from (start, end, size, segments)

        groups = self._metrics.groups()
        if groups is None:
            return
        by_state = GaugeMetricFamily(
            "tidelog_consumer_groups", "Groups per state.", labels=("state",)
        )
        for state, count in sorted(groups.states.items()):
            by_state.add_metric((state,), count)
        yield by_state
        group_labels = ("group", "topic", "partition")
        committed = GaugeMetricFamily(
            "tidelog_consumer_group_committed_offset", "Committed offset.", labels=group_labels
        )
        lag = GaugeMetricFamily(
            "tidelog_consumer_group_lag",
            "log_end_offset - committed offset.",
            labels=group_labels,
        )
        for entry in sorted(groups.offsets, key=lambda o: (o.group, o.topic, o.partition)):
            group_key = (entry.group, entry.topic, str(entry.partition))
            committed.add_metric(group_key, entry.committed_offset)
            end_offset = log_end.get((entry.topic, entry.partition))
            if end_offset is not None:
                lag.add_metric(group_key, max(0, end_offset - entry.committed_offset))
        yield committed
        yield lag


def _collect_quotas(stats: Iterable[QuotaStats]) -> Iterator[Metric]:
    """Kafka's per-entity quota metrics (`byte-rate`/`request-time` and `throttle-time` in
    the Produce, Fetch and Request groups), one series per sensor."""
    labels = ("type", "user", "client_id")
    rate = GaugeMetricFamily(
        "tidelog_quota_rate",
        "Client quota usage over the quota window: bytes/s (Produce, Fetch) or percent of "
        "one handler second per second (Request).",
        labels=labels,
    )
    throttle = CounterMetricFamily(
        "tidelog_quota_throttle_time_ms", "Throttle time given to the client, summed.",
        labels=labels,
    )
    throttled = CounterMetricFamily(
        "tidelog_quota_throttled_responses", "Responses that carried a throttle time.",
        labels=labels,
    )
    for item in sorted(stats, key=lambda s: (s.quota_type, s.user, s.client_id)):
        key = (item.quota_type, item.user, item.client_id)
        rate.add_metric(key, item.rate)
        throttle.add_metric(key, item.throttle_time_ms_total)
        throttled.add_metric(key, item.throttled)
    yield from (rate, throttle, throttled)


def render(metrics: BrokerMetrics) -> bytes:
    """Prometheus text exposition of everything (runs on the event loop at scrape time)."""
    from prometheus_client.exposition import generate_latest

    return generate_latest(metrics.registry)


def served_offsets(fd: int, end_position: int, fetch_offset: int, high_watermark: int) -> int:
    """Offsets from fetch_offset up to the batch starting at end_position (its baseOffset, the
    first 8 bytes), or up to the high watermark when the slice ends the file."""
    raw = os.pread(fd, 8, end_position)
    next_offset = high_watermark
    if len(raw) == 8:
        next_offset = min(high_watermark, int.from_bytes(raw, "big", signed=True))
    return max(0, next_offset - fetch_offset)


def group_stats(groups: Any) -> GroupStats | None:
    """Groups per state and committed offsets from the broker's group service (scrape time).

    None when the broker runs without a group service. The service exposes
    `metrics_snapshot() -> GroupStats`.
    """
    if groups is None:
        return None
    snapshot = getattr(groups, "metrics_snapshot", None)
    if snapshot is None:
        return None
    result: GroupStats = snapshot()
    return result


def log_manager_source(logs: Any) -> PartitionSource:
    """Adapter: a storage LogManager -> PartitionStats (read at scrape time on the loop)."""

    def source() -> Iterator[PartitionStats]:
        for partition_log in logs.logs():
            tp = partition_log.topic_partition
            yield PartitionStats(
                topic=tp.topic,
                partition=tp.partition,
                log_start_offset=partition_log.log_start_offset,
                log_end_offset=partition_log.log_end_offset,
                size_bytes=partition_log.size_bytes(),
                segments=partition_log.segment_count(),
            )

    return source
