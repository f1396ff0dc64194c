"""SCRAM users in ZooKeeper, in Kafka's ZooKeeper-mode layout, so every broker of a cluster
authenticates the same users (Describe/AlterUserScramCredentials through any broker).

Blocking network calls: run on a thread, never on the event loop. Layout (Kafka's
ScramCredentialUtils; the user name sanitized as Kafka's `Sanitizer`):

- `/config/users/<user>`: `{"version":1,"config":{"SCRAM-SHA-256":
  "salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=4096"}}`; quota keys in
  the same znode (zk_quotas.py) are kept untouched.
- after a change: `/config/changes/config_change_<seq>` = `{"version":2,"entity_path":
  "users/<user>"}`; brokers reload the users on every notice.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from collections.abc import Mapping

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from tidelog.cluster.zk_admin import CONFIG_CHANGE_PREFIX
from tidelog.cluster.zk_quotas import desanitize, sanitize
from tidelog.errors import TidelogError
from tidelog.security.scram_credentials import SCRAM_MECHANISMS, ScramCredential, Users

USERS_PATH = "/config/users"


class ZkScramError(TidelogError):
    """A credential Kafka would not write."""


def encode_credential(credential: ScramCredential) -> str:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    return (f"salt={b64(credential.salt)},stored_key={b64(credential.stored_key)},"
            f"server_key={b64(credential.server_key)},iterations={credential.iterations}")


def decode_credential(mechanism: str, text: str) -> ScramCredential:
    try:
        fields = dict(item.split("=", 1) for item in text.split(","))
        return ScramCredential(
            mechanism=mechanism,
            salt=base64.b64decode(fields["salt"], validate=True),
            iterations=int(fields["iterations"]),
            stored_key=base64.b64decode(fields["stored_key"], validate=True),
            server_key=base64.b64decode(fields["server_key"], validate=True),
        )
    except (ValueError, KeyError, binascii.Error) as error:
        raise ZkScramError(f"{mechanism}: {error}") from None


class ZkScramStore:
    """The `read`/`write` user store of the SCRAM admin handlers, over ZooKeeper."""

    def __init__(self, client: KazooClient) -> None:
        self._client = client
        self._lock = threading.Lock()

    def read(self) -> Users:
        users: Users = {}
        try:
            names = self._client.get_children(USERS_PATH)
        except NoNodeError:
            return users
        for sanitized in sorted(names):
            name = desanitize(sanitized)
            if name is None:
                continue  # <default>: quotas only
            config = self._config(f"{USERS_PATH}/{sanitized}")
            credentials = {
                key: decode_credential(key, value)
                for key, value in config.items() if key in SCRAM_MECHANISMS
            }
            if credentials:
                users[name] = credentials
        return users

    def write(self, users: Mapping[str, Mapping[str, ScramCredential]]) -> None:
        """Make ZooKeeper hold exactly `users` (each changed user rewritten, with a notice)."""
        with self._lock:
            current = self.read()
            for name in sorted(set(current) | set(users)):
                wanted = dict(users.get(name, {}))
                if wanted != current.get(name, {}):
                    self._write_user(name, wanted)

    def _write_user(self, name: str, credentials: Mapping[str, ScramCredential]) -> None:
        path = f"{USERS_PATH}/{sanitize(name)}"
        config = {k: v for k, v in self._config(path).items() if k not in SCRAM_MECHANISMS}
        config.update({mechanism: encode_credential(credential)
                       for mechanism, credential in sorted(credentials.items())})
        document = json.dumps({"version": 1, "config": config}).encode("utf-8")
        try:
            self._client.set(path, document)
        except NoNodeError:
            try:
                self._client.create(path, document, makepath=True)
            except NodeExistsError:
                self._client.set(path, document)
        notice = json.dumps({"version": 2, "entity_path": f"users/{sanitize(name)}"})
        self._client.create(CONFIG_CHANGE_PREFIX, notice.encode("utf-8"), sequence=True,
                            makepath=True)

    def _config(self, path: str) -> dict[str, str]:
        try:
            data, _ = self._client.get(path)
        except NoNodeError:
            return {}
        try:
            config = json.loads(data)["config"] if data else {}
            return {str(k): str(v) for k, v in config.items()}
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise ZkScramError(f"{path}: {error}") from None
