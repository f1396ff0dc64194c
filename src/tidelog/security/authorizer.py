"""The ACL authorizer: `authorize(principal, host, operation, resource) -> bool`, pure.

Kafka's rules (AclAuthorizer.authorizeAction, the ZooKeeper-era authorizer whose storage Tidelog
mirrors; StandardAuthorizer decides the same cases the same way):

1. A principal listed in `super.users` is allowed everything.
2. The ACLs that apply to a resource are those on the LITERAL pattern with its name, the
   LITERAL pattern `*` of its type, and every PREFIXED pattern its name starts with.
3. If no ACL applies at all (whoever it names), the answer is `allow.everyone.if.no.acl.found`.
4. A DENY entry that matches the principal (or `User:*`), the host (or `*`) and the operation
   (or ALL) refuses; DENY is checked before ALLOW and wins.
5. Otherwise an ALLOW entry matching the same way allows; ALLOW of READ, WRITE, DELETE or ALTER
   also allows DESCRIBE, ALLOW of ALTER_CONFIGS also allows DESCRIBE_CONFIGS.

`AclCache` is an immutable snapshot; the `Authorizer` swaps snapshots whole, so a request sees
one consistent set of ACLs and a change applies from the next request on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tidelog.security.acl import (
    IMPLIED_BY,
    OPERATIONS_OF,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tidelog.security.principal import KafkaPrincipal

_Entries = tuple[AccessControlEntry, ...]


@dataclass(frozen=True, slots=True)
class AclCache:
    """Every stored binding, indexed by (resource type, name) per pattern type."""

    bindings: frozenset[AclBinding] = frozenset()
    literal: dict[tuple[ResourceType, str], _Entries] = field(default_factory=dict)
    prefixed: dict[tuple[ResourceType, str], _Entries] = field(default_factory=dict)

    @classmethod
    def of(cls, bindings: Iterable[AclBinding]) -> AclCache:
        every = frozenset(bindings)
        literal: dict[tuple[ResourceType, str], list[AccessControlEntry]] = {}
        prefixed: dict[tuple[ResourceType, str], list[AccessControlEntry]] = {}
        for binding in sorted(every):
            pattern = binding.pattern
            index = prefixed if pattern.pattern_type == PatternType.PREFIXED else literal
            index.setdefault((pattern.resource_type, pattern.name), []).append(binding.entry)
        return cls(
            every,
            {key: tuple(entries) for key, entries in literal.items()},
            {key: tuple(entries) for key, entries in prefixed.items()},
        )

    def applicable(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """The entries of every pattern that applies to the resource (rule 2)."""
        found: list[AccessControlEntry] = []
        found += self.literal.get((resource_type, WILDCARD_RESOURCE), ())
        if name != WILDCARD_RESOURCE:
            found += self.literal.get((resource_type, name), ())
        if self.prefixed:
            for length in range(1, len(name) + 1):
                found += self.prefixed.get((resource_type, name[:length]), ())
        return found

    def patterns(self) -> set[ResourcePattern]:
        return {binding.pattern for binding in self.bindings}


def _entry_matches(
    entry: AccessControlEntry, principal: str, host: str, operations: frozenset[AclOperation]
) -> bool:
    return (
        (entry.principal == principal or entry.principal == WILDCARD_PRINCIPAL)
        and (entry.host == host or entry.host == WILDCARD_HOST)
        and (entry.operation in operations or entry.operation == AclOperation.ALL)
    )


class Authorizer:
    """The ACL cache plus `super.users` and `allow.everyone.if.no.acl.found`. Not thread-safe:
    owned by the event loop; `replace_acls` swaps the snapshot in one assignment."""

    __slots__ = ("allow_everyone_if_no_acl_found", "cache", "super_users")

    def __init__(
        self,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
        bindings: Iterable[AclBinding] = (),
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.cache = AclCache.of(bindings)

    def replace_acls(self, bindings: Iterable[AclBinding]) -> None:
        self.cache = AclCache.of(bindings)

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        who = str(principal)
        if who in self.super_users:
            return True
        entries = self.cache.applicable(resource_type, name)
        if not entries:
            return self.allow_everyone_if_no_acl_found
        denied = frozenset((operation,))
        allowed = IMPLIED_BY.get(operation, denied)
        found_allow = False
        for entry in entries:
            if entry.permission_type == AclPermissionType.DENY:
                if _entry_matches(entry, who, host, denied):
                    return False
            elif not found_allow and entry.permission_type == AclPermissionType.ALLOW:
                found_allow = _entry_matches(entry, who, host, allowed)
        return found_allow

    def authorized_operations(
        self, principal: KafkaPrincipal, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """KIP-430's bit set: bit `code` set for each operation of the type that is allowed."""
        bits = 0
        for operation in OPERATIONS_OF.get(resource_type, ()):
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits

    def authorize_by_resource_type(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """Is `operation` allowed on at least one resource of the type (Authorizer
        .authorizeByResourceType, KIP-679): a literal `*` DENY refuses; else some ALLOW on a
        literal or prefixed pattern that no DENY on the same name or a shorter prefix cancels."""
        who = str(principal)
        if who in self.super_users:
            return True
        operations = frozenset((operation,))
        deny_literal: set[str] = set()
        deny_prefix: set[str] = set()
        allow_literal: set[str] = set()
        allow_prefix: set[str] = set()
        for binding in self.cache.bindings:
            pattern, entry = binding.pattern, binding.entry
            if pattern.resource_type != resource_type:
                continue
            if not _entry_matches(entry, who, host, operations):
                continue
            deny = entry.permission_type == AclPermissionType.DENY
            if pattern.pattern_type == PatternType.PREFIXED:
                (deny_prefix if deny else allow_prefix).add(pattern.name)
            else:
                (deny_literal if deny else allow_literal).add(pattern.name)
        if WILDCARD_RESOURCE in deny_literal:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True

        def dominated(name: str) -> bool:
            return any(name[:length] in deny_prefix for length in range(len(name) + 1))

        if any(not dominated(prefix) for prefix in allow_prefix):
            return True
        return any(
            literal == WILDCARD_RESOURCE or (literal not in deny_literal and not dominated(literal))
            for literal in allow_literal
        )
