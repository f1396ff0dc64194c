"""Replication.wait_for_view: woken by each new view (no polling), bounded by its timeout."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tidelog.broker.replication.cluster_agent import ClusterSettings, ClusterView
from tidelog.broker.replication.replica_manager import Replication


def _replication(tmp_path: Path) -> Replication:
    broker: Any = SimpleNamespace(config=SimpleNamespace(node_id=1, data_dir=tmp_path))
    replication = Replication(broker, ClusterSettings("127.0.0.1:1"))
    replication.view_listeners.clear()  # no local topics in these views
    return replication


def _view(brokers: dict[int, tuple[str, int]]) -> ClusterView:
    return ClusterView(controller_id=1, brokers=brokers, topics={}, configs={})


def test_wait_for_view_wakes_on_the_view_that_satisfies_it(tmp_path: Path) -> None:
    async def scenario() -> tuple[bool, float]:
        replication = _replication(tmp_path)
        replication.on_view(_view({1: ("127.0.0.1", 1)}))
        loop = asyncio.get_running_loop()
        started = loop.time()
        loop.call_later(0.05, replication.on_view, _view({1: ("127.0.0.1", 1)}))
        loop.call_later(0.1, replication.on_view, _view({1: ("127.0.0.1", 1),
                                                          2: ("127.0.0.1", 2)}))
        ok = await replication.wait_for_view(lambda view: 2 in view.brokers, 10_000)
        return ok, loop.time() - started

    ok, waited_s = asyncio.run(scenario())
    assert ok and waited_s < 5


def test_wait_for_view_times_out_false(tmp_path: Path) -> None:
    async def scenario() -> bool:
        replication = _replication(tmp_path)
        replication.on_view(_view({}))
        return await replication.wait_for_view(lambda view: 2 in view.brokers, 50)

    assert asyncio.run(scenario()) is False


def test_a_cancelled_wait_for_view_stays_cancelled_when_the_view_arrives(tmp_path: Path) -> None:
    """The cancellation and the view that causes it arrive together (a new leader stops its
    fetcher, which waited for its old leader's endpoint): the waiter must end, not go on."""
    async def scenario() -> bool:
        replication = _replication(tmp_path)
        replication.on_view(_view({}))
        waiter = asyncio.ensure_future(
            replication.wait_for_view(lambda view: 2 in view.brokers, 60_000))
        await asyncio.sleep(0.01)  # parked on the view event
        replication.on_view(_view({1: ("127.0.0.1", 1)}))  # wakes it (predicate still false)
        waiter.cancel()  # in the same loop turn, as Replication._spawn(fetcher.stop()) does
        try:
            await asyncio.wait_for(asyncio.shield(waiter), 2)
        except asyncio.CancelledError:
            return True
        except TimeoutError:
            return False  # the cancellation was swallowed: still waiting
        return False

    assert asyncio.run(scenario())
