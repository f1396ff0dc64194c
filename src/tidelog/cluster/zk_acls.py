"""ACLs in ZooKeeper, in Kafka's ZooKeeper-mode layout (kafka.zk.ZkData: ZkAclStore,
ZkAclChangeStore), so the cluster store reads and writes what Kafka's AclAuthorizer did.

Layout, one znode per resource pattern (resource type names as Kafka's SecurityUtils spells
them: Topic, Group, Cluster, TransactionalId, DelegationToken, User):

- `/kafka-acl/<ResourceType>/<name>`: the LITERAL pattern's entries.
- `/kafka-acl-extended/prefixed/<ResourceType>/<name>`: the PREFIXED pattern's entries.
- data: `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
  "operation":"Read","host":"*"}, ...]}` (operation names Read, Write, Create, Delete, Alter,
  Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens,
  DescribeTokens, All; permission types Allow, Deny).
- after a change, a persistent sequential znode names the changed pattern:
  `/kafka-acl-changes/acl_changes_<seq>` holding `<ResourceType>:<name>` (literal), or
  `/kafka-acl-extended-changes/acl_changes_<seq>` holding
  `{"version":1,"resourceType":"TOPIC","name":"...","patternType":"PREFIXED"}`.

`ZkAclStore` makes blocking kazoo calls: run it on the cluster agent's thread, never on the
event loop. Not wired into the broker yet (docs/security.md, "Not done yet").
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

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

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes/acl_changes_"
EXTENDED_CHANGES = "/kafka-acl-extended-changes/acl_changes_"

TYPE_NAMES = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken",
    ResourceType.USER: "User",
}
_TYPES_BY_NAME = {name.lower(): kind for kind, name in TYPE_NAMES.items()}
OPERATION_NAMES: dict[AclOperation, str] = {
    op: "".join(part.capitalize() for part in op.name.split("_"))
    for op in AclOperation
    if op not in (AclOperation.UNKNOWN, AclOperation.ANY)
}
_OPERATIONS_BY_NAME = {name.lower(): op for op, name in OPERATION_NAMES.items()}


class ZkAclError(TidelogError):
    """A znode under /kafka-acl* does not hold what Kafka writes there; names the path."""


def znode_path(pattern: ResourcePattern) -> str:
    if "/" in pattern.name or not pattern.name:
        # a ZooKeeper path segment cannot hold it (Kafka has the same limit)
        raise ZkAclError(f"resource name {pattern.name!r} cannot be a ZooKeeper node name")
    root = PREFIXED_ROOT if pattern.pattern_type == PatternType.PREFIXED else LITERAL_ROOT
    return f"{root}/{TYPE_NAMES[pattern.resource_type]}/{pattern.name}"


def encode_entries(entries: Iterable[AccessControlEntry]) -> bytes:
    acls = [
        {
            "principal": entry.principal,
            "permissionType": entry.permission_type.name.capitalize(),
            "operation": OPERATION_NAMES[entry.operation],
            "host": entry.host,
        }
        for entry in sorted(entries)
    ]
    return json.dumps({"version": 1, "acls": acls}).encode("utf-8")


def decode_entries(pattern: ResourcePattern, data: bytes, path: str) -> list[AclBinding]:
    try:
        document = json.loads(data)
        bindings = []
        for item in document["acls"]:
            entry = AccessControlEntry(
                str(item["principal"]),
                str(item["host"]),
                _OPERATIONS_BY_NAME[str(item["operation"]).lower()],
                AclPermissionType[str(item["permissionType"]).upper()],
            )
            binding = AclBinding(pattern, entry)
            validate_binding(binding)
            bindings.append(binding)
        return bindings
    except (ValueError, KeyError, TypeError, AclValidationError) as error:
        raise ZkAclError(f"{path}: {error!r}") from None


def change_notification(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(sequential node path prefix, data) announcing a change of `pattern`."""
    if pattern.pattern_type == PatternType.LITERAL:
        return LITERAL_CHANGES, f"{TYPE_NAMES[pattern.resource_type]}:{pattern.name}".encode()
    event = {
        "version": 1,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return EXTENDED_CHANGES, json.dumps(event).encode("utf-8")


def decode_change(prefix: str, data: bytes) -> ResourcePattern:
    text = data.decode("utf-8", "replace")
    if prefix == LITERAL_CHANGES:
        type_name, separator, name = text.partition(":")
        kind = _TYPES_BY_NAME.get(type_name.lower()) or _TYPES_BY_NAME.get(
            type_name.replace("_", "").lower()
        )
        if not separator or kind is None:
            raise ZkAclError(f"bad literal ACL change {text!r}")
        return ResourcePattern(kind, name, PatternType.LITERAL)
    try:
        event: dict[str, Any] = json.loads(text)
        return ResourcePattern(
            ResourceType[event["resourceType"].upper()],
            str(event["name"]),
            PatternType[event["patternType"].upper()],
        )
    except (ValueError, KeyError, AttributeError) as error:
        raise ZkAclError(f"bad extended ACL change {text!r}: {error!r}") from None


class ZkAclStore:
    """`AclStore` over ZooKeeper (broker/acl_store.py's interface). Blocking calls."""

    def __init__(self, client: KazooClient) -> None:
        self.client = client

    def load(self) -> frozenset[AclBinding]:
        found: set[AclBinding] = set()
        for root, pattern_type in (
            (LITERAL_ROOT, PatternType.LITERAL),
            (PREFIXED_ROOT, PatternType.PREFIXED),
        ):
            for type_name in self._children(root):
                kind = _TYPES_BY_NAME.get(type_name.lower())
                if kind is None:
                    raise ZkAclError(f"{root}/{type_name}: unknown resource type")
                for name in self._children(f"{root}/{type_name}"):
                    path = f"{root}/{type_name}/{name}"
                    try:
                        data, _ = self.client.get(path)
                    except NoNodeError:
                        continue  # deleted between the listing and the read
                    pattern = ResourcePattern(kind, name, pattern_type)
                    found.update(decode_entries(pattern, data, path))
        return frozenset(found)

    def save(self, bindings: Iterable[AclBinding]) -> None:
        """Rewrite the znodes of the patterns whose entries changed, each followed by its
        change notification (Kafka's order: the data, then the notice)."""
        wanted = _by_pattern(bindings)
        current = _by_pattern(self.load())
        for pattern in sorted(wanted.keys() | current.keys()):
            entries = wanted.get(pattern, set())
            if entries == current.get(pattern, set()):
                continue
            path = znode_path(pattern)
            if entries:
                data = encode_entries(entries)
                if self.client.exists(path):
                    self.client.set(path, data)
                else:
                    self.client.create(path, data, makepath=True)
            else:
                try:
                    self.client.delete(path)
                except NoNodeError:
                    pass
            prefix, notice = change_notification(pattern)
            self.client.create(prefix, notice, sequence=True, makepath=True)

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.client.get_children(path))
        except NoNodeError:
            return []


def _by_pattern(bindings: Iterable[AclBinding]) -> dict[ResourcePattern, set[AccessControlEntry]]:
    grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for binding in bindings:
        grouped.setdefault(binding.pattern, set()).add(binding.entry)
    return grouped
