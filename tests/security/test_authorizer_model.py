"""The authorizer against a tiny reference model of Kafka's rules, written here independently:
random (principal, host, resource, operation, ACL set) cases; a wrongful grant is a case the
authorizer allows and the model refuses, a wrongful denial the reverse. Both must be zero."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tidelog.security.authorizer import Authorizer
from tidelog.security.principal import KafkaPrincipal

NAMES = ["a", "ab", "abc", "b", "ba", "*", "kafka-cluster"]
PRINCIPALS = ["User:alice", "User:bob", "User:*", "Group:alice", "User:ANONYMOUS"]
HOSTS = ["127.0.0.1", "10.0.0.1", "*"]
TYPES = [ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER]
STORED_OPERATIONS = [op for op in AclOperation if op >= AclOperation.ALL]
ASKED_OPERATIONS = [op for op in AclOperation if op > AclOperation.ALL]

# The model: plain tuples, spelled-out rules (Kafka's docs/security.html "Authorization").
Acl = tuple[int, str, int, str, str, int, int]  # type, name, pattern, principal, host, op, perm


def model(
    acls: list[Acl],
    super_users: set[str],
    everyone: bool,
    principal: str,
    host: str,
    op: int,
    rtype: int,
    name: str,
) -> bool:
    if principal in super_users:
        return True
    applying = []
    for a_type, a_name, a_pattern, a_principal, a_host, a_op, a_perm in acls:
        if a_type != rtype:
            continue
        prefixed = a_pattern == 4
        if (prefixed and name[: len(a_name)] == a_name) or (not prefixed and a_name in (name, "*")):
            applying.append((a_principal, a_host, a_op, a_perm))
    if len(applying) == 0:
        return everyone
    implied = {op}
    if op == 8:  # DESCRIBE <- READ WRITE DELETE ALTER
        implied |= {3, 4, 6, 7}
    if op == 10:  # DESCRIBE_CONFIGS <- ALTER_CONFIGS
        implied |= {11}

    def who_where(a_principal: str, a_host: str) -> bool:
        return a_principal in (principal, "User:*") and a_host in (host, "*")

    for a_principal, a_host, a_op, a_perm in applying:
        if a_perm == 2 and who_where(a_principal, a_host) and a_op in (op, 2):
            return False
    return any(
        a_perm == 3 and who_where(a_principal, a_host) and (a_op in implied or a_op == 2)
        for a_principal, a_host, a_op, a_perm in applying
    )


def random_case(rng: random.Random) -> tuple[list[Acl], set[str], bool, str, str, int, int, str]:
    acls: list[Acl] = []
    for _ in range(rng.randint(0, 6)):
        rtype = rng.choice(TYPES)
        pattern = rng.choice([3, 4])
        name = rng.choice([n for n in NAMES if not (pattern == 4 and n == "*")])
        acls.append(
            (
                rtype,
                name,
                pattern,
                rng.choice(PRINCIPALS),
                rng.choice(HOSTS),
                rng.choice(STORED_OPERATIONS),
                rng.choice([2, 3]),
            )
        )
    super_users = {"User:bob"} if rng.random() < 0.1 else set()
    return (
        acls,
        super_users,
        rng.random() < 0.2,
        rng.choice([p for p in PRINCIPALS if p != "User:*"]),
        rng.choice(["127.0.0.1", "10.0.0.1"]),
        rng.choice(ASKED_OPERATIONS),
        rng.choice(TYPES),
        rng.choice([n for n in NAMES if n != "*"]),
    )


def decide(case: tuple[list[Acl], set[str], bool, str, str, int, int, str]) -> bool:
    acls, super_users, everyone, principal, host, op, rtype, name = case
    bindings = [
        AclBinding(
            ResourcePattern(ResourceType(t), n, PatternType(p)),
            AccessControlEntry(who, where, AclOperation(o), AclPermissionType(perm)),
        )
        for t, n, p, who, where, o, perm in acls
    ]
    authorizer = Authorizer(super_users, everyone, bindings)
    return authorizer.authorize(
        KafkaPrincipal.parse(principal), host, AclOperation(op), ResourceType(rtype), name
    )


def test_random_cases_agree_with_the_reference_model() -> None:
    rng = random.Random(20261124)
    cases = 5000
    wrongful_grants = wrongful_denials = grants = 0
    for _ in range(cases):
        case = random_case(rng)
        expected = model(*case)
        actual = decide(case)
        grants += actual
        wrongful_grants += actual and not expected
        wrongful_denials += expected and not actual
    print(
        f"\n{cases} cases, {grants} grants, wrongful grants {wrongful_grants},"
        f" wrongful denials {wrongful_denials}"
    )
    # both outcomes must be well represented, or the cases test nothing
    assert cases * 0.15 < grants < cases * 0.85
    assert (wrongful_grants, wrongful_denials) == (0, 0)


@settings(max_examples=500)
@given(st.randoms(use_true_random=False))
def test_hypothesis_cases_agree_with_the_reference_model(rng: random.Random) -> None:
    case = random_case(rng)
    assert decide(case) == model(*case)


def test_authorized_operations_bits() -> None:
    allow_read = AclBinding(
        ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL),
        AccessControlEntry("User:*", "*", AclOperation.READ, AclPermissionType.ALLOW),
    )
    authorizer = Authorizer(bindings=[allow_read])
    bits = authorizer.authorized_operations(
        KafkaPrincipal.parse("User:x"), "1.2.3.4", ResourceType.TOPIC, "t"
    )
    assert bits == (1 << AclOperation.READ) | (1 << AclOperation.DESCRIBE)


def test_authorize_by_resource_type_means_some_topic_is_allowed() -> None:
    """KIP-679's question (InitProducerId: WRITE on any topic?) answered by Kafka's shortcut
    must equal its meaning: some topic name exists that `authorize` allows. Candidates: every
    name in the ACLs, each extended by a suffix no ACL names, and a fresh name."""
    rng = random.Random(679)
    cases = 3000
    wrongful_grants = wrongful_denials = grants = 0
    for _ in range(cases):
        acls, super_users, _everyone, principal, host, _op, _rtype, _name = random_case(rng)
        acls = [(ResourceType.TOPIC, *acl[1:]) for acl in acls]  # all on topics
        op = rng.choice([AclOperation.WRITE, AclOperation.READ, AclOperation.CREATE])
        bindings = [
            AclBinding(
                ResourcePattern(ResourceType(t), n, PatternType(p)),
                AccessControlEntry(who, where, AclOperation(o), AclPermissionType(perm)),
            )
            for t, n, p, who, where, o, perm in acls
        ]
        authorizer = Authorizer(super_users, False, bindings)
        who = KafkaPrincipal.parse(principal)
        names = {acl[1] for acl in acls if acl[1] != "*"}
        candidates = names | {f"{name}~fresh" for name in names} | {"~fresh"}
        meaning = any(
            authorizer.authorize(who, host, op, ResourceType.TOPIC, name) for name in candidates
        )
        shortcut = authorizer.authorize_by_resource_type(who, host, op, ResourceType.TOPIC)
        grants += shortcut
        wrongful_grants += shortcut and not meaning
        wrongful_denials += meaning and not shortcut
    print(f"\nby resource type: {cases} cases, {grants} grants, wrongful grants"
          f" {wrongful_grants}, wrongful denials {wrongful_denials}")
    assert cases * 0.05 < grants < cases * 0.9
    assert (wrongful_grants, wrongful_denials) == (0, 0)
