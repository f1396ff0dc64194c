"""A replica fetcher that was replaced (a leadership change) or stopped never touches the log
again, even if its task's cancellation was lost: seen in a run of test_isolation, where two
fetchers of the old leader outlived the election and truncated both the new leader's and its
follower's logs from 6 to 3 when the old leader came back."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from tidelog.broker.replication.replica_fetcher import FetcherStopped, ReplicaFetcher


def _fetcher() -> tuple[ReplicaFetcher, Any]:
    truncated: list[int] = []
    log = SimpleNamespace(log_end_offset=6, log_start_offset=0,
                          truncate_to=truncated.append)
    epochs = SimpleNamespace(latest_epoch=0, truncate_from_end=lambda offset: None)
    state: Any = SimpleNamespace(tp=SimpleNamespace(topic="t", partition=0), log=log,
                                 epochs=epochs, high_watermark=6, fetcher=None,
                                 truncated=truncated)
    replication: Any = SimpleNamespace(node_id=2, leader_endpoint=lambda broker_id: None)
    fetcher = ReplicaFetcher(replication, state, 1, 0)
    state.fetcher = fetcher
    return fetcher, state


def test_a_replaced_fetcher_does_not_truncate() -> None:
    fetcher, state = _fetcher()
    fetcher._truncate_to(3)  # still the partition's fetcher: allowed
    assert state.truncated == [3]
    state.fetcher = object()  # the view made this broker leader (or another's follower)
    with pytest.raises(FetcherStopped):
        fetcher._truncate_to(0)
    assert state.truncated == [3]


def test_a_stopped_fetcher_exits_its_loop_without_cancellation() -> None:
    async def scenario() -> bool:
        fetcher, _ = _fetcher()
        fetcher._stopped = True  # as if stop() ran but its cancel was lost
        await asyncio.wait_for(fetcher._run(), 5)
        return True

    assert asyncio.run(scenario())
