"""Where client quotas live: `QuotaStore` (the interface) and `FileQuotaStore` (single node).

`<data-dir>/client-quotas.json` (UTF-8 JSON, rewritten whole and atomically: write tmp, fsync,
rename, fsync dir), one entry per entity with at least one value; a null name is the type's
`<default>`::

    {"version": 1,
     "quotas": [
       {"entity": {"user": "alice", "client-id": null},    # user, client-id or ip
        "values": {"producer_byte_rate": 204800.0}}         # Kafka's quota keys
     ]}

Every entry is validated on load with the rules AlterClientQuotas applies
(`security/quota_entity.py`); a file that does not parse stops the broker (exit status 1,
naming the file) rather than start it without the quotas the operator set.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from tidelog.broker.metadata import write_atomically
from tidelog.errors import TidelogError
from tidelog.security.quota_entity import (
    IP,
    IP_KEYS,
    USER_CLIENT_KEYS,
    ClientQuotas,
    QuotaAlteration,
    QuotaEntity,
    QuotaRequestError,
    validate_entity,
    validate_quota_value,
)

QUOTAS_FILE = "client-quotas.json"
FORMAT_VERSION = 1
MAX_QUOTAS_FILE_BYTES = 16 * 1024 * 1024  # bounds the read


class QuotaStoreError(TidelogError):
    """The stored quotas cannot be read; the message names the file and the fault."""


class QuotaStore(Protocol):
    """Blocking calls, small and rare: the handlers run them on a worker thread."""

    def load(self) -> ClientQuotas: ...

    def update(
        self, alterations: Iterable[QuotaAlteration], validate_only: bool
    ) -> tuple[ClientQuotas, dict[QuotaEntity, str | None]]:
        """Validate and apply to what is stored; (every quota afterwards, per entity None or
        the INVALID_REQUEST message)."""
        ...


def quotas_to_json(quotas: ClientQuotas) -> dict[str, Any]:
    return {
        "version": FORMAT_VERSION,
        "quotas": [
            {"entity": entity.as_dict(), "values": dict(sorted(values.items()))}
            for entity, values in sorted(quotas.entries.items(), key=lambda e: e[0].sort_key())
        ],
    }


def quotas_from_json(document: Any) -> ClientQuotas:
    if not isinstance(document, dict) or document.get("version") != FORMAT_VERSION:
        raise QuotaRequestError("unknown version")
    entries: dict[QuotaEntity, dict[str, float]] = {}
    for item in document["quotas"]:
        raw = item["entity"]
        if not isinstance(raw, dict) or not all(
            isinstance(name, str | None) for name in raw.values()
        ):
            raise QuotaRequestError(f"bad entity {raw!r}")
        entity = validate_entity(raw.items())
        keys = IP_KEYS if IP in raw else USER_CLIENT_KEYS
        values = {str(key): float(value) for key, value in item["values"].items()}
        for key, value in values.items():
            validate_quota_value(keys, key, value)
        entries[entity] = values
    return ClientQuotas(entries)


class FileQuotaStore:
    """`<data-dir>/client-quotas.json`. Blocking file I/O."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / QUOTAS_FILE
        self._lock = threading.Lock()  # one read-modify-write at a time

    def load(self) -> ClientQuotas:
        try:
            with self.path.open("rb") as stream:
                data = stream.read(MAX_QUOTAS_FILE_BYTES + 1)
        except FileNotFoundError:
            return ClientQuotas()
        if len(data) > MAX_QUOTAS_FILE_BYTES:
            raise QuotaStoreError(f"{self.path}: larger than {MAX_QUOTAS_FILE_BYTES} bytes")
        try:
            return quotas_from_json(json.loads(data))
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise QuotaStoreError(f"{self.path}: {error}") from None

    def update(
        self, alterations: Iterable[QuotaAlteration], validate_only: bool
    ) -> tuple[ClientQuotas, dict[QuotaEntity, str | None]]:
        with self._lock:
            current = self.load()
            wanted, results = current.alter(alterations)
            if validate_only:
                return current, results
            if wanted != current:
                document = quotas_to_json(wanted)
                write_atomically(self.path, json.dumps(document, indent=1).encode() + b"\n")
            return wanted, results
