"""Kafka's ACL model: resource patterns, access control entries, bindings and filters.

Codes are Kafka's wire codes (`org.apache.kafka.common.acl` / `common.resource`), so a binding
goes onto CreateAcls / DescribeAcls / DeleteAcls unchanged. Pure values; the decisions are in
`authorizer.py`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tidelog.security.principal import KafkaPrincipal, PrincipalError

WILDCARD_RESOURCE = "*"  # a LITERAL pattern named `*` matches every resource of its type
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"  # matches every principal (of any type, as in Kafka)
CLUSTER_NAME = "kafka-cluster"  # the only CLUSTER resource


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6  # refused: Tidelog has no delegation tokens
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only: LITERAL or PREFIXED with exactly this name
    MATCH = 2  # filters only: every pattern that would apply to a resource of this name
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3


# An ALLOW of any of these also allows the key (AclOperation's javadoc): READ, WRITE, DELETE and
# ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS. DENY never implies anything.
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }
    ),
}

# The operations each resource type has (KIP-430 authorized_operations, kafka-acls' table).
OPERATIONS_OF: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        AclOperation.READ,
        AclOperation.DELETE,
        AclOperation.DESCRIBE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.CREATE_TOKENS,
        AclOperation.DESCRIBE_TOKENS,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.WRITE, AclOperation.DESCRIBE),
    ResourceType.USER: (
        AclOperation.CREATE_TOKENS,
        AclOperation.DESCRIBE_TOKENS,
    ),
}


class AclValidationError(ValueError):
    """A binding or filter Kafka would refuse with INVALID_REQUEST; the message says why."""


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType  # LITERAL or PREFIXED

    def applies_to(self, resource_type: ResourceType, name: str) -> bool:
        """Does this stored pattern cover the concrete resource `(resource_type, name)`?"""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == name or self.name == WILDCARD_RESOURCE


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str  # `User:alice`, or `User:*` for everyone
    host: str  # an IP address as the client's socket reports it, or `*`
    operation: AclOperation
    permission_type: AclPermissionType  # ALLOW or DENY


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


def validate_binding(binding: AclBinding) -> None:
    """Kafka's checks before an ACL is stored (AclControlManager.validateNewAcl, KafkaApis);
    raises AclValidationError (answered INVALID_REQUEST)."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise AclValidationError("Invalid resourceType " + pattern.resource_type.name)
    if pattern.resource_type == ResourceType.DELEGATION_TOKEN:
        raise AclValidationError("DELEGATION_TOKEN ACLs are not supported (no delegation tokens)")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclValidationError("Invalid patternType " + pattern.pattern_type.name)
    if entry.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise AclValidationError("Invalid operation " + entry.operation.name)
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise AclValidationError("Invalid permissionType " + entry.permission_type.name)
    if not pattern.name:
        raise AclValidationError("Invalid empty resource name specified")
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise AclValidationError("The only valid name for the CLUSTER resource is kafka-cluster")
    if not entry.host:
        raise AclValidationError("Invalid empty host specified")
    try:
        KafkaPrincipal.parse(entry.principal)
    except PrincipalError as error:
        raise AclValidationError(f"Invalid principal: {error}") from None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """DescribeAcls / DeleteAcls filter. None (a null on the wire) matches anything."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def validate(self) -> None:
        """A filter with an UNKNOWN element is refused (AclBindingFilter.findIndefiniteField)."""
        if self.resource_type == ResourceType.UNKNOWN:
            raise AclValidationError("Filter contains UNKNOWN resourceType")
        if self.pattern_type == PatternType.UNKNOWN:
            raise AclValidationError("Filter contains UNKNOWN patternType")
        if self.operation == AclOperation.UNKNOWN:
            raise AclValidationError("Filter contains UNKNOWN operation")
        if self.permission_type == AclPermissionType.UNKNOWN:
            raise AclValidationError("Filter contains UNKNOWN permissionType")

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        """ResourcePatternFilter.matches."""
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: the patterns that apply to a resource called `name`
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        """AccessControlEntryFilter.matches."""
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission_type in (AclPermissionType.ANY, entry.permission_type)
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)
