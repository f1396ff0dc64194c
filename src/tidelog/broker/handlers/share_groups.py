"""Share-group APIs: ShareGroupHeartbeat (76, v1), ShareGroupDescribe (77, v1), and share groups
in ListGroups / DeleteGroups and group configs in DescribeConfigs / IncrementalAlterConfigs.

The rules live in `coordinator/share_group.py`; this module translates. ListGroups, DeleteGroups,
DescribeConfigs and IncrementalAlterConfigs are the consumer-group / admin handlers wrapped:
share groups and GROUP config resources (type 32) are answered here, everything else by the
wrapped handler, in the request's order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from tidelog.broker.handlers.authorization import Op, Type, allowed
from tidelog.broker.handlers.context import (
    ALL_GROUP_OPERATIONS,
    Handler,
    HandlerTable,
    RequestContext,
    authorized_operations,
)
from tidelog.broker.share.dead_letter import TOPIC_CONFIG as DEAD_LETTER_TOPIC_CONFIG
from tidelog.broker.share.filtering import DEFAULTS as TIDELOG_DEFAULTS
from tidelog.broker.share.filtering import TIDELOG_GROUP_CONFIGS, check_config
from tidelog.broker.share.service import GROUP_CONFIG_NAMES, ShareService
from tidelog.broker.topic_registry import TopicRegistry
from tidelog.coordinator.share_group import ShareHeartbeatRequest
from tidelog.errors import ErrorCode
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.security.authorizer import Authorizer

GROUP_RESOURCE = 32  # ConfigResource.Type.GROUP
_SET, _DELETE = 0, 1
_GROUP_CONFIG_SOURCE, _DEFAULT_SOURCE = 8, 5  # DescribeConfigs config_source values


@dataclass(frozen=True, slots=True)
class ShareGroupDeps:
    topics: TopicRegistry
    shares: Callable[[], ShareService]  # starts the service on first use
    started: Callable[[], ShareService | None]  # the service if started (never starts it)
    # True when the id names a classic or consumer group (a share group cannot take it).
    other_group: Callable[[str], bool] = lambda _group_id: False
    authorizer: Authorizer | None = None
    # Cluster mode: (error, coordinator id) of the group on the asking listener; a share
    # group's coordinator is its group coordinator (FindCoordinator key_type 0).
    coordinator: Callable[[str, str], tuple[ErrorCode, int]] | None = None
    node_id: int = -1
    # Cluster mode: group configs altered here are sent on to every other live broker
    # (each keeps them in its data directory); the request as received, its client id.
    forward_configs: Callable[[Any, int, str], Awaitable[None]] | None = None


def _not_coordinator(deps: ShareGroupDeps, context: RequestContext, group_id: str
                     ) -> ErrorCode | None:
    """NOT_COORDINATOR (or the lookup's error) when another broker coordinates the group."""
    if deps.coordinator is None:
        return None
    error, node = deps.coordinator(group_id, context.listener_name)
    if error is not ErrorCode.NONE:
        return error
    return None if node == deps.node_id else ErrorCode.NOT_COORDINATOR


def _may(deps: ShareGroupDeps, context: RequestContext, op: Any, group_id: str) -> bool:
    return deps.authorizer is None or allowed(deps.authorizer, context, op, Type.GROUP, group_id)


def _response(api_key: int, version: int, **fields: Any) -> Any:
    return responses.build(responses.response_class(api_key, version), throttle_time=0, **fields)


async def handle_share_group_heartbeat(
    deps: ShareGroupDeps, context: RequestContext, request: Any
) -> Any:
    version = context.header.api_version
    if not _may(deps, context, Op.READ, request.group_id):
        return _response(ApiKey.SHARE_GROUP_HEARTBEAT, version,
                         error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, member_epoch=0,
                         heartbeat_interval=0)
    names = request.subscribed_topic_names
    if names and deps.authorizer is not None and not all(
        allowed(deps.authorizer, context, Op.DESCRIBE, Type.TOPIC, name) for name in names
    ):
        return _response(ApiKey.SHARE_GROUP_HEARTBEAT, version,
                         error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, member_epoch=0,
                         heartbeat_interval=0)
    if deps.other_group(request.group_id):  # Kafka: the id is taken by another group type
        return _response(ApiKey.SHARE_GROUP_HEARTBEAT, version,
                         error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                         error_message=f"Group {request.group_id} is not a share group.",
                         member_epoch=0, heartbeat_interval=0)
    elsewhere = _not_coordinator(deps, context, request.group_id)
    if elsewhere is not None:
        return _response(ApiKey.SHARE_GROUP_HEARTBEAT, version, error_code=elsewhere,
                         member_epoch=0, heartbeat_interval=0)
    service = deps.shares()
    answer = service.heartbeat(ShareHeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=int(request.member_epoch),
        rack_id=request.rack_id,
        subscribed_topic_names=None if names is None else tuple(names),
        client_id=context.header.client_id or "",
        client_host=f"/{context.client_host}",
    ))
    module = responses.response_module(ApiKey.SHARE_GROUP_HEARTBEAT, version)
    assignment = None
    if answer.assignment is not None:
        topic_partitions = []
        for name, partitions in answer.assignment:
            info = deps.topics.get(name)
            if info is not None:
                topic_partitions.append(responses.build(
                    module.TopicPartitions, topic_id=info.topic_id, partitions=partitions))
        assignment = responses.build(module.Assignment, topic_partitions=tuple(topic_partitions))
    return _response(
        ApiKey.SHARE_GROUP_HEARTBEAT, version,
        error_code=answer.error, error_message=answer.message, member_id=answer.member_id,
        member_epoch=answer.member_epoch,
        # Kafka sends the interval only to members in the group (0 on errors and leaves).
        heartbeat_interval=(service.heartbeat_interval_ms(request.group_id)
                            if answer.error is ErrorCode.NONE and answer.member_epoch >= 0
                            else 0),
        assignment=assignment,
    )


