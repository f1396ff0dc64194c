"""Config admin APIs: DescribeConfigs (topic and broker), AlterConfigs, IncrementalAlterConfigs.

Runs on the event loop; topics.json writes are short blocking file I/O. The values, sources and
synonyms come from `tidelog.broker.topic_configs`; a change is validated whole (LogConfig) before
it is persisted and applied live to the topic's partition logs (`TopicRegistry.set_topic_configs`).
Broker configs are static: describing them works, changing them answers INVALID_REQUEST
(Kafka's answer for a config it cannot update dynamically).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from tidelog.broker.handlers.admin_common import (
    AdminDeps,
    duplicates,
    each_entry,
    guard,
    log,
    require,
    require_topic,
)
from tidelog.broker.handlers.authorization import Op, Type
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.metadata import TopicInfo, validate_topic_name
from tidelog.broker.topic_configs import (
    ConfigEntry,
    ResourceType,
    apply_incremental,
    describe_broker_configs,
    describe_topic_configs,
    validate_overrides,
)
from tidelog.errors import ErrorCode, KafkaError
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.security.acl import CLUSTER_NAME, AclOperation


# --- DescribeConfigs ----------------------------------------------------------------------
def _check_broker_name(deps: AdminDeps, resource_name: str) -> None:
    if resource_name not in ("", str(deps.config.node_id)):
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"unexpected broker id {resource_name!r}; this is broker {deps.config.node_id}",
        )


def _config_entries(deps: AdminDeps, resource: Any) -> list[ConfigEntry]:
    keys = resource.configuration_keys or None  # null or empty: every config
    if resource.resource_type == ResourceType.TOPIC:
        validate_topic_name(resource.resource_name)  # Kafka's ConfigHelper: Topic.validate
        info = require_topic(deps.topics, resource.resource_name)
        return describe_topic_configs(deps.config, info.configs, keys)
    if resource.resource_type == ResourceType.BROKER:
        _check_broker_name(deps, resource.resource_name)
        if resource.resource_name == "":
            # The cluster-wide dynamic default; Tidelog sets none (all broker configs static).
            return []
        return describe_broker_configs(deps.config, keys)
    raise KafkaError(
        ErrorCode.INVALID_REQUEST, f"unsupported resource type {resource.resource_type}"
    )


async def handle_describe_configs(deps: AdminDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.DESCRIBE_CONFIGS, version)
    synonyms_wanted = getattr(request, "include_synonyms", False)
    documentation_wanted = getattr(request, "include_documentation", False)

    def describe(resource: Any) -> dict[str, Any]:
        _require_config_access(deps, context, Op.DESCRIBE_CONFIGS, resource)
        configs = tuple(
            responses.build(
                module.DescribeConfigsResourceResult,
                name=entry.name,
                value=entry.value,
                read_only=entry.read_only,
                config_source=int(entry.source),
                is_sensitive=entry.is_sensitive,
                synonyms=tuple(
                    responses.build(
                        module.DescribeConfigsSynonym,
                        name=synonym.name,
                        value=synonym.value,
                        source=int(synonym.source),
                    )
                    for synonym in entry.synonyms
                )
                if synonyms_wanted
                else (),
                config_type=int(entry.config_type),
                documentation=entry.documentation if documentation_wanted else None,
            )
            for entry in _config_entries(deps, resource)
        )
        return {"error_code": ErrorCode.NONE, "error_message": None, "configs": configs}

    results = []
    for resource in request.resources:
        outcome = guard(describe, resource)
        results.append(
            responses.build(
                module.DescribeConfigsResult,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                **outcome,
            )
        )
    cls = responses.response_class(ApiKey.DESCRIBE_CONFIGS, version)
    return responses.build(cls, throttle_time=0, results=tuple(results))


def _require_config_access(
    deps: AdminDeps, context: RequestContext | None, operation: AclOperation, resource: Any
) -> None:
    """A topic's configs need `operation` on the topic, a broker's on the cluster (KafkaApis);
    other resource types are refused further on."""
    if resource.resource_type == ResourceType.TOPIC:
        require(deps, context, operation, Type.TOPIC, resource.resource_name)
    elif resource.resource_type == ResourceType.BROKER:
        require(deps, context, operation, Type.CLUSTER, CLUSTER_NAME)


# --- AlterConfigs / IncrementalAlterConfigs -----------------------------------------------
def _alter_resource(
    deps: AdminDeps,
    resource: Any,
    overrides_for: Callable[[Any, TopicInfo], dict[str, str]],
    validate_only: bool,
    context: RequestContext | None = None,
) -> dict[str, Any]:
    _require_config_access(deps, context, Op.ALTER_CONFIGS, resource)
    if resource.resource_type == ResourceType.BROKER:
        _check_broker_name(deps, resource.resource_name)
        if resource.configs:
            # Kafka's answer for a broker config it cannot change at run time
            # (DynamicBrokerConfig); Tidelog has no dynamic broker configs.
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "Cannot update these configs dynamically: set them in the config file or "
                "with `tidelog serve --set` and restart",
            )
        return {"error_code": ErrorCode.NONE, "error_message": None}
    if resource.resource_type != ResourceType.TOPIC:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"unsupported resource type {resource.resource_type}"
        )
    info = require_topic(deps.topics, resource.resource_name)
    overrides = overrides_for(resource, info)
    if not validate_only:
        deps.topics.set_topic_configs(info.name, overrides)
        log.info("topic %s config overrides now %s", info.name, overrides)
    return {"error_code": ErrorCode.NONE, "error_message": None}


async def _alter_configs(
    deps: AdminDeps,
    context: RequestContext,
    request: Any,
    api_key: int,
    overrides_for: Callable[[Any, TopicInfo], dict[str, str]],
) -> Any:
    version = context.header.api_version
    module = responses.response_module(api_key, version)
    results = []
    for resource, outcome in each_entry(
        request.resources,
        lambda resource: (resource.resource_type, resource.resource_name),
        lambda resource: _alter_resource(
            deps, resource, overrides_for, request.validate_only, context
        ),
        "duplicate resource",
    ):
        results.append(
            responses.build(
                module.AlterConfigsResourceResponse,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                **outcome,
            )
        )
    cls = responses.response_class(api_key, version)
    return responses.build(cls, throttle_time=0, responses=tuple(results))


async def handle_incremental_alter_configs(
    deps: AdminDeps, context: RequestContext, request: Any
) -> Any:
    def overrides_for(resource: Any, info: TopicInfo) -> dict[str, str]:
        operations = [(c.name, c.config_operation, c.value) for c in resource.configs]
        return apply_incremental(deps.config, info.configs, operations)

    return await _alter_configs(
        deps, context, request, ApiKey.INCREMENTAL_ALTER_CONFIGS, overrides_for
    )


async def handle_alter_configs(deps: AdminDeps, context: RequestContext, request: Any) -> Any:
    """Legacy AlterConfigs: the given set replaces every override of the topic."""

    def overrides_for(resource: Any, info: TopicInfo) -> dict[str, str]:
        names = [c.name for c in resource.configs]
        if duplicates(names):
            raise KafkaError(ErrorCode.INVALID_REQUEST, "duplicate config keys")
        return validate_overrides(deps.config, {c.name: c.value for c in resource.configs})

    return await _alter_configs(deps, context, request, ApiKey.ALTER_CONFIGS, overrides_for)


def handlers(deps: AdminDeps) -> HandlerTable:
    return {
        ApiKey.DESCRIBE_CONFIGS: partial(handle_describe_configs, deps),
        ApiKey.ALTER_CONFIGS: partial(handle_alter_configs, deps),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: partial(handle_incremental_alter_configs, deps),
    }
