"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), v0: the SCRAM
users of a single node's credential store (`<data-dir>/scram-credentials.json`), so
`tidelog users add --bootstrap`, kafka-configs' `--add-config 'SCRAM-SHA-256=[...]'` and
confluent-kafka's alter_user_scram_credentials work. Validation and error codes as Kafka's
ScramControlManager: RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE, UNSUPPORTED_SASL_MECHANISM,
UNACCEPTABLE_CREDENTIAL, one result per user.

The store is read, changed and replaced atomically in a worker thread, one alteration at a
time (`ScramUsersDeps.lock`); authentications see the new file at their next lookup.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from tidelog.broker.handlers.authorization import cluster_allowed
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.errors import ErrorCode
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.security.acl import AclOperation
from tidelog.security.authorizer import Authorizer
from tidelog.security.scram_credentials import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    Users,
    credential_from_salted_password,
    read_store,
    write_store,
)

# Kafka's ScramMechanism type ids (0 is UNKNOWN)
MECHANISM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
_MECHANISM_NAMES = {number: name for name, number in MECHANISM_IDS.items()}


class UserStore(Protocol):
    """Where a cluster keeps its users (ZooKeeper's /config/users, cluster/zk_scram.py).
    Blocking calls, run on a worker thread."""

    def read(self) -> Users: ...

    def write(self, users: Users) -> None: ...


@dataclass(frozen=True, slots=True)
class ScramUsersDeps:
    data_dir: Path
    authorizer: Authorizer | None = None  # None: no ACL checks (authorizer.class.name unset)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # A cluster: the users live in `store`, and `on_change` hands the new set to this broker's
    # credential cache at once (the other brokers follow ZooKeeper's change notice).
    store: UserStore | None = None
    on_change: Callable[[Users], None] | None = None


def _read(deps: ScramUsersDeps) -> Users:
    return deps.store.read() if deps.store is not None else read_store(deps.data_dir)


def _write(deps: ScramUsersDeps, users: Users) -> None:
    if deps.store is not None:
        deps.store.write(users)
    else:
        write_store(deps.data_dir, users)


def _refused(deps: ScramUsersDeps, context: RequestContext, operation: AclOperation) -> bool:
    """Describe needs DESCRIBE on the cluster, Alter needs ALTER (KafkaApis)."""
    return deps.authorizer is not None and not cluster_allowed(
        deps.authorizer, context, operation
    )


async def handle_describe(deps: ScramUsersDeps, context: RequestContext, request: Any) -> Any:
    module = responses.response_module(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0)
    if _refused(deps, context, AclOperation.DESCRIBE):
        # Kafka's getErrorResponse: the error and the exception's message, no results.
        # (librdkafka 2.16 aborts the process on this answer, from Kafka too: docs/security.md.)
        return responses.build(
            responses.response_class(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0),
            throttle_time=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message="Cluster authorization failed.", results=(),
        )
    users = await asyncio.to_thread(_read, deps)
    wanted = [u.name for u in request.users] if request.users else sorted(users)
    counts = Counter(wanted)
    results = []
    for name in dict.fromkeys(wanted):
        error, message, infos = ErrorCode.NONE, None, ()
        if counts[name] > 1:
            error = ErrorCode.DUPLICATE_RESOURCE
            message = (
                f"Cannot describe SCRAM credentials for the same user twice in a single request:"
                f" {name}"
            )
        elif not users.get(name):
            error = ErrorCode.RESOURCE_NOT_FOUND
            message = f"Attempt to describe a user credential that does not exist: {name}"
        else:
            infos = tuple(
                responses.build(module.CredentialInfo, mechanism=MECHANISM_IDS[mechanism],
                                iterations=credential.iterations)
                for mechanism, credential in sorted(users[name].items())
            )
        results.append(responses.build(
            module.DescribeUserScramCredentialsResult, user=name, error_code=error,
            error_message=message, credential_infos=infos,
        ))
    return responses.build(
        responses.response_class(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0),
        throttle_time=0, error_code=ErrorCode.NONE, error_message=None, results=tuple(results),
    )


async def handle_alter(deps: ScramUsersDeps, context: RequestContext, request: Any) -> Any:
    module = responses.response_module(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0)
    if _refused(deps, context, AclOperation.ALTER):
        names = dict.fromkeys(
            [d.name for d in request.deletions] + [u.name for u in request.upsertions]
        )
        return responses.build(
            responses.response_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0),
            throttle_time=0,
            results=tuple(
                responses.build(module.AlterUserScramCredentialsResult, user=name,
                                error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                error_message=None)
                for name in names
            ),
        )
    async with deps.lock:
        users = await asyncio.to_thread(_read, deps)
        outcome = _alter(users, request)
        if any(error is ErrorCode.NONE for error, _ in outcome.values()):
            await asyncio.to_thread(_write, deps, users)
            if deps.on_change is not None:
                deps.on_change(users)
    results = tuple(
        responses.build(module.AlterUserScramCredentialsResult, user=name, error_code=error,
                        error_message=message)
        for name, (error, message) in outcome.items()
    )
    return responses.build(
        responses.response_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0),
        throttle_time=0, results=results,
    )


def _alter(users: Users, request: Any) -> dict[str, tuple[ErrorCode, str | None]]:
    """Apply the request to `users` in place; per user: (error, message). A user with any
    invalid alteration gets none of its alterations applied."""
    changes = [(d.name, int(d.mechanism), None) for d in request.deletions]
    changes += [(u.name, int(u.mechanism), u) for u in request.upsertions]
    seen = Counter((name, mechanism) for name, mechanism, _ in changes)
    errors: dict[str, tuple[ErrorCode, str]] = {}
    for name, mechanism, upsertion in changes:
        if name in errors:
            continue
        mechanism_name = _MECHANISM_NAMES.get(mechanism)
        if not name:
            errors[name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif seen[(name, mechanism)] > 1:
            errors[name] = (ErrorCode.DUPLICATE_RESOURCE,
                            "A user credential cannot be altered twice in the same request")
        elif mechanism_name is None:
            errors[name] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif upsertion is None and mechanism_name not in users.get(name, {}):
            errors[name] = (ErrorCode.RESOURCE_NOT_FOUND,
                            "Attempt to delete a user credential that does not exist")
        elif upsertion is not None and int(upsertion.iterations) < MIN_ITERATIONS:
            errors[name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL,
                            "Too few iterations")
        elif upsertion is not None and int(upsertion.iterations) > MAX_ITERATIONS:
            errors[name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL,
                            "Too many iterations")
        elif upsertion is not None and not (upsertion.salt and upsertion.salted_password):
            errors[name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and password are required")
    outcome: dict[str, tuple[ErrorCode, str | None]] = {}
    for name, mechanism, upsertion in changes:
        if name in errors:
            outcome[name] = errors[name]
            continue
        outcome[name] = (ErrorCode.NONE, None)
        mechanism_name = _MECHANISM_NAMES[mechanism]
        if upsertion is None:
            del users[name][mechanism_name]
            if not users[name]:
                del users[name]
        else:
            users.setdefault(name, {})[mechanism_name] = credential_from_salted_password(
                mechanism_name, bytes(upsertion.salt), int(upsertion.iterations),
                bytes(upsertion.salted_password),
            )
    return outcome


def handlers(deps: ScramUsersDeps) -> HandlerTable:
    return {
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: partial(handle_describe, deps),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: partial(handle_alter, deps),
    }
