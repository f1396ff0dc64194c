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
from kio.schema.errors import ErrorCode

from tidelog.console.cluster_clients import ClusterClients
from tidelog.console.errors import (
    AUTHORIZATION_CODES,
    BadRequest,
    ClusterError,
    Conflict,
    NotFound,
    not_allowed,
    wait_for,
)
from tidelog.console.kafka_raw import schema_module

CLUSTER_NAME = "kafka-cluster"
DESCRIBE_ACLS, DESCRIBE_USER_SCRAM_CREDENTIALS = 29, 50
SECURITY_DISABLED = 54
RESOURCE_TYPES = {"TOPIC": ResourceType.TOPIC, "GROUP": ResourceType.GROUP,
                  "CLUSTER": ResourceType.BROKER, "TRANSACTIONAL_ID": ResourceType.TRANSACTIONAL_ID}
_RESOURCE_NAMES = {int(v.value): k for k, v in RESOURCE_TYPES.items()}
PATTERN_TYPES = ("LITERAL", "PREFIXED")
OPERATIONS = ("ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
              "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE")
PERMISSIONS = ("ALLOW", "DENY")
MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
              "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
_MECHANISM_NAMES = {int(v.value): k for k, v in MECHANISMS.items()}
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
        authorizer (SECURITY_DISABLED). Sent by hand (DescribeAcls v1): librdkafka 2.16 drops
        the answer's top-level error, so a refusal would read as "no ACLs"."""
        def code(key: str, enum: Any) -> int:
            value = filters.get(key)
            return int(enum[value].value) if value else 1  # 1: ANY

        kind = filters.get("resource_type")
        module = schema_module(DESCRIBE_ACLS, 1)
        request = module.DescribeAclsRequest(
            resource_type_filter=int(RESOURCE_TYPES[kind].value) if kind else 1,
            resource_name_filter=filters.get("name"),
            pattern_type_filter=code("pattern_type", ResourcePatternType),
            principal_filter=filters.get("principal"), host_filter=filters.get("host"),
            operation=code("operation", AclOperation),
            permission_type=code("permission", AclPermissionType))
        with self.raw() as conn:
            answer = conn.call(DESCRIBE_ACLS, 1, request)
        error = answer.error_code.value
        if error == SECURITY_DISABLED:
            return {"enabled": False, "acls": [],
                    "reason": "the cluster has no authorizer (authorizer.class.name)"}
        _raise_for(error, "listing ACLs", answer.error_message)
        rows = [Acl(_RESOURCE_NAMES.get(int(r.resource_type), str(r.resource_type)),
                    r.resource_name, ResourcePatternType(int(r.pattern_type)).name,
                    a.principal, a.host, AclOperation(int(a.operation)).name,
                    AclPermissionType(int(a.permission_type)).name).as_dict()
                for r in answer.resources for a in r.acls]
        rows.sort(key=lambda r: (r["resource_type"], r["name"], r["principal"], r["operation"]))
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

    def users(self, doing: str = "describing SCRAM users") -> list[dict[str, Any]]:
        """Sent by hand (DescribeUserScramCredentials v0): librdkafka 2.16 aborts the process
        (munmap_chunk: invalid pointer) on an answer carrying an error, e.g. a refusal."""
        module = schema_module(DESCRIBE_USER_SCRAM_CREDENTIALS, 0)
        with self.raw() as conn:
            answer = conn.call(DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
                               module.DescribeUserScramCredentialsRequest(users=None))
        _raise_for(answer.error_code.value, doing, answer.error_message)
        return [{"name": r.user,
                 "mechanisms": [{"mechanism": _MECHANISM_NAMES.get(int(i.mechanism),
                                                                   str(i.mechanism)),
                                 "iterations": int(i.iterations)}
                                for i in r.credential_infos]}
                for r in sorted(answer.results, key=lambda r: r.user)
                if r.error_code.value == 0]

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


def _raise_for(code: int, doing: str, message: str | None) -> None:
    if code == 0:
        return
    name = _error_name(code)
    if code in {int(c) for c in AUTHORIZATION_CODES}:
        raise not_allowed(doing, name)
    raise ClusterError(f"{doing}: {message or name}")


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error {code}"
