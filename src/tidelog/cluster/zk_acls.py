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

`ZkAclStore` makes blocking kazoo calls: run it on a worker or the cluster agent's thread,
never on the event loop. In cluster mode every broker's ClusterAgent watches the two change
paths and applies new notices through `AclChanges` (only the named patterns are read again),
then swaps its authorizer's cache (broker/replication/cluster_agent.py); a change goes
through `update`, which rewrites each touched znode conditionally (its version), so brokers
changing the same pattern at once never lose each other's entries (Kafka's
AclAuthorizer.updateResourceAcls). Notices older than 15 minutes are deleted by whichever
broker sees them (Kafka's ZkNodeChangeNotificationListener, changeExpirationMs).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.handlers.threading import KazooTimeoutError

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
CHANGE_PATHS = ("/kafka-acl-changes", "/kafka-acl-extended-changes")
NOTICE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's changeExpirationMs
MAX_UPDATE_ATTEMPTS = 50  # conditional rewrites of one znode racing other brokers

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
        """Every ACL. The reads are pipelined (all sent, then all awaited): one round trip
        per level instead of one per pattern, so a reload after a change notice stays well
        under a second with thousands of patterns."""
        patterns: list[tuple[ResourcePattern, str]] = []
        for root, pattern_type in (
            (LITERAL_ROOT, PatternType.LITERAL),
            (PREFIXED_ROOT, PatternType.PREFIXED),
        ):
            type_names = self._children(root)
            listings = [self.client.get_children_async(f"{root}/{t}") for t in type_names]
            for type_name, listing in zip(type_names, listings, strict=True):
                kind = _TYPES_BY_NAME.get(type_name.lower())
                if kind is None:
                    raise ZkAclError(f"{root}/{type_name}: unknown resource type")
                try:
                    names = listing.get()
                except NoNodeError:
                    continue  # the type's node went between the two listings
                patterns += [(ResourcePattern(kind, name, pattern_type),
                              f"{root}/{type_name}/{name}") for name in sorted(names)]
        reads = [self.client.get_async(path) for _, path in patterns]
        found: set[AclBinding] = set()
        for (pattern, path), read in zip(patterns, reads, strict=True):
            try:
                data, _ = read.get()
            except NoNodeError:
                continue  # deleted between the listing and the read
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

    def update(
        self, added: Iterable[AclBinding], removed: Iterable[AclBinding]
    ) -> frozenset[AclBinding]:
        """Add and remove entries, each touched pattern's znode rewritten against its version
        (retried when another broker wrote it meanwhile), then announced; returns every ACL
        stored afterwards. A ZooKeeper failure is a ZkAclError (patterns rewritten before it
        stay rewritten, as with Kafka's per-resource updates)."""
        adds, removes = _by_pattern(added), _by_pattern(removed)
        try:
            for pattern in sorted(adds.keys() | removes.keys()):
                if self._update_pattern(pattern, adds.get(pattern, set()),
                                        removes.get(pattern, set())):
                    prefix, notice = change_notification(pattern)
                    self.client.create(prefix, notice, sequence=True, makepath=True)
            return self.load()
        except (KazooException, KazooTimeoutError) as error:
            raise ZkAclError(f"ZooKeeper: {error!r}") from None

    def _update_pattern(
        self, pattern: ResourcePattern, adds: set[AccessControlEntry],
        removes: set[AccessControlEntry],
    ) -> bool:
        """True when the znode changed."""
        path = znode_path(pattern)
        for _ in range(MAX_UPDATE_ATTEMPTS):
            try:
                data, stat = self.client.get(path)
                current = {b.entry for b in decode_entries(pattern, data, path)}
                version = stat.version
            except NoNodeError:
                current, version = set(), -1
            entries = (current | adds) - removes
            if entries == current:
                return False
            try:
                if version < 0:
                    self.client.create(path, encode_entries(entries), makepath=True)
                elif entries:
                    self.client.set(path, encode_entries(entries), version=version)
                else:
                    self.client.delete(path, version=version)
                return True
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another broker wrote it: read again
        raise ZkAclError(f"{path}: still changing after {MAX_UPDATE_ATTEMPTS} attempts")

    def read_pattern(self, pattern: ResourcePattern) -> frozenset[AclBinding]:
        path = znode_path(pattern)
        try:
            data, _ = self.client.get(path)
        except NoNodeError:
            return frozenset()
        return frozenset(decode_entries(pattern, data, path))

    def ensure_change_paths(self) -> None:
        for path in CHANGE_PATHS:
            self.client.ensure_path(path)

    def purge_notices(self, now_ms: int) -> int:
        """Delete change notices older than NOTICE_EXPIRATION_MS; returns how many."""
        purged = 0
        for root in CHANGE_PATHS:
            for name in self._children(root):
                try:
                    stat = self.client.exists(f"{root}/{name}")
                    if stat is not None and now_ms - stat.ctime > NOTICE_EXPIRATION_MS:
                        self.client.delete(f"{root}/{name}")
                        purged += 1
                except (NoNodeError, NotEmptyError):
                    continue  # another broker purged it first
        return purged

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.client.get_children(path))
        except NoNodeError:
            return []


