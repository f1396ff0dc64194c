"""A restarted broker's registration when its previous session's znode expires between our
create (NodeExists) and our read (NoNode): seen in CI as a broker that failed to start."""

from __future__ import annotations

from typing import Any

from tidelog.cluster import zk_layout as layout
from tidelog.cluster.zk_layout import BrokerRegistration
from tidelog.cluster.zk_store import ZkStore

from .conftest import ZkFactory


def test_registration_vanishing_between_create_and_read_is_retried(
    zk_factory: ZkFactory,
) -> None:
    old_session, new_session = zk_factory(), zk_factory()
    registration = BrokerRegistration(1, "127.0.0.1", 9091, timestamp_ms=1_700_000_000)
    ZkStore(old_session).ensure_paths()
    ZkStore(old_session).register_broker(registration)
    store = ZkStore(new_session)
    real_get = new_session.get

    def get_after_expiry(path: str, *args: Any, **kwargs: Any) -> Any:
        if path == layout.broker_path(1):
            new_session.get = real_get  # type: ignore[method-assign]
            old_session.stop()  # its ephemeral goes, as when the session expires
            old_session.close()
        return real_get(path, *args, **kwargs)

    new_session.get = get_after_expiry  # type: ignore[method-assign]
    epoch = store.register_broker(registration)
    _, stat = new_session.get(layout.broker_path(1))
    assert stat.ephemeralOwner == new_session.client_id[0] and stat.czxid == epoch