async def handle_share_group_describe(
    deps: ShareGroupDeps, context: RequestContext, request: Any
) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.SHARE_GROUP_DESCRIBE, version)
    service = deps.shares()
    described = []
    for group_id in request.group_ids:
        if not _may(deps, context, Op.DESCRIBE, group_id):
            described.append(responses.build(
                module.DescribedGroup, group_id=group_id,
                error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        elsewhere = _not_coordinator(deps, context, group_id)
        if elsewhere is not None:
            described.append(responses.build(module.DescribedGroup, group_id=group_id,
                                              error_code=elsewhere))
            continue
        group = service.coordinator.groups.get(group_id)
        if group is None:
            described.append(responses.build(
                module.DescribedGroup, group_id=group_id,
                error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                error_message=f"Group {group_id} not found."))
            continue
        members = []
        for member in group.members.values():
            topic_partitions = []
            for name, partitions in member.assignment:
                info = deps.topics.get(name)
                if info is not None:
                    topic_partitions.append(responses.build(
                        module.TopicPartitions, topic_id=info.topic_id, topic_name=name,
                        partitions=partitions))
            members.append(responses.build(
                module.Member, member_id=member.member_id, rack_id=member.value.rack_id,
                member_epoch=member.member_epoch, client_id=member.value.client_id,
                client_host=member.value.client_host,
                subscribed_topic_names=member.value.subscribed_topic_names,
                assignment=responses.build(module.Assignment,
                                           topic_partitions=tuple(topic_partitions)),
            ))
        described.append(responses.build(
            module.DescribedGroup, error_code=ErrorCode.NONE, group_id=group_id,
            group_state=group.state, group_epoch=group.epoch, assignment_epoch=group.epoch,
            assignor_name="simple", members=tuple(members),
            authorized_operations=authorized_operations(
                request.include_authorized_operations, ALL_GROUP_OPERATIONS),
        ))
    return _response(ApiKey.SHARE_GROUP_DESCRIBE, version, groups=tuple(described))


# ------------------------------------------------------------------------- wrapped handlers
async def handle_list_groups(
    deps: ShareGroupDeps, inner: Handler, context: RequestContext, request: Any
) -> Any:
    answer = await inner(context, request)
    types = {t.lower() for t in (getattr(request, "types_filter", ()) or ())}
    states = {s.lower() for s in (getattr(request, "states_filter", ()) or ())}
    service = deps.started()
    if (types and "share" not in types) or service is None:
        return answer
    module = responses.response_module(ApiKey.LIST_GROUPS, context.header.api_version)
    extra = []
    for group in service.coordinator.groups.values():
        if states and group.state.lower() not in states:
            continue
        if not _may(deps, context, Op.DESCRIBE, group.group_id):
            continue
        extra.append(responses.build(
            module.ListedGroup, group_id=group.group_id, protocol_type="share",
            group_state=group.state, group_type="share"))
    return dataclasses.replace(answer, groups=tuple(answer.groups) + tuple(extra))


async def handle_delete_groups(
    deps: ShareGroupDeps, inner: Handler, context: RequestContext, request: Any
) -> Any:
    service = deps.started()
    if service is None:
        return await inner(context, request)
    share_ids = [g for g in request.groups_names if g in service.coordinator.groups]
    others = [g for g in request.groups_names if g not in service.coordinator.groups]
    answer = await inner(context, dataclasses.replace(request, groups_names=tuple(others)))
    module = responses.response_module(ApiKey.DELETE_GROUPS, context.header.api_version)
    extra = []
    for group_id in share_ids:
        if not _may(deps, context, Op.DELETE, group_id):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        else:
            error = await service.delete_group(group_id)
        extra.append(responses.build(module.DeletableGroupResult, group_id=group_id,
                                     error_code=error))
    by_id = {r.group_id: r for r in tuple(answer.results) + tuple(extra)}
    ordered = tuple(by_id[g] for g in dict.fromkeys(request.groups_names) if g in by_id)
    return dataclasses.replace(answer, results=ordered)


def _check_group_config(service: ShareService, name: str, value: str | None) -> str | None:
    """None when acceptable, else the INVALID_CONFIG message (Kafka's GroupConfig checks)."""
    config = service.broker.config
    if name not in GROUP_CONFIG_NAMES:
        return f"Unknown group config name: {name}"
    if value is None:
        return None
    if name == "share.auto.offset.reset":
        ok = value in ("earliest", "latest")
        return None if ok else f"Invalid value {value} for configuration {name}"
    if name == DEAD_LETTER_TOPIC_CONFIG:
        prefix = config.errors_deadletterqueue_topic_name_prefix
        ok = value.startswith(prefix) and len(value) > len(prefix)
        return None if ok else f"{name} must start with {prefix!r}"
    if name in TIDELOG_GROUP_CONFIGS:  # retry back-off and filters
        return check_config(name, value)
    if name == "share.isolation.level":
        ok = value in ("read_committed", "read_uncommitted")
        return None if ok else f"Invalid value {value} for configuration {name}"
    try:
        number = int(value)
    except ValueError:
        return f"Invalid value {value} for configuration {name}: Not a number of type INT"
    # Kafka's GroupConfig: the session timeout and heartbeat interval within the broker's
    # group.share.min/max.* bounds, with its words.
    limits = {
        "share.session.timeout.ms": (
            ("group.share.min.session.timeout.ms", config.group_share_min_session_timeout_ms),
            ("group.share.max.session.timeout.ms", config.group_share_max_session_timeout_ms)),
        "share.heartbeat.interval.ms": (
            ("group.share.min.heartbeat.interval.ms",
             config.group_share_min_heartbeat_interval_ms),
            ("group.share.max.heartbeat.interval.ms",
             config.group_share_max_heartbeat_interval_ms)),
    }.get(name)
    if limits is not None:
        (low_name, low), (high_name, high) = limits
        if number < low:
            return f"{name} must be greater than or equal to {low_name}"
        if number > high:
            return f"{name} must be less than or equal to {high_name}"
        return None
    bounds = {
        "share.record.lock.duration.ms": (config.group_share_min_record_lock_duration_ms,
                                          config.group_share_max_record_lock_duration_ms),
        "share.delivery.count.limit": (2, 10),
    }[name]
    if not bounds[0] <= number <= bounds[1]:
        return f"{name} must be between {bounds[0]} and {bounds[1]}"
    return None


def _alter_group(
    service: ShareService, resource: Any, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    configs = dict(service.group_configs.get(resource.resource_name, {}))
    for entry in resource.configs:
        operation = int(entry.config_operation)
        value = entry.value if operation == _SET else None
        if operation not in (_SET, _DELETE):
            return ErrorCode.INVALID_CONFIG, f"{entry.name} is not a list config"
        problem = _check_group_config(service, entry.name, value)
        if problem is not None:
            return ErrorCode.INVALID_CONFIG, problem
        if value is None:
            configs.pop(entry.name, None)
        else:
            configs[entry.name] = value
    if not validate_only:
        service.set_group_configs(resource.resource_name, configs)
    return ErrorCode.NONE, None


async def handle_incremental_alter_configs(
    deps: ShareGroupDeps, inner: Handler, context: RequestContext, request: Any
) -> Any:
    groups = [r for r in request.resources if r.resource_type == GROUP_RESOURCE]
    if not groups:
        return await inner(context, request)
    others = tuple(r for r in request.resources if r.resource_type != GROUP_RESOURCE)
    answer = await inner(context, dataclasses.replace(request, resources=others))
    module = responses.response_module(ApiKey.INCREMENTAL_ALTER_CONFIGS,
                                       context.header.api_version)
    service = deps.shares()
    extra = []
    for resource in groups:
        if not _may(deps, context, Op.ALTER_CONFIGS, resource.resource_name):
            error, message = ErrorCode.GROUP_AUTHORIZATION_FAILED, None
        else:
            error, message = _alter_group(service, resource, request.validate_only)
        extra.append(responses.build(
            module.AlterConfigsResourceResponse, resource_type=GROUP_RESOURCE,
            resource_name=resource.resource_name, error_code=error, error_message=message))
    if (deps.forward_configs is not None and not request.validate_only
            and any(r.error_code == ErrorCode.NONE for r in extra)):
        altered = {r.resource_name for r in extra if r.error_code == ErrorCode.NONE}
        await deps.forward_configs(
            dataclasses.replace(request, resources=tuple(
                r for r in groups if r.resource_name in altered)),
            context.header.api_version, context.header.client_id or "")
    return dataclasses.replace(answer, responses=tuple(answer.responses) + tuple(extra))


async def handle_describe_configs(
    deps: ShareGroupDeps, inner: Handler, context: RequestContext, request: Any
) -> Any:
    groups = [r for r in request.resources if r.resource_type == GROUP_RESOURCE]
    if not groups:
        return await inner(context, request)
    others = tuple(r for r in request.resources if r.resource_type != GROUP_RESOURCE)
    answer = await inner(context, dataclasses.replace(request, resources=others))
    module = responses.response_module(ApiKey.DESCRIBE_CONFIGS, context.header.api_version)
    service = deps.shares()
    config = service.broker.config
    defaults = {
        "share.auto.offset.reset": "latest",
        "share.record.lock.duration.ms": str(config.group_share_record_lock_duration_ms),
        "share.delivery.count.limit": str(config.group_share_delivery_count_limit),
        "share.isolation.level": "read_uncommitted",
        "share.session.timeout.ms": str(config.group_share_session_timeout_ms),
        "share.heartbeat.interval.ms": str(config.group_share_heartbeat_interval_ms),
        DEAD_LETTER_TOPIC_CONFIG: "",
        **TIDELOG_DEFAULTS,
    }
    extra = []
    for resource in groups:
        if not _may(deps, context, Op.DESCRIBE_CONFIGS, resource.resource_name):
            extra.append(responses.build(
                module.DescribeConfigsResult, resource_type=GROUP_RESOURCE,
                resource_name=resource.resource_name,
                error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, configs=()))
            continue
        overrides = service.group_configs.get(resource.resource_name, {})
        keys = resource.configuration_keys or list(defaults)
        entries = tuple(
            responses.build(
                module.DescribeConfigsResourceResult, name=name,
                value=overrides.get(name, defaults[name]), read_only=False,
                config_source=_GROUP_CONFIG_SOURCE if name in overrides else _DEFAULT_SOURCE,
                is_sensitive=False, synonyms=(),
                config_type=2 if name.endswith("ms") or name in TIDELOG_DEFAULTS else 7,
            )
            for name in keys if name in defaults
        )
        extra.append(responses.build(
            module.DescribeConfigsResult, resource_type=GROUP_RESOURCE,
            resource_name=resource.resource_name, error_code=ErrorCode.NONE, configs=entries))
    return dataclasses.replace(answer, results=tuple(answer.results) + tuple(extra))


def handlers(deps: ShareGroupDeps, table: HandlerTable) -> HandlerTable:
    """The share-group handlers, and `table`'s ListGroups, DeleteGroups, DescribeConfigs and
    IncrementalAlterConfigs wrapped (those keys must already be in `table`)."""
    return {
        ApiKey.SHARE_GROUP_HEARTBEAT: partial(handle_share_group_heartbeat, deps),
        ApiKey.SHARE_GROUP_DESCRIBE: partial(handle_share_group_describe, deps),
        ApiKey.LIST_GROUPS: partial(handle_list_groups, deps, table[ApiKey.LIST_GROUPS]),
        ApiKey.DELETE_GROUPS: partial(handle_delete_groups, deps, table[ApiKey.DELETE_GROUPS]),
        ApiKey.DESCRIBE_CONFIGS: partial(
            handle_describe_configs, deps, table[ApiKey.DESCRIBE_CONFIGS]),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: partial(
            handle_incremental_alter_configs, deps, table[ApiKey.INCREMENTAL_ALTER_CONFIGS]),
    }
