"""Kafka's windowed rate and its throttle time (metrics `Rate` over `WindowedSum`, QuotaUtils).

Pure: callers pass `now_ms`. A rate keeps `quota.window.num` samples (default 11) of
`quota.window.size.seconds` (default 1) each, plus Kafka's one spare slot for the sample that
overlaps the window's start. Recording adds to the current sample, opening the next one when
the current is a window old. The rate is the sum of the live samples over the elapsed time
since the oldest sample started, counted as at least `window.num - 1` whole windows (so a
client's first burst is spread over 10 s rather than judged on a few milliseconds).

Throttle time (QuotaUtils.throttleTime): with observed rate O above the bound T over window W,
the delay X that brings O back to T if nothing more is recorded solves O * W / (W + X) = T:
X = (O - T) / T * W. The request quota caps it at one window (ClientRequestQuotaManager).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_WINDOW_NUM = 11  # quota.window.num
DEFAULT_WINDOW_SIZE_MS = 1000  # quota.window.size.seconds


@dataclass(frozen=True, slots=True)
class QuotaWindow:
    samples: int = DEFAULT_WINDOW_NUM
    window_ms: int = DEFAULT_WINDOW_SIZE_MS

    def __post_init__(self) -> None:
        if self.samples < 1 or self.window_ms < 1:
            raise ValueError("quota.window.num and quota.window.size.seconds must be >= 1")

    def max_value_in_window(self, bound: float) -> float:
        """The most one record may carry without being throttled on its own
        (ClientQuotaManager.getMaxValueInQuotaWindow): what Fetch caps its bytes to."""
        return bound * (self.samples - 1) * self.window_ms / 1000


class _Sample:
    __slots__ = ("last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.last_event_ms = now_ms
        self.value = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.last_event_ms = now_ms
        self.value = 0.0


class WindowedRate:
    """Per second. Not thread-safe (the broker uses it on its event loop)."""

    __slots__ = ("_current", "_samples", "window")

    def __init__(self, window: QuotaWindow) -> None:
        self.window = window
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms

    def rate(self, now_ms: int) -> float:
        """Units per second."""
        self._purge(now_ms)
        total = sum(sample.value for sample in self._samples)
        return total / (self.window_size_ms(now_ms) / 1000)

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        oldest = min((sample.start_ms for sample in self._samples), default=now_ms)
        elapsed_ms = now_ms - oldest
        full_windows = elapsed_ms // self.window.window_ms
        minimum = self.window.samples - 1
        if full_windows < minimum:
            elapsed_ms += (minimum - full_windows) * self.window.window_ms
        return max(elapsed_ms, 1)

    def throttle_time_ms(self, bound: float, now_ms: int, max_ms: int | None = None) -> int:
        """0 while the rate is within `bound`, else the delay that brings it back."""
        observed = self.rate(now_ms)
        if observed <= bound:
            return 0
        delay = (observed - bound) / bound * self.window_size_ms(now_ms)
        throttle = round(delay)
        return throttle if max_ms is None else min(throttle, max_ms)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        slots = self.window.samples + 1  # Kafka's spare slot for the overlapping sample
        self._current = (self._current + 1) % slots
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _purge(self, now_ms: int) -> None:
        expire_ms = self.window.samples * self.window.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_ms:
                sample.reset(now_ms)
