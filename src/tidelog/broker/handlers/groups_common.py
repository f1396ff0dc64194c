"""Dependencies and helpers shared by the group handler modules (groups.py, group_admin.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tidelog.broker.groups.service import GroupService
from tidelog.broker.handlers.authorization import allowed
from tidelog.broker.handlers.context import RequestContext
from tidelog.broker.topic_registry import TopicRegistry
from tidelog.errors import ErrorCode, KafkaError
from tidelog.protocol import responses
from tidelog.security.acl import AclOperation, ResourceType
from tidelog.security.authorizer import Authorizer

# group id -> (error, (node id, host, port)) of its coordinator: this node on a single node,
# the leader of the group's `__consumer_offsets` partition in a cluster.
# (key, the request's listener) -> (error, (node id, host, port)) as that listener advertises
CoordinatorLocator = Callable[[str, str], tuple[ErrorCode, tuple[int, str, int]]]


@dataclass(frozen=True, slots=True)
class GroupDeps:
    topics: TopicRegistry
    groups: Callable[[], GroupService]  # loads the coordinator on first use
    find_coordinator: CoordinatorLocator
    authorizer: Authorizer | None = None  # None: no ACL checks (authorizer.class.name unset)
    # FindCoordinator key_type 1 (transactional ids); None: `find_coordinator` answers both
    find_transaction_coordinator: CoordinatorLocator | None = None
    # FindCoordinator key_type 2 (share coordinator, "group:topicId:partition"); None: refused
    find_share_coordinator: CoordinatorLocator | None = None


def may(
    deps: GroupDeps,
    context: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
) -> bool:
    """True with no authorizer; else what the ACLs say (authorization.REQUIRED)."""
    authorizer = deps.authorizer
    return authorizer is None or allowed(authorizer, context, operation, resource_type, name)


def require_group(
    deps: GroupDeps, context: RequestContext, operation: AclOperation, group_id: str
) -> None:
    """Refuse the whole request with GROUP_AUTHORIZATION_FAILED (its top-level error)."""
    if deps.authorizer is not None and not allowed(
        deps.authorizer, context, operation, ResourceType.GROUP, group_id
    ):
        raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED)


def classes(api_key: int, version: int) -> Any:
    """The kio module of a response version (for its nested classes)."""
    return responses.response_module(api_key, version)


def response(api_key: int, version: int, **fields: Any) -> Any:
    return responses.build(responses.response_class(api_key, version), throttle_time=0, **fields)
