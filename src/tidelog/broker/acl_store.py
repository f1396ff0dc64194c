"""Where the ACLs live: `AclStore` (the interface) and `FileAclStore`, the single-node store.

`<data-dir>/acls.json` (UTF-8 JSON, rewritten whole and atomically: write tmp, fsync, rename,
fsync dir, so a crash leaves the old set or the new one, never a mix)::

    {
      "version": 1,
      "acls": [
        {"resource_type": "TOPIC",       # TOPIC GROUP CLUSTER TRANSACTIONAL_ID USER
         "pattern_type": "LITERAL",      # LITERAL (name may be "*") or PREFIXED
         "name": "orders",
         "principal": "User:alice",      # or "User:*"
         "host": "*",                    # or an IP address
         "operation": "READ",            # AclOperation name (ALL, READ, WRITE, ...)
         "permission_type": "ALLOW"}     # ALLOW or DENY
      ]
    }

Names rather than codes keep the file readable and diffable; every entry is validated on load
(`validate_binding`), and a file that does not parse stops the broker rather than starting it
with fewer ACLs than the operator wrote (a missing DENY would be a wrongful grant).

The cluster-mode store (ZooKeeper `/kafka-acl/<ResourceType>/<name>`, cluster/zk_acls.py)
implements the same interface.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from tidelog.broker.metadata import write_atomically
from tidelog.errors import TidelogError
from tidelog.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    AclValidationError,
    PatternType,
    ResourcePattern,
    ResourceType,
    validate_binding,
)

ACLS_FILE = "acls.json"
FORMAT_VERSION = 1
MAX_ACLS_FILE_BYTES = 64 * 1024 * 1024  # bounds the read; ~300k ACLs


class AclStoreError(TidelogError):
    """The stored ACLs cannot be read; the message names the file and the fault."""


class AclStore(Protocol):
    """Blocking calls, small and rare (an ACL change): the ACL handlers run them on a worker
    thread (the ZooKeeper store waits on the network)."""

    def load(self) -> frozenset[AclBinding]: ...

    def save(self, bindings: Iterable[AclBinding]) -> None: ...

    def update(
        self, added: Iterable[AclBinding], removed: Iterable[AclBinding]
    ) -> frozenset[AclBinding]:
        """Apply a change to what is stored (not to a possibly stale copy of it); returns
        every ACL stored afterwards."""
        ...


def binding_to_json(binding: AclBinding) -> dict[str, str]:
    pattern, entry = binding.pattern, binding.entry
    return {
        "resource_type": pattern.resource_type.name,
        "pattern_type": pattern.pattern_type.name,
        "name": pattern.name,
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation.name,
        "permission_type": entry.permission_type.name,
    }


def binding_from_json(item: Any) -> AclBinding:
    if not isinstance(item, dict):
        raise AclValidationError(f"expected an object, got {type(item).__name__}")
    try:
        binding = AclBinding(
            ResourcePattern(
                ResourceType[item["resource_type"]],
                str(item["name"]),
                PatternType[item["pattern_type"]],
            ),
            AccessControlEntry(
                str(item["principal"]),
                str(item["host"]),
                AclOperation[item["operation"]],
                AclPermissionType[item["permission_type"]],
            ),
        )
    except (KeyError, TypeError) as error:
        raise AclValidationError(f"missing or unknown field {error}") from None
    validate_binding(binding)
    return binding


class FileAclStore:
    """`<data-dir>/acls.json`. Blocking file I/O."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / ACLS_FILE
        self._lock = threading.Lock()  # one read-modify-write at a time

    def update(
        self, added: Iterable[AclBinding], removed: Iterable[AclBinding]
    ) -> frozenset[AclBinding]:
        with self._lock:
            current = self.load()
            wanted = (current | frozenset(added)) - frozenset(removed)
            if wanted != current:
                self.save(wanted)
            return wanted

    def load(self) -> frozenset[AclBinding]:
        try:
            with self.path.open("rb") as stream:
                data = stream.read(MAX_ACLS_FILE_BYTES + 1)
        except FileNotFoundError:
            return frozenset()
        if len(data) > MAX_ACLS_FILE_BYTES:
            raise AclStoreError(f"{self.path}: larger than {MAX_ACLS_FILE_BYTES} bytes")
        try:
            document = json.loads(data)
            if document.get("version") != FORMAT_VERSION:
                raise AclValidationError(f"unknown version {document.get('version')!r}")
            return frozenset(binding_from_json(item) for item in document["acls"])
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise AclStoreError(f"{self.path}: {error}") from None

    def save(self, bindings: Iterable[AclBinding]) -> None:
        document = {
            "version": FORMAT_VERSION,
            "acls": [binding_to_json(binding) for binding in sorted(bindings)],
        }
        write_atomically(self.path, json.dumps(document, indent=1).encode() + b"\n")
