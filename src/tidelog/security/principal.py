"""Kafka principals: `User:alice`, as authenticated by a listener and named in ACLs.

A connection that has not authenticated (PLAINTEXT, or SSL without a client certificate) is
`User:ANONYMOUS`, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidelog.errors import TidelogError


class PrincipalError(TidelogError):
    """A principal string is not `Type:name`."""


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str  # "User" (Kafka's only built-in type) or a custom one, e.g. "Group"
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`User:alice` -> KafkaPrincipal("User", "alice"); the name may contain ':'."""
        principal_type, separator, name = text.partition(":")
        if not separator or not principal_type or not name:
            raise PrincipalError(
                f"expected a principal as Type:name (e.g. User:alice), got {text!r}"
            )
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")
