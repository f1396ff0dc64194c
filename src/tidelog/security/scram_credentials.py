"""SCRAM credentials (RFC 5802 section 3) and the user store that holds them.

Only salted, derived keys are stored, never a password:

    SaltedPassword = PBKDF2-HMAC-H(password, salt, iterations)
    StoredKey      = H(HMAC(SaltedPassword, "Client Key"))
    ServerKey      = HMAC(SaltedPassword, "Server Key")

The store file is `<data-dir>/scram-credentials.json`, UTF-8 JSON written atomically (a temp
file, fsync, rename, fsync of the directory), mode 0600:

    {"version": 1,
     "users": {"alice": {"SCRAM-SHA-256": {"salt": "<base64>", "iterations": 4096,
                                           "stored_key": "<base64>", "server_key": "<base64>"},
                         "SCRAM-SHA-512": {...}}}}

A user may hold one credential per mechanism, as in Kafka. PLAIN checks a password against any
of the user's SCRAM credentials (as Redpanda does), so one store serves every mechanism.
Blocking file I/O: the broker reads the file at start and again when its mtime changes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidelog.errors import TidelogError

STORE_FILE = "scram-credentials.json"
STORE_VERSION = 1
# Kafka's ScramMechanism: name -> (hash, minimum iterations). 4096 is RFC 7677's minimum.
SCRAM_MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384  # Kafka's ScramMechanism.maxIterations
DEFAULT_ITERATIONS = 4096
MAX_USERNAME_BYTES = 1024  # a bound on what a client may make us look up


class CredentialStoreError(TidelogError):
    """The store file is unreadable or malformed, or a value given to it is invalid."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: str  # SCRAM-SHA-256 | SCRAM-SHA-512
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @property
    def hash_name(self) -> str:
        return SCRAM_MECHANISMS[self.mechanism]

    def matches_password(self, password: bytes) -> bool:
        """PLAIN against SCRAM: derive StoredKey from the password and compare in constant
        time."""
        salted = salted_password(self.hash_name, password, self.salt, self.iterations)
        client_key = hmac.digest(salted, b"Client Key", self.hash_name)
        stored_key = hashlib.new(self.hash_name, client_key).digest()
        return hmac.compare_digest(stored_key, self.stored_key)


def salted_password(hash_name: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name, password, salt, iterations)


def make_credential(
    mechanism: str,
    password: str,
    *,
    iterations: int = DEFAULT_ITERATIONS,
    salt: bytes | None = None,
) -> ScramCredential:
    if mechanism not in SCRAM_MECHANISMS:
        raise CredentialStoreError(
            f"unknown mechanism {mechanism!r} (known: {', '.join(SCRAM_MECHANISMS)})"
        )
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise CredentialStoreError(
            f"iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}, got {iterations}"
        )
    hash_name = SCRAM_MECHANISMS[mechanism]
    salt = secrets.token_bytes(32) if salt is None else salt
    salted = salted_password(hash_name, password.encode("utf-8"), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", hash_name)
    return ScramCredential(
        mechanism=mechanism,
        salt=salt,
        iterations=iterations,
        stored_key=hashlib.new(hash_name, client_key).digest(),
        server_key=hmac.digest(salted, b"Server Key", hash_name),
    )


def credential_from_salted_password(
    mechanism: str, salt: bytes, iterations: int, salted: bytes
) -> ScramCredential:
    """What AlterUserScramCredentials sends (the client salts and hashes the password) ->
    the stored keys."""
    hash_name = SCRAM_MECHANISMS[mechanism]
    client_key = hmac.digest(salted, b"Client Key", hash_name)
    return ScramCredential(
        mechanism=mechanism,
        salt=salt,
        iterations=iterations,
        stored_key=hashlib.new(hash_name, client_key).digest(),
        server_key=hmac.digest(salted, b"Server Key", hash_name),
    )


Users = dict[str, dict[str, ScramCredential]]


def encode_store(users: Mapping[str, Mapping[str, ScramCredential]]) -> bytes:
    document = {
        "version": STORE_VERSION,
        "users": {
            name: {
                mechanism: {
                    "salt": _b64(credential.salt),
                    "iterations": credential.iterations,
                    "stored_key": _b64(credential.stored_key),
                    "server_key": _b64(credential.server_key),
                }
                for mechanism, credential in sorted(mechanisms.items())
            }
            for name, mechanisms in sorted(users.items())
        },
    }
    return (json.dumps(document, indent=2) + "\n").encode("utf-8")


def decode_store(data: bytes) -> Users:
    try:
        document = json.loads(data.decode("utf-8"))
        if document.get("version") != STORE_VERSION:
            raise CredentialStoreError(f"unknown store version {document.get('version')!r}")
        users: Users = {}
        for name, mechanisms in document["users"].items():
            users[str(name)] = {
                str(mechanism): _credential(str(mechanism), fields)
                for mechanism, fields in mechanisms.items()
            }
        return users
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise CredentialStoreError(f"malformed credential store: {error}") from None


def _credential(mechanism: str, fields: Mapping[str, Any]) -> ScramCredential:
    if mechanism not in SCRAM_MECHANISMS:
        raise CredentialStoreError(f"unknown mechanism {mechanism!r}")
    return ScramCredential(
        mechanism=mechanism,
        salt=base64.b64decode(fields["salt"], validate=True),
        iterations=int(fields["iterations"]),
        stored_key=base64.b64decode(fields["stored_key"], validate=True),
        server_key=base64.b64decode(fields["server_key"], validate=True),
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def read_store(data_dir: Path) -> Users:
    """The users in `data_dir` (none when the file does not exist). Blocking file I/O."""
    path = data_dir / STORE_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise CredentialStoreError(f"cannot read {path}: {error.strerror}") from None
    return decode_store(data)


def write_store(data_dir: Path, users: Mapping[str, Mapping[str, ScramCredential]]) -> None:
    """Replace the store atomically: a reader sees the old file or the new one, whole."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / STORE_FILE
    temporary = path.with_suffix(".json.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(descriptor, encode_store(users))
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    os.replace(temporary, path)
    directory = os.open(data_dir, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


class CredentialCache:
    """The store as the broker reads it: re-read when the file's mtime or size changes, so
    `tidelog users add` on a running single node takes effect at the next authentication.
    Blocking (one stat per lookup)."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / STORE_FILE
        self._data_dir = data_dir
        self._stamp: tuple[int, int] | None = None
        self._users: Users = {}
        self._replaced: Users | None = None  # cluster mode: ZooKeeper's users, not the file

    def lookup(self, username: str, mechanism: str) -> ScramCredential | None:
        return self.credentials(username).get(mechanism)

    def credentials(self, username: str) -> dict[str, ScramCredential]:
        if self._replaced is not None and username in self._replaced:
            return self._replaced[username]
        self._refresh()
        return self._users.get(username, {})

    def replace(self, users: Mapping[str, Mapping[str, ScramCredential]]) -> None:
        """A cluster's users (ZooKeeper's /config/users): they come first; a name ZooKeeper
        does not hold is still looked up in the file (users added offline per broker)."""
        self._replaced = {name: dict(mechanisms) for name, mechanisms in users.items()}

    def _refresh(self) -> None:
        try:
            status = self._path.stat()
            stamp: tuple[int, int] | None = (status.st_mtime_ns, status.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp != self._stamp:
            self._users = read_store(self._data_dir) if stamp is not None else {}
            self._stamp = stamp
