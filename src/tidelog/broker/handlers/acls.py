"""CreateAcls (30), DescribeAcls (29), DeleteAcls (31), v1-3 (kio starts at v1).

Kafka's order (KafkaApis / AclApis): no authorizer configured -> SECURITY_DISABLED; the caller
needs ALTER on the cluster to create or delete ACLs and DESCRIBE on the cluster to list them
(CLUSTER_AUTHORIZATION_FAILED); a binding or filter with an invalid element -> INVALID_REQUEST
with Kafka's message. A change is written to the store (atomically) before the authorizer's
cache is replaced, so the next request on any connection sees it and a restart keeps it.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from tidelog.broker.acl_store import AclStore
from tidelog.broker.handlers.authorization import cluster_allowed
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.errors import ErrorCode, TidelogError
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclValidationError,
    PatternType,
    ResourcePattern,
    ResourceType,
    validate_binding,
)
from tidelog.security.authorizer import Authorizer

log = logging.getLogger("tidelog.broker.acls")
_NO_AUTHORIZER = "No Authorizer is configured."
MAX_ACLS = 100_000  # bounds the cache (every request reads it) and acls.json
Code = TypeVar("Code", bound=enum.IntEnum)


@dataclass(frozen=True, slots=True)
class AclDeps:
    authorizer: Authorizer | None  # None: `authorizer.class.name` is not set
    store: AclStore
    # One change at a time on this broker, so caches are swapped in the order stored.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def _enum(cls: type[Code], value: int, unknown: Code) -> Code:
    try:
        return cls(value)
    except ValueError:
        return unknown


def _filter(item: Any) -> AclBindingFilter:
    return AclBindingFilter(
        _enum(ResourceType, item.resource_type_filter, ResourceType.UNKNOWN),
        item.resource_name_filter,
        _enum(PatternType, item.pattern_type_filter, PatternType.UNKNOWN),
        item.principal_filter,
        item.host_filter,
        _enum(AclOperation, item.operation, AclOperation.UNKNOWN),
        _enum(AclPermissionType, item.permission_type, AclPermissionType.UNKNOWN),
    )


def _binding(item: Any) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            _enum(ResourceType, item.resource_type, ResourceType.UNKNOWN),
            item.resource_name,
            _enum(PatternType, item.resource_pattern_type, PatternType.UNKNOWN),
        ),
        AccessControlEntry(
            item.principal,
            item.host,
            _enum(AclOperation, item.operation, AclOperation.UNKNOWN),
            _enum(AclPermissionType, item.permission_type, AclPermissionType.UNKNOWN),
        ),
    )


def _caller_may(deps: AclDeps, context: RequestContext, operation: AclOperation) -> bool:
    assert deps.authorizer is not None
    return cluster_allowed(deps.authorizer, context, operation)


async def _commit(
    deps: AclDeps, added: frozenset[AclBinding], removed: frozenset[AclBinding]
) -> None:
    """Store first, then swap the cache: an acknowledged change survives a restart. The
    change is applied to what is stored (in a cluster another broker may have changed it
    since this cache was loaded); the other brokers learn it from the store's notices."""
    assert deps.authorizer is not None
    async with deps.lock:
        stored = await asyncio.to_thread(deps.store.update, added, removed)
        deps.authorizer.replace_acls(stored)


