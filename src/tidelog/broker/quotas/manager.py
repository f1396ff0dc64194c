"""The broker's client quota sensors: what each (user, client-id) consumed, and for how long
to throttle it (Kafka's ClientQuotaManager and ClientRequestQuotaManager).

Runs on the event loop; must not block. Three quota types, each with its own key and sensors:
Produce (`producer_byte_rate`, request bytes), Fetch (`consumer_byte_rate`, response bytes)
and Request (`request_percentage`, the handler's time on the loop as a percentage of one
second per second). A sensor is shared by every connection that resolves to the same level
(Kafka's metric tags: `ClientQuotas.quota_for`), so ten producers with one client-id share
one client-id quota. Nothing is recorded for a quota type no entity sets (Kafka's
`quotasEnabled`), which keeps the hot path at one set lookup for unquoted brokers.

Throttling after KIP-219: the handler answers at once with `throttle_time_ms`, then the
connection reads nothing more from that client for that long (`RequestContext.mute`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tidelog.security.quota_entity import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotas,
)
from tidelog.security.quota_rate import QuotaWindow, WindowedRate

SENSOR_EXPIRATION_MS = 3_600_000  # Kafka's InactiveSensorExpirationTimeSeconds
MAX_SENSORS = 100_000  # bounds memory against clients inventing client-ids


class QuotaType(enum.Enum):
    PRODUCE = PRODUCER_BYTE_RATE
    FETCH = CONSUMER_BYTE_RATE
    REQUEST = REQUEST_PERCENTAGE

    @property
    def label(self) -> str:
        return self.name.capitalize()  # Kafka's metric group: Produce, Fetch, Request


@dataclass(frozen=True, slots=True)
class QuotaStats:
    """One sensor, for /metrics."""

    quota_type: str
    user: str
    client_id: str
    rate: float  # bytes/s (Produce, Fetch) or percent (Request)
    throttle_time_ms_total: int
    throttled: int  # responses throttled


class _Sensor:
    __slots__ = ("last_used_ms", "rate", "throttle_time_ms_total", "throttled")

    def __init__(self, window: QuotaWindow, now_ms: int) -> None:
        self.rate = WindowedRate(window)
        self.last_used_ms = now_ms
        self.throttle_time_ms_total = 0
        self.throttled = 0


class QuotaManager:
    """`quotas` is replaced whole when an AlterClientQuotas (or, in a cluster, a ZooKeeper
    notice) changes them; the sensors keep their history across the change, as Kafka's."""

    def __init__(self, quotas: ClientQuotas, window: QuotaWindow, clock_ms: Callable[[], int]
                 ) -> None:
        self.window = window
        self._clock_ms = clock_ms
        self._sensors: dict[tuple[QuotaType, str, str], _Sensor] = {}
        self.quotas = quotas
        self._enabled: frozenset[str] = frozenset()
        self.replace(quotas)

    def replace(self, quotas: ClientQuotas) -> None:
        self.quotas = quotas
        self._enabled = frozenset(key for values in quotas.entries.values() for key in values)

    def enabled(self, quota_type: QuotaType) -> bool:
        return quota_type.value in self._enabled

    def record(self, quota_type: QuotaType, user: str, client_id: str, value: float,
               max_throttle_ms: int | None = None) -> int:
        """Record `value` for this client; the throttle time in ms (0: within its quota)."""
        if quota_type.value not in self._enabled:
            return 0
        (user_tag, client_tag), bound = self.quotas.quota_for(quota_type.value, user, client_id)
        now_ms = self._clock_ms()
        sensor = self._sensor(quota_type, user_tag, client_tag, now_ms)
        sensor.rate.record(value, now_ms)
        if bound is None:
            return 0
        throttle_ms = sensor.rate.throttle_time_ms(bound, now_ms, max_throttle_ms)
        if throttle_ms > 0:
            sensor.throttle_time_ms_total += throttle_ms
            sensor.throttled += 1
        return throttle_ms

    def unrecord(self, quota_type: QuotaType, user: str, client_id: str, value: float) -> None:
        """Take back a recorded value (a throttled Fetch is answered empty, so its bytes were
        never sent: Kafka's unrecordQuotaSensor)."""
        if quota_type.value in self._enabled:
            (user_tag, client_tag), _ = self.quotas.quota_for(quota_type.value, user, client_id)
            now_ms = self._clock_ms()
            self._sensor(quota_type, user_tag, client_tag, now_ms).rate.record(-value, now_ms)

    def max_value_in_window(self, quota_type: QuotaType, user: str, client_id: str
                            ) -> float | None:
        """The most one response may carry (Fetch caps its max_bytes to it); None: no quota."""
        if quota_type.value not in self._enabled:
            return None
        _, bound = self.quotas.quota_for(quota_type.value, user, client_id)
        return None if bound is None else self.window.max_value_in_window(bound)

    def stats(self) -> Iterator[QuotaStats]:
        now_ms = self._clock_ms()
        for (quota_type, user, client_id), sensor in list(self._sensors.items()):
            yield QuotaStats(
                quota_type.label, user, client_id, sensor.rate.rate(now_ms),
                sensor.throttle_time_ms_total, sensor.throttled,
            )

    def expire(self) -> None:
        """Drop sensors unused for an hour (called from the broker's tick)."""
        now_ms = self._clock_ms()
        for key, sensor in list(self._sensors.items()):
            if now_ms - sensor.last_used_ms >= SENSOR_EXPIRATION_MS:
                del self._sensors[key]

    def _sensor(self, quota_type: QuotaType, user: str, client_id: str, now_ms: int
                ) -> _Sensor:
        key = (quota_type, user, client_id)
        sensor = self._sensors.get(key)
        if sensor is None:
            if len(self._sensors) >= MAX_SENSORS:
                self.expire()
                if len(self._sensors) >= MAX_SENSORS:  # still full: forget the least recent
                    oldest = min(self._sensors, key=lambda k: self._sensors[k].last_used_ms)
                    del self._sensors[oldest]
            sensor = self._sensors[key] = _Sensor(self.window, now_ms)
        sensor.last_used_ms = now_ms
        return sensor