class AclChanges:
    """Kafka's ZkNodeChangeNotificationListener over the two ACL change paths: the ACLs as
    of the last notice processed. `reload` reads everything (at start, after a reconnect);
    `process` re-reads only the patterns named by notices newer than the last one seen, so a
    change costs a few reads however many ACLs there are. Blocking; one thread."""

    def __init__(self, store: ZkAclStore) -> None:
        self.store = store
        self._patterns: dict[ResourcePattern, frozenset[AclBinding]] = {}
        self._last: dict[str, int] = {}  # change path -> highest sequence number processed

    def reload(self) -> frozenset[AclBinding]:
        # The notices first: a change landing between the two reads is processed again
        # later, which is harmless (a pattern re-read), never missed.
        marks = {root: max((seq for seq, _ in self._notices(root)), default=-1)
                 for root in CHANGE_PATHS}
        bindings = self.store.load()
        self._patterns = {
            pattern: frozenset(entries) for pattern, entries in _bindings_by_pattern(bindings)
        }
        self._last = marks
        return bindings

    def process(self) -> frozenset[AclBinding] | None:
        """Every ACL after the new notices; None when there were none. A notice that does not
        decode makes it a whole reload (Kafka logs and skips it; a skipped change is worse)."""
        changed: set[ResourcePattern] = set()
        marks = dict(self._last)  # kept only once every read below has succeeded
        for root, prefix in zip(CHANGE_PATHS, (LITERAL_CHANGES, EXTENDED_CHANGES), strict=True):
            for seq, name in self._notices(root):
                if seq <= marks.get(root, -1):
                    continue
                try:
                    data, _ = self.store.client.get(f"{root}/{name}")
                    changed.add(decode_change(prefix, data))
                except NoNodeError:
                    pass  # purged meanwhile: older than 15 minutes, long applied
                except ZkAclError:
                    return self.reload()
                marks[root] = seq
        reread = {pattern: self.store.read_pattern(pattern) for pattern in changed}
        self._patterns.update(reread)
        self._last = marks
        if not changed:
            return None
        return frozenset().union(*self._patterns.values())

    def _notices(self, root: str) -> list[tuple[int, str]]:
        found = []
        for name in self.store._children(root):
            _, _, digits = name.rpartition("_")
            if digits.isdigit():
                found.append((int(digits), name))
        return sorted(found)


def _bindings_by_pattern(
    bindings: Iterable[AclBinding],
) -> list[tuple[ResourcePattern, list[AclBinding]]]:
    grouped: dict[ResourcePattern, list[AclBinding]] = {}
    for binding in bindings:
        grouped.setdefault(binding.pattern, []).append(binding)
    return list(grouped.items())


def _by_pattern(bindings: Iterable[AclBinding]) -> dict[ResourcePattern, set[AccessControlEntry]]:
    grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for binding in bindings:
        grouped.setdefault(binding.pattern, set()).add(binding.entry)
    return grouped
