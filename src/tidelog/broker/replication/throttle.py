"""Replication throttles (KIP-73): which replicas are throttled, and the byte-rate pacing.

Kafka's names: the broker configs `leader.replication.throttled.rate` and
`follower.replication.throttled.rate` (bytes/s, dynamic: `/config/brokers/<id>` or
`<default>`) cap the replication traffic of the replicas the topic configs
`leader.replication.throttled.replicas` / `follower.replication.throttled.replicas` list as
`partition:broker` pairs (or `*` for every replica). A broker throttles a partition when its
own id is paired with it, and only for replicas outside the ISR (Kafka's
`!isReplicaInSync`): a move's new replica is paced, the ISR's own traffic never is.

Pure: no clock (callers pass `now_ms`), no I/O; `tests/replication/test_throttle_rules.py`.
"""

from __future__ import annotations

from collections.abc import Mapping

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
# Kafka's tool also clears the log-dir move rate with the other two: stored, without effect
# (one log directory per broker: nothing to move between directories).
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
RATE_CONFIGS = frozenset({LEADER_RATE, FOLLOWER_RATE, ALTER_LOG_DIRS_RATE})
MIN_FETCH_BYTES = 16 * 1024
FOLLOWER_FETCH_INTERVAL_MS = 100  # a throttled follower asks for 100 ms worth per fetch


def parse_rate(value: str | None) -> int | None:
    """A rate config's value in bytes/s (None: unset); ValueError unless a long >= 0."""
    if value is None:
        return None
    rate = int(value.strip())
    if rate < 0 or rate >= 2**63:
        raise ValueError(f"{value!r} is not a rate in bytes/s")
    return rate


def throttles(replicas_value: str | None, partition: int, broker_id: int) -> bool:
    """Whether a `*.replication.throttled.replicas` value names (partition, broker_id)."""
    if not replicas_value:
        return False
    for item in replicas_value.split(","):
        item = item.strip()
        if item == "*":
            return True
        p, _, b = item.partition(":")
        if p.strip() == str(partition) and b.strip() == str(broker_id):
            return True
    return False


def check_replicas_value(value: str) -> None:
    """Kafka's ThrottledReplicaListValidator: `*`, empty, or `partition:broker` pairs."""
    items = [item.strip() for item in value.split(",") if item.strip()]
    if items == ["*"]:
        return
    for item in items:
        p, sep, b = item.partition(":")
        if not sep or not p.strip().isdigit() or not b.strip().isdigit():
            raise ValueError(f"{value!r}: expected partition:broker pairs or *")


class ReplicationQuota:
    """One broker's byte budget for throttled replication traffic (one per direction).

    Paced, not windowed: each recorded transfer pushes `next_free_ms` on by its duration at
    the rate, so a sender that waits `delay_ms` before each transfer moves at the rate
    exactly, and a quiet period earns no burst larger than one fetch.
    """

    def __init__(self, rate_bytes_per_s: int) -> None:
        self.rate_bytes_per_s = rate_bytes_per_s
        self.next_free_ms = 0.0
        self.recorded_bytes = 0

    def delay_ms(self, now_ms: int) -> float:
        """How long to wait before the next transfer (0: now)."""
        return max(0.0, self.next_free_ms - now_ms)

    def record(self, size_bytes: int, now_ms: int) -> None:
        if self.rate_bytes_per_s <= 0:
            self.next_free_ms = float("inf")  # a rate of 0 stops throttled replication
            return
        start = max(self.next_free_ms, float(now_ms))
        self.next_free_ms = start + size_bytes * 1000 / self.rate_bytes_per_s
        self.recorded_bytes += size_bytes

    def fetch_size(self, default_bytes: int,
                   interval_ms: int = FOLLOWER_FETCH_INTERVAL_MS) -> int:
        """Bytes per fetch: `interval_ms` worth at the rate, small enough to pace smoothly."""
        paced = max(MIN_FETCH_BYTES, self.rate_bytes_per_s * interval_ms // 1000)
        return min(default_bytes, paced)


def quota_for(
    current: ReplicationQuota | None, configs: Mapping[str, str], name: str
) -> ReplicationQuota | None:
    """The quota the broker configs ask for, keeping `current` when its rate is unchanged."""
    try:
        rate = parse_rate(configs.get(name))
    except ValueError:
        rate = None  # validated when written; a hand-written bad value throttles nothing
    if rate is None:
        return None
    if current is not None and current.rate_bytes_per_s == rate:
        return current
    return ReplicationQuota(rate)
