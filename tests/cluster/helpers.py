"""Helpers for cluster tests: simulated brokers (one KazooClient each) and session expiry."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from tidelog.cluster.controller_zk import ClusterMember
from tidelog.cluster.zk_layout import BrokerRegistration

SETTLE_TIMEOUT_S = 15.0


def start_member(
    client: KazooClient, broker_id: int, *, unclean: bool = False, seed: int = 0
) -> ClusterMember:
    member = ClusterMember(
        client,
        BrokerRegistration(broker_id, "127.0.0.1", 9090 + broker_id, timestamp_ms=1_700_000_000),
        unclean_leader_election_enable=unclean,
        rng=random.Random(seed),
    )
    member.start()
    return member


def settle(
    members: Sequence[ClusterMember],
    until: Callable[[], bool],
    timeout_s: float = SETTLE_TIMEOUT_S,
) -> None:
    """Let every member handle its events until `until()` holds (or fail after timeout_s)."""
    deadline = time.monotonic() + timeout_s
    while True:
        for member in members:
            member.process_events()
        if until():
            return
        if time.monotonic() > deadline:
            raise AssertionError("cluster did not reach the expected state in time")
        for member in members:
            if member.wait_for_events(0.05):
                break


def controller_of(members: Sequence[ClusterMember]) -> ClusterMember:
    controllers = [m for m in members if m.is_controller]
    assert len(controllers) == 1, [m.broker_id for m in controllers]
    return controllers[0]


def expire_session(client: KazooClient, hosts: str, timeout_s: float = 10.0) -> None:
    """Expire `client`'s session on the server, as a network partition longer than the session
    timeout would: a second connection takes the session over and closes it, so ZooKeeper
    deletes its ephemerals; `client` then sees LOST and opens a new session."""
    lost = threading.Event()
    reconnected = threading.Event()

    def listener(state: KazooState) -> None:
        if state == KazooState.LOST:
            lost.set()
        elif state == KazooState.CONNECTED and lost.is_set():
            reconnected.set()

    client.add_listener(listener)
    old_session = client.client_id
    try:
        for _ in range(3):
            thief = KazooClient(hosts=hosts, client_id=old_session, timeout=6.0)
            thief.start(timeout=10)
            thief.stop()
            thief.close()
            if lost.wait(timeout_s / 3):
                break
        assert lost.is_set(), "session did not expire"
        assert reconnected.wait(timeout_s), "client did not reconnect with a new session"
    finally:
        client.remove_listener(listener)
    assert client.client_id[0] != old_session[0]
