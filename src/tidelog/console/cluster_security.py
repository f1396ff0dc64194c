"""Cluster calls for the Security page: ACLs (list with filters, create, delete) and SCRAM users
(list, create, rotate a password, delete), through confluent-kafka's admin API, so they work
against any Kafka cluster with an authorizer.

ACLs travel as Kafka's names: {resource_type: TOPIC|GROUP|CLUSTER|TRANSACTIONAL_ID, name,
pattern_type: LITERAL|PREFIXED, principal: "User:x", host, operation: READ|WRITE|..., permission:
ALLOW|DENY}. Templates expand to the ACLs Kafka's `kafka-acls --producer/--consumer` grant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exports, untyped
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tidelog.console.cluster_clients import ClusterClients
from tidelog.console.errors import (
    BadRequest,
    Conflict,
    NotFound,
    describe_error,
    not_allowed,
    wait_for,
)

CLUSTER_NAME = "kafka-cluster"
RESOURCE_TYPES = {"TOPIC": ResourceType.TOPIC, "GROUP": ResourceType.GROUP,
                  "CLUSTER": ResourceType.BROKER, "TRANSACTIONAL_ID": ResourceType.TRANSACTIONAL_ID}
PATTERN_TYPES = ("LITERAL", "PREFIXED")
OPERATIONS = ("ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
              "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE")
PERMISSIONS = ("ALLOW", "DENY")
MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
              "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # Kafka's bounds
MAX_TEXT = 1000  # names, principals, hosts and passwords


@dataclass(frozen=True, slots=True)
class Acl:
    resource_type: str
    name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str

    def _args(self) -> tuple[Any, ...]:
        return (RESOURCE_TYPES[self.resource_type], self.name,
                ResourcePatternType[self.pattern_type], self.principal, self.host,
                AclOperation[self.operation], AclPermissionType[self.permission])

    def binding(self) -> Any:
        return AclBinding(*self._args())

    def exact_filter(self) -> Any:
        return AclBindingFilter(*self._args())

    def as_dict(self) -> dict[str, str]:
        return {"resource_type": self.resource_type, "name": self.name,
                "pattern_type": self.pattern_type, "principal": self.principal,
                "host": self.host, "operation": self.operation, "permission": self.permission}


def _text(value: Any, name: str, default: str | None = None) -> str:
    if value is None and default is not None:
        return default
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT:
        raise BadRequest(f"{name} must be a non-empty string (at most {MAX_TEXT} characters)")
    return value


def _choice(value: Any, name: str, choices: Sequence[str], default: str | None = None) -> str:
    if value is None and default is not None:
        return default
    text = str(value).upper().replace("-", "_") if isinstance(value, str) else ""
    if text not in choices:
        raise BadRequest(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return text


def _principal(value: Any) -> str:
    principal = _text(value, "principal")
    kind, sep, who = principal.partition(":")
    if not sep or not kind or not who:
        raise BadRequest(f"principal must look like User:alice, got {principal!r}")
    return principal


def parse_acl(body: Mapping[str, Any]) -> Acl:
    """One ACL from the API (every field concrete: this is what is created or deleted)."""
    if not isinstance(body, Mapping):
        raise BadRequest("each ACL must be an object")
    resource_type = _choice(body.get("resource_type"), "resource_type", tuple(RESOURCE_TYPES))
    name = _text(body.get("name"), "name", CLUSTER_NAME if resource_type == "CLUSTER" else None)
    if resource_type == "CLUSTER" and name != CLUSTER_NAME:
        raise BadRequest(f"the cluster resource is named {CLUSTER_NAME!r}")
    return Acl(resource_type, name,
               _choice(body.get("pattern_type"), "pattern_type", PATTERN_TYPES, "LITERAL"),
               _principal(body.get("principal")), _text(body.get("host"), "host", "*"),
               _choice(body.get("operation"), "operation", OPERATIONS),
               _choice(body.get("permission"), "permission", PERMISSIONS, "ALLOW"))


TEMPLATES = ("producer", "consumer", "admin")


def expand_template(body: Mapping[str, Any]) -> list[Acl]:
    """producer: WRITE, DESCRIBE, CREATE on the topic (or prefix), as `kafka-acls --producer`;
    consumer: READ, DESCRIBE on the topic and READ on the group, as `kafka-acls --consumer`;
    admin: ALL on topics, groups and transactional ids starting with the prefix."""
    template = body.get("template")
    if template not in TEMPLATES:
        raise BadRequest(f"template must be one of {', '.join(TEMPLATES)}, got {template!r}")
    principal = _principal(body.get("principal"))
    host = _text(body.get("host"), "host", "*")
    if template == "admin":
        prefix = _text(body.get("prefix"), "prefix")
        return [Acl(kind, prefix, "PREFIXED", principal, host, "ALL", "ALLOW")
                for kind in ("TOPIC", "GROUP", "TRANSACTIONAL_ID")]
    topic = _text(body.get("topic"), "topic")
    pattern = _choice(body.get("pattern_type"), "pattern_type", PATTERN_TYPES, "LITERAL")
    if template == "producer":
        return [Acl("TOPIC", topic, pattern, principal, host, op, "ALLOW")
                for op in ("WRITE", "DESCRIBE", "CREATE")]
    group = _text(body.get("group"), "group")
    group_pattern = _choice(body.get("group_pattern_type"), "group_pattern_type", PATTERN_TYPES,
                            "LITERAL")
    return [Acl("TOPIC", topic, pattern, principal, host, "READ", "ALLOW"),
            Acl("TOPIC", topic, pattern, principal, host, "DESCRIBE", "ALLOW"),
            Acl("GROUP", group, group_pattern, principal, host, "READ", "ALLOW")]


def _acl_of(binding: Any) -> dict[str, str]:
    kind = binding.restype.name
    return Acl("CLUSTER" if kind == "BROKER" else kind, binding.name,
               binding.resource_pattern_type.name, binding.principal, binding.host,
               binding.operation.name, binding.permission_type.name).as_dict()


class SecurityCalls(ClusterClients):
    def acls(self, filters: Mapping[str, str | None]) -> dict[str, Any]:
        """Every ACL matching the filters (None: any). {enabled: false} without an
        authorizer (the cluster answers SECURITY_DISABLED)."""
        def pick(key: str, enum: Any, any_: Any) -> Any:
            value = filters.get(key)
            return enum[value] if value else any_

        kind = filters.get("resource_type")
        args: list[Any] = [
            RESOURCE_TYPES[kind] if kind else ResourceType.ANY, filters.get("name"),
            pick("pattern_type", ResourcePatternType, ResourcePatternType.ANY),
            filters.get("principal"), filters.get("host"),
            pick("operation", AclOperation, AclOperation.ANY),
            pick("permission", AclPermissionType, AclPermissionType.ANY)]
        flt = AclBindingFilter(*args)
        future = self.admin.describe_acls(flt, request_timeout=self.timeout_s)
        try:
            bindings = future.result(self.timeout_s)
        except KafkaException as error:
            kafka_error = error.args[0] if error.args else None
            if isinstance(kafka_error, KafkaError) and \
                    kafka_error.code() == KafkaError.SECURITY_DISABLED:
                return {"enabled": False, "acls": [],
                        "reason": "the cluster has no authorizer (authorizer.class.name)"}
            raise describe_error(error, "listing ACLs") from None
        except Exception as error:
            raise describe_error(error, "listing ACLs") from None
        rows = sorted((_acl_of(b) for b in bindings),
                      key=lambda r: (r["resource_type"], r["name"], r["principal"],
                                     r["operation"]))
        return {"enabled": True, "acls": rows}

    def create_acls(self, acls: Sequence[Acl]) -> None:
        futures = self.admin.create_acls([a.binding() for a in acls],
                                         request_timeout=self.timeout_s)
        for future in futures.values():
            wait_for(future, "creating ACLs", self.timeout_s)

    def delete_acls(self, acls: Sequence[Acl]) -> list[dict[str, str]]:
        futures = self.admin.delete_acls([a.exact_filter() for a in acls],
                                         request_timeout=self.timeout_s)
        deleted: list[dict[str, str]] = []
        for future in futures.values():
            deleted += [_acl_of(b) for b in wait_for(future, "deleting ACLs", self.timeout_s)]
        return deleted

    # -- SCRAM users --------------------------------------------------------------------------

    def _check_may_describe_cluster(self, doing: str) -> None:
        """librdkafka 2.16 aborts the process (munmap_chunk: invalid pointer) on a
        DescribeUserScramCredentials answer carrying an error, so ask first, through KIP-430's
        authorized operations, whether the cluster lets this user DESCRIBE it."""
        future = self.admin.describe_cluster(include_authorized_operations=True,
                                             request_timeout=self.timeout_s)
        described = wait_for(future, "describing the cluster", self.timeout_s)
        allowed = {op.name for op in described.authorized_operations or ()}
        if not allowed & {"DESCRIBE", "ALL", "ALTER"}:
            raise not_allowed(doing, "CLUSTER_AUTHORIZATION_FAILED")

    def users(self, doing: str = "describing SCRAM users") -> list[dict[str, Any]]:
        self._check_may_describe_cluster(doing)
        future: Any = self.admin.describe_user_scram_credentials(request_timeout=self.timeout_s)
        described = wait_for(future, "describing SCRAM users", self.timeout_s)
        return [{"name": name,
                 "mechanisms": [{"mechanism": _mechanism_name(i.mechanism),
                                 "iterations": i.iterations}
                                for i in d.scram_credential_infos]}
                for name, d in sorted(described.items())]

    def _mechanisms_of(self, user: str, doing: str) -> list[str]:
        for row in self.users(doing):
            if row["name"] == user:
                return [m["mechanism"] for m in row["mechanisms"]]
        return []

    def upsert_user(self, user: str, password: str, mechanism: str, iterations: int, *,
                    create: bool) -> None:
        """create: refuse a user who already has a credential for `mechanism`; else (rotate)
        refuse one who has none."""
        doing = f"creating user {user!r}" if create else f"rotating the password of {user!r}"
        have = mechanism in self._mechanisms_of(user, doing)
        if create and have:
            raise Conflict(f"user {user!r} already has a {mechanism} credential; rotate its "
                           f"password instead")
        if not create and not have:
            raise NotFound(f"user {user!r} has no {mechanism} credential")
        upsertion = UserScramCredentialUpsertion(
            user, ScramCredentialInfo(MECHANISMS[mechanism], iterations),
            password.encode("utf-8"))
        futures = self.admin.alter_user_scram_credentials([upsertion],
                                                          request_timeout=self.timeout_s)
        for future in futures.values():
            wait_for(future, doing, self.timeout_s)

    def delete_user(self, user: str) -> list[str]:
        mechanisms = self._mechanisms_of(user, f"deleting user {user!r}")
        if not mechanisms:
            raise NotFound(f"user {user!r} has no SCRAM credentials")
        deletions: list[Any] = [UserScramCredentialDeletion(user, MECHANISMS[m])
                                for m in mechanisms]
        futures = self.admin.alter_user_scram_credentials(deletions,
                                                          request_timeout=self.timeout_s)
        for future in futures.values():
            wait_for(future, f"deleting user {user!r}", self.timeout_s)
        return mechanisms


def _mechanism_name(mechanism: Any) -> str:
    return str(getattr(mechanism, "name", mechanism)).replace("_", "-")
