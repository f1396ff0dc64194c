"""SCRAM users named in the broker's config for its first start (issue 11), in the syntax of
Kafka's `kafka-storage format --add-scram` (KIP-900), several separated by `;`:

    tidelog.scram.bootstrap.users=SCRAM-SHA-512=[name=admin,password=admin-secret];SCRAM-SHA-256=[name=alice,password="a,b]c"]

A quoted value may hold `,`, `]` and `;` (`\\"` and `\\\\` escape inside quotes);
`iterations=N` is optional (4096..16384). At start a user is added only when the store has no
credential of that mechanism for it, so a password rotated later (online or with `tidelog
users`) is never put back. Pure: parsing and the merge; the broker writes the store.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from tidelog.security.scram_credentials import (
    DEFAULT_ITERATIONS,
    SCRAM_MECHANISMS,
    CredentialStoreError,
    ScramCredential,
    make_credential,
)

MAX_BOOTSTRAP_USERS = 100
_FIELD = re.compile(r'\s*(\w+)\s*=\s*("(?:[^"\\]|\\.)*"|[^,"\]]*)\s*(?:,|$)')


@dataclass(frozen=True, slots=True)
class BootstrapUser:
    mechanism: str
    name: str
    password: str
    iterations: int = DEFAULT_ITERATIONS


def parse_bootstrap_users(text: str) -> list[BootstrapUser]:
    """The users of the setting; CredentialStoreError names what is wrong (never the
    password)."""
    users: list[BootstrapUser] = []
    position, text = 0, text.strip()
    while position < len(text):
        match = _quoted_aware_entry(text, position)
        if match is None:
            raise CredentialStoreError(
                "tidelog.scram.bootstrap.users: expected SCRAM-SHA-256=[name=...,password=...]"
                f" at character {position}")
        mechanism, body, position = match
        fields = _fields(body)
        name, password = fields.get("name", ""), fields.get("password")
        if not name or password is None:
            raise CredentialStoreError(
                f"tidelog.scram.bootstrap.users: {mechanism} entry needs name= and password=")
        iterations = fields.get("iterations", str(DEFAULT_ITERATIONS))
        if not iterations.isdigit():
            raise CredentialStoreError(f"tidelog.scram.bootstrap.users: iterations={iterations}")
        users.append(BootstrapUser(mechanism, name, password, int(iterations)))
        if len(users) > MAX_BOOTSTRAP_USERS:
            raise CredentialStoreError(
                f"tidelog.scram.bootstrap.users: more than {MAX_BOOTSTRAP_USERS} users")
    for user in users:  # validates iterations and the mechanism before anything is written
        make_credential(user.mechanism, "x", iterations=user.iterations, salt=b"\0" * 16)
    return users


def missing_credentials(
    users: list[BootstrapUser], store: Mapping[str, Mapping[str, ScramCredential]]
) -> dict[str, dict[str, ScramCredential]]:
    """(name -> mechanism -> new credential) for the bootstrap users the store lacks."""
    added: dict[str, dict[str, ScramCredential]] = {}
    for user in users:
        if user.mechanism in store.get(user.name, {}) or user.mechanism in added.get(
                user.name, {}):
            continue
        added.setdefault(user.name, {})[user.mechanism] = make_credential(
            user.mechanism, user.password, iterations=user.iterations)
    return added


def _quoted_aware_entry(text: str, start: int) -> tuple[str, str, int] | None:
    """`MECH=[...]` from `start`, where `]` inside a quoted value does not close the entry."""
    head = re.compile(r"\s*(SCRAM-SHA-256|SCRAM-SHA-512)\s*=\s*\[").match(text, start)
    if head is None or head.group(1) not in SCRAM_MECHANISMS:
        return None
    index, quoted = head.end(), False
    while index < len(text):
        char = text[index]
        if quoted and char == "\\":
            index += 2
            continue
        if char == '"':
            quoted = not quoted
        elif char == "]" and not quoted:
            end = index + 1
            separator = re.compile(r"\s*(;|$)").match(text, end)
            if separator is None:
                return None
            return head.group(1), text[head.end():index], separator.end()
        index += 1
    return None


def _fields(body: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    position = 0
    while position < len(body):
        match = _FIELD.match(body, position)
        if match is None or match.end() == position:
            raise CredentialStoreError("tidelog.scram.bootstrap.users: malformed field list")
        value = match.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        fields[match.group(1)] = value
        position = match.end()
    return fields
