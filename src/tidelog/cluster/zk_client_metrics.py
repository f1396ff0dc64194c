"""CLIENT_METRICS config resources (KIP-714 subscriptions) in ZooKeeper, in Kafka's
ZooKeeper-mode layout (ConfigType.CLIENT_METRICS = "client-metrics"), so every broker of a
cluster serves the same subscriptions.

Blocking network calls: run on a thread, never on the event loop. Layout:

- `/config/client-metrics/<name>`: `{"version":1,"config":{"metrics":"...","interval.ms":"..."}}`
  (names sanitized as Kafka's `Sanitizer`; a subscription without configs is deleted);
- after a change: `/config/changes/config_change_<seq>` =
  `{"version":2,"entity_path":"client-metrics/<name>"}`; every broker watches
  `/config/changes` (the cluster agent) and reloads the subscriptions whole.
"""

from __future__ import annotations

import json
import threading

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from tidelog.cluster.zk_admin import CONFIG_CHANGE_PREFIX
from tidelog.cluster.zk_quotas import desanitize, sanitize
from tidelog.coordinator.client_metrics import parse_subscription
from tidelog.errors import KafkaError, TidelogError

ROOT = "/config/client-metrics"
MAX_SUBSCRIPTION_BYTES = 1024 * 1024  # one znode's payload (ZooKeeper's own jute limit)


class ZkClientMetricsError(TidelogError):
    """A client-metrics znode Kafka would not write."""


class ZkClientMetricsStore:
    """`ClientMetricsStore` over ZooKeeper (broker/telemetry/store.py is the interface)."""

    def __init__(self, client: KazooClient) -> None:
        self._client = client
        self._lock = threading.Lock()

    def load(self) -> dict[str, dict[str, str]]:
        found: dict[str, dict[str, str]] = {}
        try:
            children = sorted(self._client.get_children(ROOT))
        except NoNodeError:
            return found
        for child in children:
            path = f"{ROOT}/{child}"
            try:
                data, _ = self._client.get(path)
            except NoNodeError:
                continue
            name = desanitize(child) or ""
            configs = _decode(data, path)
            try:
                parse_subscription(name, configs)
            except KafkaError as error:
                raise ZkClientMetricsError(f"{path}: {error}") from None
            if configs:
                found[name] = configs
        return found

    def write(self, name: str, configs: dict[str, str]) -> None:
        relative = f"client-metrics/{sanitize(name)}"
        path = f"/config/{relative}"
        with self._lock:
            if configs:
                document = json.dumps({"version": 1, "config": dict(sorted(configs.items()))})
                data = document.encode("utf-8")
                try:
                    self._client.set(path, data)
                except NoNodeError:
                    try:
                        self._client.create(path, data, makepath=True)
                    except NodeExistsError:
                        self._client.set(path, data)
            else:
                try:
                    self._client.delete(path)
                except NoNodeError:
                    pass
            notice = json.dumps({"version": 2, "entity_path": relative}).encode("utf-8")
            self._client.create(CONFIG_CHANGE_PREFIX, notice, sequence=True, makepath=True)


def _decode(data: bytes, path: str) -> dict[str, str]:
    if len(data) > MAX_SUBSCRIPTION_BYTES:
        raise ZkClientMetricsError(f"{path}: larger than {MAX_SUBSCRIPTION_BYTES} bytes")
    try:
        document = json.loads(data) if data else {"config": {}}
        config = document["config"]
        if not isinstance(config, dict):
            raise TypeError("config is not an object")
        return {str(key): str(value) for key, value in config.items()}
    except (ValueError, KeyError, TypeError) as error:
        raise ZkClientMetricsError(f"{path}: {error}") from None
