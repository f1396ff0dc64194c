"""Where CLIENT_METRICS config resources live: `ClientMetricsStore` (the interface) and
`FileClientMetricsStore` (single node; a cluster keeps them in ZooKeeper,
`cluster/zk_client_metrics.py`).

`<data-dir>/client-metrics.json` (UTF-8 JSON, rewritten whole and atomically), one entry per
subscription, the configs as Kafka stores them (strings)::

    {"version": 1,
     "subscriptions": {"all-producers": {"metrics": "org.apache.kafka.producer.",
                                         "interval.ms": "1000",
                                         "match": "client_software_name=librdkafka"}}}

Every entry is validated on load (`coordinator/client_metrics.parse_subscription`); a file
that does not parse stops the broker (exit status 1, naming the file).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Protocol

from tidelog.broker.metadata import write_atomically
from tidelog.coordinator.client_metrics import parse_subscription
from tidelog.errors import KafkaError, TidelogError

CLIENT_METRICS_FILE = "client-metrics.json"
FORMAT_VERSION = 1
MAX_FILE_BYTES = 16 * 1024 * 1024

Subscriptions = dict[str, dict[str, str]]


class ClientMetricsStoreError(TidelogError):
    """The stored subscriptions cannot be read; the message names the file and the fault."""


class ClientMetricsStore(Protocol):
    """Blocking calls, small and rare: the handlers run them on a worker thread."""

    def load(self) -> Subscriptions: ...

    def write(self, name: str, configs: dict[str, str]) -> None:
        """Store one subscription's configs; an empty dict deletes it."""
        ...


def subscriptions_from_json(document: Any) -> Subscriptions:
    if not isinstance(document, dict) or document.get("version") != FORMAT_VERSION:
        raise ValueError("unknown version")
    found: Subscriptions = {}
    for name, configs in document["subscriptions"].items():
        if not isinstance(configs, dict) or not all(
            isinstance(key, str) and isinstance(value, str) for key, value in configs.items()
        ):
            raise TypeError(f"subscription {name!r}: configs must map strings to strings")
        try:
            parse_subscription(str(name), configs)
        except KafkaError as error:
            raise ValueError(f"subscription {name!r}: {error}") from None
        found[str(name)] = dict(configs)
    return found


class FileClientMetricsStore:
    """`<data-dir>/client-metrics.json`. Blocking file I/O."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / CLIENT_METRICS_FILE
        self._lock = threading.Lock()  # one read-modify-write at a time

    def load(self) -> Subscriptions:
        try:
            with self.path.open("rb") as stream:
                data = stream.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return {}
        if len(data) > MAX_FILE_BYTES:
            raise ClientMetricsStoreError(f"{self.path}: larger than {MAX_FILE_BYTES} bytes")
        try:
            return subscriptions_from_json(json.loads(data))
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise ClientMetricsStoreError(f"{self.path}: {error}") from None

    def write(self, name: str, configs: dict[str, str]) -> None:
        with self._lock:
            current = self.load()
            if configs:
                current[name] = dict(configs)
            else:
                current.pop(name, None)
            document = {"version": FORMAT_VERSION, "subscriptions": dict(sorted(current.items()))}
            write_atomically(self.path, json.dumps(document, indent=1).encode() + b"\n")
