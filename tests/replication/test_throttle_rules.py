"""Replication throttle rules (KIP-73): which replicas, and the pacing (pure)."""

from __future__ import annotations

import pytest

from tidelog.broker.replication.throttle import (
    FOLLOWER_RATE,
    ReplicationQuota,
    check_replicas_value,
    parse_rate,
    quota_for,
    throttles,
)


def test_throttled_replicas_name_partition_broker_pairs_or_all() -> None:
    assert throttles("0:4,1:4", 0, 4) and throttles("0:4, 1:4", 1, 4)
    assert not throttles("0:4,1:4", 0, 3) and not throttles("10:4", 1, 4)
    assert throttles("*", 7, 1)
    assert not throttles("", 0, 1) and not throttles(None, 0, 1)
    check_replicas_value("0:1,1:2")
    check_replicas_value("*")
    with pytest.raises(ValueError):
        check_replicas_value("0-1")


def test_rates_are_longs_at_least_zero() -> None:
    assert parse_rate("1000") == 1000 and parse_rate(None) is None
    for bad in ("-1", "1.5", "x", str(2**63)):
        with pytest.raises(ValueError):
            parse_rate(bad)


def test_the_quota_paces_transfers_at_the_rate() -> None:
    quota = ReplicationQuota(1_000_000)
    now = 1_000
    assert quota.delay_ms(now) == 0
    moved = 0
    for _ in range(50):  # a sender that always waits out the delay
        now += int(quota.delay_ms(now))
        quota.record(100_000, now)
        moved += 100_000
    assert quota.fetch_size(8 << 20) == 100_000
    assert quota.fetch_size(8 << 20, 500) == 500_000
    elapsed_s = (quota.next_free_ms - 1_000) / 1000
    assert moved / elapsed_s == pytest.approx(1_000_000)
    # A quiet period earns no burst beyond one transfer.
    later = int(quota.next_free_ms) + 60_000
    quota.record(100_000, later)
    assert quota.delay_ms(later) == pytest.approx(100)


def test_the_quota_follows_the_broker_config() -> None:
    assert quota_for(None, {}, FOLLOWER_RATE) is None
    first = quota_for(None, {FOLLOWER_RATE: "500"}, FOLLOWER_RATE)
    assert first is not None and first.rate_bytes_per_s == 500
    assert quota_for(first, {FOLLOWER_RATE: "500"}, FOLLOWER_RATE) is first
    changed = quota_for(first, {FOLLOWER_RATE: "900"}, FOLLOWER_RATE)
    assert changed is not None and changed is not first and changed.rate_bytes_per_s == 900
    assert quota_for(first, {FOLLOWER_RATE: "bad"}, FOLLOWER_RATE) is None
