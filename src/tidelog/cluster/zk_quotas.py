"""Client quotas in ZooKeeper, in Kafka's ZooKeeper-mode layout (AdminZkClient.changeConfigs,
ZkConfigManager), so every broker of a cluster applies the same quotas.

Blocking network calls: run on a thread, never on the event loop. Layout (names sanitized as
Kafka's `Sanitizer`: URL-encoded, `*` as %2A; a default entity is the literal `<default>`):

- `/config/users/<user>`                      user quotas (and, in Kafka, SCRAM credentials)
- `/config/users/<user>/clients/<client-id>`  (user, client-id) quotas
- `/config/clients/<client-id>`               client-id quotas
- `/config/ips/<ip>`                          connection-rate quotas
- each znode: `{"version":1,"config":{"producer_byte_rate":"1024",...}}` (values as strings);
  keys that are not quota keys (Kafka's `SCRAM-SHA-256` credentials) are kept untouched.
- after a change: `/config/changes/config_change_<seq>` =
  `{"version":2,"entity_path":"users/alice/clients/app"}`; every broker watches
  `/config/changes` and reloads the quotas; notices older than 15 minutes are deleted by the
  broker that sees them.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable
from urllib.parse import quote, unquote

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError, NotEmptyError

from tidelog.cluster.zk_admin import CONFIG_CHANGE_PREFIX
from tidelog.errors import TidelogError
from tidelog.security.quota_entity import (
    CLIENT_ID,
    IP,
    IP_KEYS,
    USER,
    USER_CLIENT_KEYS,
    ClientQuotas,
    QuotaAlteration,
    QuotaEntity,
    QuotaRequestError,
    validate_quota_value,
)

CHANGES_PATH = "/config/changes"
NOTICE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's changeExpirationMs (ZkConfigManager)
DEFAULT = "<default>"
_ROOTS = {USER: "users", CLIENT_ID: "clients", IP: "ips"}
QUOTA_KEYS = frozenset(USER_CLIENT_KEYS) | frozenset(IP_KEYS)
log = logging.getLogger("tidelog.cluster.quotas")


class ZkQuotaError(TidelogError):
    """A quota znode Kafka would not write."""


def sanitize(name: str | None) -> str:
    """Kafka's Sanitizer.sanitize (Java's URLEncoder, then %20 for '+' and %2A for '*')."""
    if name is None:
        return DEFAULT
    return quote(name, safe="").replace("~", "%7E").replace("*", "%2A")


def desanitize(text: str) -> str | None:
    return None if text == DEFAULT else unquote(text)


def entity_path(entity: QuotaEntity) -> str:
    """`users/alice/clients/app`, `clients/<default>`, `ips/10.0.0.1` (Kafka's entity path)."""
    parts = entity.as_dict()
    if USER in parts and CLIENT_ID in parts:
        return f"users/{sanitize(parts[USER])}/clients/{sanitize(parts[CLIENT_ID])}"
    ((kind, name),) = parts.items()
    return f"{_ROOTS[kind]}/{sanitize(name)}"


def decode_entity_config(data: bytes) -> dict[str, str]:
    """The `config` map of Kafka's `/config/<entity type>/<name>` JSON
    (`{"version":1,"config":{...}}`; an empty znode is an empty map); ValueError if malformed."""
    try:
        document = json.loads(data) if data else {"config": {}}
        config = document["config"]
        if not isinstance(config, dict):
            raise TypeError("config is not an object")
    except (KeyError, TypeError) as error:
        raise ValueError(f"not a config document: {error}") from None
    return {str(key): str(value) for key, value in config.items()}


def _decode(data: bytes, path: str) -> dict[str, str]:
    try:
        return decode_entity_config(data)
    except ValueError as error:
        raise ZkQuotaError(f"{path}: {error}") from None


def _quota_values(config: dict[str, str], entity: QuotaEntity, path: str) -> dict[str, float]:
    keys = IP_KEYS if IP in entity.as_dict() else USER_CLIENT_KEYS
    values: dict[str, float] = {}
    for key, text in config.items():
        if key not in QUOTA_KEYS:
            continue  # SCRAM credentials share /config/users/<user>
        try:
            value = float(text)
            validate_quota_value(keys, key, value)
        except (ValueError, QuotaRequestError) as error:
            raise ZkQuotaError(f"{path}: {key}={text!r}: {error}") from None
        values[key] = value
    return values


class ZkQuotaStore:
    """`QuotaStore` over ZooKeeper. Alterations of one broker are applied one at a time;
    two brokers altering the same entity at once: the last write wins (Kafka's ZooKeeper
    mode wrote the same way)."""

    def __init__(self, client: KazooClient) -> None:
        self._client = client
        self._lock = threading.Lock()

    def load(self) -> ClientQuotas:
        entries: dict[QuotaEntity, dict[str, float]] = {}
        for user in self._children("/config/users"):
            self._read(QuotaEntity.of(user=desanitize(user)), f"/config/users/{user}", entries)
            for client in self._children(f"/config/users/{user}/clients"):
                self._read(
                    QuotaEntity.of(user=desanitize(user), client_id=desanitize(client)),
                    f"/config/users/{user}/clients/{client}", entries,
                )
        for client in self._children("/config/clients"):
            self._read(QuotaEntity.of(client_id=desanitize(client)),
                       f"/config/clients/{client}", entries)
        for ip in self._children("/config/ips"):
            self._read(QuotaEntity.of(ip=desanitize(ip)), f"/config/ips/{ip}", entries)
        return ClientQuotas(entries)

    def update(
        self, alterations: Iterable[QuotaAlteration], validate_only: bool
    ) -> tuple[ClientQuotas, dict[QuotaEntity, str | None]]:
        with self._lock:
            current = self.load()
            wanted, results = current.alter(alterations)
            if validate_only:
                return current, results
            changed = [
                entity for entity in set(current.entries) | set(wanted.entries)
                if current.entries.get(entity) != wanted.entries.get(entity)
            ]
            for entity in sorted(changed, key=lambda e: e.sort_key()):
                self._write(entity, dict(wanted.entries.get(entity, {})))
            return wanted, results

    def ensure_paths(self) -> None:
        self._client.ensure_path(CHANGES_PATH)

    def purge_notices(self, now_ms: int) -> int:
        """Delete `/config/changes` notices older than 15 minutes (long applied by every
        broker, as Kafka's ZkConfigManager purges them); returns how many."""
        purged = 0
        for name in self._children(CHANGES_PATH):
            path = f"{CHANGES_PATH}/{name}"
            try:
                stat = self._client.exists(path)
                if stat is not None and now_ms - stat.ctime > NOTICE_EXPIRATION_MS:
                    self._client.delete(path)
                    purged += 1
            except (NoNodeError, NotEmptyError):
                continue  # another broker purged it first
        return purged

    def _write(self, entity: QuotaEntity, values: dict[str, float]) -> None:
        relative = entity_path(entity)
        path = f"/config/{relative}"
        try:
            data, _ = self._client.get(path)
            config = _decode(data, path)
        except NoNodeError:
            config = {}
        config = {key: text for key, text in config.items() if key not in QUOTA_KEYS}
        config.update({key: _text(value) for key, value in sorted(values.items())})
        document = json.dumps({"version": 1, "config": config}).encode("utf-8")
        try:
            self._client.set(path, document)
        except NoNodeError:
            try:
                self._client.create(path, document, makepath=True)
            except NodeExistsError:
                self._client.set(path, document)
        notice = json.dumps({"version": 2, "entity_path": relative}).encode("utf-8")
        self._client.create(CONFIG_CHANGE_PREFIX, notice, sequence=True, makepath=True)

    def _read(self, entity: QuotaEntity, path: str,
              entries: dict[QuotaEntity, dict[str, float]]) -> None:
        try:
            data, _ = self._client.get(path)
        except NoNodeError:
            return
        values = _quota_values(_decode(data, path), entity, path)
        if values:
            entries[entity] = values

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self._client.get_children(path))
        except NoNodeError:
            return []


def _text(value: float) -> str:
    """Kafka writes what kafka-configs was given: "1024" for a whole rate, "12.5" else."""
    return str(int(value)) if value.is_integer() else repr(value)
