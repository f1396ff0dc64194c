"""Share-group metrics at scrape time: one Prometheus collector over the share partitions.

Registered on the broker's metrics registry when the share service starts (when metrics are
on). Nothing is counted on the hot path beyond the pure SharePartition's own counters, which
are read at scrape time. Families (labels group, topic, partition; prefix `tidelog_share_`):

    acquired_total, acknowledged_total, released_total, rejected_total, archived_total,
    lock_expiries_total, redeliveries_total, dead_letter_copies_total,
    filtered_total (acknowledged by the broker: the group filter did not match)   counters
    in_flight_records      gauge  offsets between the SPSO and the SPEO
    acquired_records       gauge  records currently locked by a member
    start_offset           gauge  the share-partition start offset (SPSO)

Runs on the event loop (the /metrics handler), like the registry's own collector.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from tidelog.coordinator.share_partition import SharePartition

COUNTERS = ("acquired", "acknowledged", "released", "rejected", "archived", "lock_expiries",
            "redeliveries", "dead_letter_copies", "filtered")

Partitions = Callable[[], Mapping[tuple[str, uuid.UUID, int], SharePartition]]
TopicName = Callable[[uuid.UUID], str | None]


class ShareCollector:
    def __init__(self, partitions: Partitions, topic_name: TopicName) -> None:
        self._partitions = partitions
        self._topic_name = topic_name

    def describe(self) -> Iterable[Metric]:
        return ()

    def collect(self) -> Iterator[Metric]:
        labels = ("group", "topic", "partition")
        counters = {
            name: CounterMetricFamily(f"tidelog_share_{name}", f"Share-partition {name}.",
                                      labels=labels)
            for name in COUNTERS
        }
        in_flight = GaugeMetricFamily("tidelog_share_in_flight_records",
                                      "Offsets between the SPSO and the SPEO.", labels=labels)
        acquired = GaugeMetricFamily("tidelog_share_acquired_records",
                                     "Records locked by a member now.", labels=labels)
        start = GaugeMetricFamily("tidelog_share_start_offset",
                                  "Share-partition start offset.", labels=labels)
        for (group, topic_id, index), partition in sorted(
            self._partitions().items(), key=lambda item: (item[0][0], str(item[0][1]), item[0][2])
        ):
            name = self._topic_name(topic_id)
            if name is None:
                continue
            key = (group, name, str(index))
            for counter, family in counters.items():
                family.add_metric(key, getattr(partition.counters, counter))
            in_flight.add_metric(key, partition.end_offset - partition.start_offset)
            acquired.add_metric(key, partition.acquired_count())
            start.add_metric(key, partition.start_offset)
        yield from counters.values()
        yield in_flight
        yield acquired
        yield start
