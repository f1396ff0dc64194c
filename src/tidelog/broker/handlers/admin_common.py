"""Helpers shared by the admin handler modules (admin.py, admin_configs.py).

Each topic or resource in an admin request succeeds or fails on its own: `guard` runs one
entry's work and turns its KafkaError (or a storage OSError) into that entry's error fields.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from tidelog.broker.config import BrokerConfig
from tidelog.broker.handlers.authorization import REFUSAL, allowed
from tidelog.broker.handlers.context import RequestContext
from tidelog.broker.internal_topics import INTERNAL_TOPICS
from tidelog.broker.metadata import TopicInfo
from tidelog.broker.services import ClusterIdentity
from tidelog.broker.topic_registry import TopicRegistry
from tidelog.errors import ErrorCode, KafkaError
from tidelog.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from tidelog.security.authorizer import Authorizer

log = logging.getLogger("tidelog.broker.admin")
Entry = TypeVar("Entry")


@dataclass(frozen=True, slots=True)
class AdminDeps:
    config: BrokerConfig
    identity: ClusterIdentity
    topics: TopicRegistry
    authorizer: Authorizer | None = None  # None: no ACL checks (authorizer.class.name unset)
    # A cluster's (controller id, live brokers as (id, host, port)) on a listener, for
    # DescribeCluster; None on a single node (this broker is all there is).
    live_brokers: Callable[[str], tuple[int, list[tuple[int, str, int]]]] | None = None


def require(
    deps: AdminDeps,
    context: RequestContext | None,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
) -> None:
    """Refuse one entry with TOPIC_/CLUSTER_AUTHORIZATION_FAILED unless the ACLs allow it
    (authorization.REQUIRED). No authorizer, or no request context: nothing to check."""
    if deps.authorizer is None or context is None:
        return
    if resource_type == ResourceType.CLUSTER:
        name = CLUSTER_NAME
    if not allowed(deps.authorizer, context, operation, resource_type, name):
        raise KafkaError(REFUSAL[resource_type])


def failure(error: KafkaError) -> dict[str, Any]:
    return {"error_code": error.code, "error_message": error.message or error.code.name}


def guard(work: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """Run one entry's work; its KafkaError (or a storage OSError) becomes that entry's error."""
    try:
        return work(*args)
    except KafkaError as error:
        return failure(error)
    except OSError as error:
        log.exception("admin operation failed on storage")
        return failure(KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(error)))


def duplicates(names: Iterable[Any]) -> set[Any]:
    return {name for name, count in Counter(names).items() if count > 1}


def each_entry(
    entries: Iterable[Entry],
    key: Callable[[Entry], Hashable],
    work: Callable[[Entry], dict[str, Any]],
    duplicate: str,
) -> list[tuple[Entry, dict[str, Any]]]:
    """The shape of every admin request: each entry succeeds or fails on its own (`guard`),
    and a key that appears twice fails with INVALID_REQUEST without being run, answered once
    (Kafka keys its results by name, so a repeated name has one answer)."""
    listed = list(entries)
    repeated = duplicates(key(entry) for entry in listed)
    answered: set[Hashable] = set()
    results = []
    for entry in listed:
        entry_key = key(entry)
        if entry_key in repeated:
            if entry_key in answered:
                continue
            answered.add(entry_key)
            results.append((entry, failure(KafkaError(ErrorCode.INVALID_REQUEST, duplicate))))
        else:
            results.append((entry, guard(work, entry)))
    return results


def is_internal(info: TopicInfo) -> bool:
    return info.internal or info.name in INTERNAL_TOPICS


def require_topic(topics: TopicRegistry, name: str) -> TopicInfo:
    info = topics.get(name)
    if info is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
    return info