# --- CreateAcls -------------------------------------------------------------------------------
async def handle_create_acls(deps: AclDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.CREATE_ACLS, version)
    cls = responses.response_class(ApiKey.CREATE_ACLS, version)

    def result(code: ErrorCode, message: str | None = None) -> Any:
        return responses.build(module.AclCreationResult, error_code=code, error_message=message)

    def everyone(code: ErrorCode, message: str) -> Any:
        results = tuple(result(code, message) for _ in request.creations)
        return responses.build(cls, throttle_time=0, results=results)

    if deps.authorizer is None:
        return everyone(ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER)
    if not _caller_may(deps, context, AclOperation.ALTER):
        return everyone(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    current = deps.authorizer.cache.bindings
    added: set[AclBinding] = set()
    outcomes: list[tuple[ErrorCode, str | None]] = []
    for creation in request.creations:
        binding = _binding(creation)
        try:
            validate_binding(binding)
        except AclValidationError as error:
            outcomes.append((ErrorCode.INVALID_REQUEST, str(error)))
            continue
        added.add(binding)
        outcomes.append((ErrorCode.NONE, None))
    wanted = current | added
    if len(wanted) > MAX_ACLS:
        return everyone(ErrorCode.INVALID_REQUEST, f"more than {MAX_ACLS} ACLs")
    if added:  # even when the cache has them all: another broker may have just removed one
        try:
            await _commit(deps, frozenset(added), frozenset())
        except (OSError, TidelogError) as error:
            log.exception("cannot store ACLs")
            outcomes = [
                (ErrorCode.UNKNOWN_SERVER_ERROR, str(error))
                if code == ErrorCode.NONE
                else (code, message)
                for code, message in outcomes
            ]
    return responses.build(
        cls, throttle_time=0, results=tuple(result(code, message) for code, message in outcomes)
    )


# --- DescribeAcls -----------------------------------------------------------------------------
async def handle_describe_acls(deps: AclDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.DESCRIBE_ACLS, version)
    cls = responses.response_class(ApiKey.DESCRIBE_ACLS, version)

    def failed(code: ErrorCode, message: str) -> Any:
        return responses.build(cls, throttle_time=0, error_code=code, error_message=message)

    if deps.authorizer is None:
        return failed(ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER)
    if not _caller_may(deps, context, AclOperation.DESCRIBE):
        return failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    wanted = _filter(request)
    try:
        wanted.validate()
    except AclValidationError as error:
        return failed(ErrorCode.INVALID_REQUEST, str(error))
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in sorted(deps.authorizer.cache.bindings):
        if wanted.matches(binding):
            by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    resources = tuple(
        responses.build(
            module.DescribeAclsResource,
            resource_type=int(pattern.resource_type),
            resource_name=pattern.name,
            pattern_type=int(pattern.pattern_type),
            acls=tuple(
                responses.build(
                    module.AclDescription,
                    principal=entry.principal,
                    host=entry.host,
                    operation=int(entry.operation),
                    permission_type=int(entry.permission_type),
                )
                for entry in entries
            ),
        )
        for pattern, entries in by_pattern.items()
    )
    return responses.build(
        cls, throttle_time=0, error_code=ErrorCode.NONE, error_message=None, resources=resources
    )


# --- DeleteAcls -------------------------------------------------------------------------------
async def handle_delete_acls(deps: AclDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.DELETE_ACLS, version)
    cls = responses.response_class(ApiKey.DELETE_ACLS, version)

    def everyone(code: ErrorCode, message: str) -> Any:
        results = tuple(
            responses.build(module.DeleteAclsFilterResult, error_code=code, error_message=message)
            for _ in request.filters
        )
        return responses.build(cls, throttle_time=0, filter_results=results)

    if deps.authorizer is None:
        return everyone(ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER)
    if not _caller_may(deps, context, AclOperation.ALTER):
        return everyone(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    filters = [_filter(item) for item in request.filters]
    try:
        for wanted in filters:
            wanted.validate()
    except AclValidationError as error:
        return everyone(ErrorCode.INVALID_REQUEST, str(error))
    current = deps.authorizer.cache.bindings
    # A binding matched by several filters is reported under the first (AclAuthorizer).
    claimed: dict[AclBinding, int] = {}
    for binding in sorted(current):
        for index, wanted in enumerate(filters):
            if wanted.matches(binding):
                claimed.setdefault(binding, index)
                break
    code, message = ErrorCode.NONE, None
    if claimed:
        try:
            await _commit(deps, frozenset(), frozenset(claimed))
        except (OSError, TidelogError) as error:
            log.exception("cannot store ACLs")
            code, message = ErrorCode.UNKNOWN_SERVER_ERROR, str(error)
    results = []
    for index in range(len(filters)):
        matching = tuple(
            responses.build(
                module.DeleteAclsMatchingAcl,
                error_code=code,
                error_message=message,
                resource_type=int(binding.pattern.resource_type),
                resource_name=binding.pattern.name,
                pattern_type=int(binding.pattern.pattern_type),
                principal=binding.entry.principal,
                host=binding.entry.host,
                operation=int(binding.entry.operation),
                permission_type=int(binding.entry.permission_type),
            )
            for binding, owner in claimed.items()
            if owner == index
        )
        results.append(
            responses.build(
                module.DeleteAclsFilterResult,
                error_code=ErrorCode.NONE,
                error_message=None,
                matching_acls=matching,
            )
        )
    return responses.build(cls, throttle_time=0, filter_results=tuple(results))


def handlers(deps: AclDeps) -> HandlerTable:
    return {
        ApiKey.DESCRIBE_ACLS: partial(handle_describe_acls, deps),
        ApiKey.CREATE_ACLS: partial(handle_create_acls, deps),
        ApiKey.DELETE_ACLS: partial(handle_delete_acls, deps),
    }
