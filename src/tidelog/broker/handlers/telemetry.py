"""Client telemetry (KIP-714): GetTelemetrySubscriptions (71), PushTelemetry (72),
ListConfigResources (74; v0 was ListClientMetricsResources), and CLIENT_METRICS (resource type
16) config resources in DescribeConfigs and IncrementalAlterConfigs.

Kafka's KafkaApis/ClientMetricsManager semantics (`coordinator/client_metrics.py` holds the
rules): a client asks for its subscription (a new client instance id is assigned when it sends
the zero id), then pushes OTLP metrics every `push_interval` ms with the subscription id it was
given. Errors: THROTTLING_QUOTA_EXCEEDED (too early), UNKNOWN_SUBSCRIPTION_ID (subscriptions
changed: subscribe again), UNSUPPORTED_COMPRESSION_TYPE, TELEMETRY_TOO_LARGE
(`telemetry.max.bytes`), INVALID_RECORD (a payload that does not decompress or decode),
INVALID_REQUEST (the zero id in a push, or a push after `terminating`).

The config APIs' CLIENT_METRICS resources are answered here and every other resource by the
broker's own config handlers (`wrap_config_handlers` splits a request and merges the answers in
request order), on a single node and in a cluster alike.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from tidelog.broker.clock import now_ms
from tidelog.broker.handlers.authorization import Op, cluster_allowed
from tidelog.broker.handlers.context import Handler, HandlerTable, RequestContext
from tidelog.broker.telemetry.service import READ_ERRORS, TelemetryService, new_instance_id
from tidelog.coordinator.client_metrics import (
    ACCEPTED_COMPRESSION_TYPES,
    CONFIG_NAMES,
    DEFAULT_INTERVAL_MS,
    INTERVAL_MS,
    MATCH,
    MAX_SUBSCRIPTIONS,
    METRICS,
    apply_incremental,
    parse_list,
    parse_subscription,
)
from tidelog.errors import ErrorCode, KafkaError
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey

log = logging.getLogger("tidelog.broker.telemetry")

CLIENT_METRICS = 16
TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
CLIENT_METRICS_CONFIG_SOURCE = 7  # DescribeConfigs ConfigSource.CLIENT_METRICS_CONFIG
DEFAULT_SOURCE = 5  # ConfigSource.DEFAULT_CONFIG
INT_TYPE, LIST_TYPE = 3, 7  # DescribeConfigs ConfigType
_DOCUMENTATION = {
    METRICS: "Prefixes of the client metric names to push; * for every metric.",
    INTERVAL_MS: "How often matching clients push their metrics, in milliseconds.",
    MATCH: "Client selectors, name=regex (client_id, client_software_name, ...); none: all.",
}
LIST_TYPES_V1 = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)
_REFUSED = "Cluster authorization failed."


@dataclass(frozen=True, slots=True)
class TelemetryDeps:
    service: TelemetryService
    authorizer: Any  # security.authorizer.Authorizer | None
    topic_names: Callable[[], Iterable[str]]
    broker_ids: Callable[[], Iterable[int]]
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one config change at a time


def _attributes(context: RequestContext, instance_id: uuid.UUID) -> dict[str, str | None]:
    name, version = context.client_software
    return {
        "client_instance_id": str(instance_id),
        "client_id": context.client_id,
        "client_software_name": name,
        "client_software_version": version,
        "client_source_address": context.client_host,
        "client_source_port": str(context.client_port),
    }


# --- GetTelemetrySubscriptions / PushTelemetry -------------------------------------------
async def handle_get_telemetry_subscriptions(
    deps: TelemetryDeps, context: RequestContext, request: Any
) -> Any:
    cls = responses.response_class(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, context.header.api_version)
    manager = deps.service.manager
    given = request.client_instance_id
    instance_id = (
        given if given is not None and given.int != 0 else manager.new_instance_id(new_instance_id)
    )
    result = manager.get_subscriptions(
        instance_id, _attributes(context, instance_id), now_ms()
    )
    if result.instance is None:
        return responses.build(
            cls, throttle_time=0, error_code=result.error, client_instance_id=None
        )
    instance = result.instance
    return responses.build(
        cls,
        throttle_time=0,
        error_code=ErrorCode.NONE,
        client_instance_id=instance_id,
        subscription_id=instance.subscription_id,
        accepted_compression_types=ACCEPTED_COMPRESSION_TYPES,
        push_interval=instance.interval_ms,
        telemetry_max_bytes=deps.service.max_bytes,
        delta_temporality=True,
        requested_metrics=instance.metrics,
    )


async def handle_push_telemetry(
    deps: TelemetryDeps, context: RequestContext, request: Any
) -> Any:
    cls = responses.response_class(ApiKey.PUSH_TELEMETRY, context.header.api_version)
    service = deps.service
    instance_id = request.client_instance_id
    if instance_id is None or instance_id.int == 0:
        service.export.record_push(ErrorCode.INVALID_REQUEST.name)
        return responses.build(cls, throttle_time=0, error_code=ErrorCode.INVALID_REQUEST)
    error, message, instance = service.manager.push(
        instance_id, _attributes(context, instance_id), request.subscription_id,
        bool(request.terminating), request.compression_type, len(request.metrics),
        service.max_bytes, now_ms(),
    )
    if error == ErrorCode.NONE and request.metrics:
        try:
            service.accept(instance, request.compression_type, request.metrics)
        except READ_ERRORS as failure:
            log.info("client %s pushed unreadable metrics: %s", instance_id, failure)
            service.manager.failed(instance, ErrorCode.INVALID_RECORD)
            error = ErrorCode.INVALID_RECORD
    elif message is not None:
        log.debug("push from %s refused: %s", instance_id, message)
    service.export.record_push(error.name)
    return responses.build(cls, throttle_time=0, error_code=error)


# --- ListConfigResources ----------------------------------------------------------------------
async def handle_list_config_resources(
    deps: TelemetryDeps, context: RequestContext, request: Any
) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.LIST_CONFIG_RESOURCES, version)
    cls = responses.response_class(ApiKey.LIST_CONFIG_RESOURCES, version)
    if deps.authorizer is not None and not cluster_allowed(
        deps.authorizer, context, Op.DESCRIBE_CONFIGS
    ):
        return responses.build(
            cls, throttle_time=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            config_resources=(),
        )
    supported = (CLIENT_METRICS,) if version == 0 else LIST_TYPES_V1
    wanted = tuple(getattr(request, "resource_types", ())) or supported
    if any(kind not in supported for kind in wanted):
        return responses.build(
            cls, throttle_time=0, error_code=ErrorCode.UNSUPPORTED_VERSION, config_resources=()
        )
    names: list[tuple[str, int]] = []
    if CLIENT_METRICS in wanted:
        subscriptions = await asyncio.to_thread(deps.service.subscriptions)
        names += [(name, CLIENT_METRICS) for name in sorted(subscriptions)]
    if TOPIC in wanted:
        names += [(name, TOPIC) for name in sorted(deps.topic_names())]
    for kind in (BROKER, BROKER_LOGGER):
        if kind in wanted:
            names += [(str(node), kind) for node in sorted(deps.broker_ids())]
    # GROUP: Tidelog keeps no group configs, so there is none to list.
    resources = tuple(
        responses.build(module.ConfigResource, resource_name=name, resource_type=kind)
        for name, kind in names
    )
    return responses.build(
        cls, throttle_time=0, error_code=ErrorCode.NONE, config_resources=resources
    )


# --- CLIENT_METRICS in DescribeConfigs / IncrementalAlterConfigs ------------------------------
def _config_value(name: str, stored: dict[str, str]) -> str:
    if name == INTERVAL_MS:
        return stored.get(name, str(DEFAULT_INTERVAL_MS)).strip()
    return ",".join(parse_list(stored.get(name)))


async def _describe(
    deps: TelemetryDeps, context: RequestContext, module: Any, resource: Any,
    documentation: bool,
) -> dict[str, Any]:
    if deps.authorizer is not None and not cluster_allowed(
        deps.authorizer, context, Op.DESCRIBE_CONFIGS
    ):
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _REFUSED)
    if not resource.resource_name:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty"
        )
    subscriptions = await asyncio.to_thread(deps.service.subscriptions)
    stored = subscriptions.get(resource.resource_name, {})
    keys = resource.configuration_keys or None
    # Every config, its value as Kafka's ConfigDef prints it (a list joined by ","), from the
    # subscription or the default (ConfigHelper's CLIENT_METRICS branch).
    configs = tuple(
        responses.build(
            module.DescribeConfigsResourceResult,
            name=name,
            value=_config_value(name, stored),
            read_only=False,
            config_source=CLIENT_METRICS_CONFIG_SOURCE if name in stored else DEFAULT_SOURCE,
            is_sensitive=False,
            synonyms=(),
            config_type=INT_TYPE if name == INTERVAL_MS else LIST_TYPE,
            documentation=_DOCUMENTATION[name] if documentation else None,
        )
        for name in sorted(CONFIG_NAMES)
        if keys is None or name in keys
    )
    return {"error_code": ErrorCode.NONE, "error_message": None, "configs": configs}


async def _alter(
    deps: TelemetryDeps, context: RequestContext, validate_only: bool, resource: Any
) -> dict[str, Any]:
    if deps.authorizer is not None and not cluster_allowed(
        deps.authorizer, context, Op.ALTER_CONFIGS
    ):
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _REFUSED)
    name = resource.resource_name
    service = deps.service
    async with deps.lock:
        subscriptions = await asyncio.to_thread(service.subscriptions)
        operations = [(c.name, int(c.config_operation), c.value) for c in resource.configs]
        configs = apply_incremental(subscriptions.get(name, {}), operations)
        parse_subscription(name, configs)  # Kafka's ClientMetricsConfigs.validate
        if name not in subscriptions and configs and len(subscriptions) >= MAX_SUBSCRIPTIONS:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "too many client metrics resources")
        if not validate_only:
            await asyncio.to_thread(service.store.write, name, configs)
            subscriptions = dict(subscriptions)
            if configs:
                subscriptions[name] = configs
            else:
                subscriptions.pop(name, None)
            service.replace_subscriptions(subscriptions)
            log.info("client metrics subscription %s now %s", name, configs or "deleted")
    return {"error_code": ErrorCode.NONE, "error_message": None}


def _failure(error: KafkaError) -> dict[str, Any]:
    return {"error_code": error.code, "error_message": error.message or error.code.name}


async def _split(
    deps: TelemetryDeps, inner: Handler, api_key: int, context: RequestContext, request: Any
) -> Any:
    """Answer CLIENT_METRICS resources here, the rest through `inner`, in request order."""
    resources = list(request.resources)
    if all(resource.resource_type != CLIENT_METRICS for resource in resources):
        return await inner(context, request)
    version = context.header.api_version
    module = responses.response_module(api_key, version)
    describe = api_key == ApiKey.DESCRIBE_CONFIGS
    results_field = "results" if describe else "responses"
    others = [r for r in resources if r.resource_type != CLIENT_METRICS]
    answered: dict[tuple[int, str], Any] = {}
    if others:
        response = await inner(context, dataclasses.replace(request, resources=tuple(others)))
        for item in getattr(response, results_field):
            answered[(item.resource_type, item.resource_name)] = item
    names = [r.resource_name for r in resources if r.resource_type == CLIENT_METRICS]
    result_class = module.DescribeConfigsResult if describe else module.AlterConfigsResourceResponse
    results = []
    for resource in resources:
        key = (resource.resource_type, resource.resource_name)
        if key in answered:
            if answered[key] is not None:
                results.append(answered[key])
                answered[key] = None  # a repeated key is answered once
            continue
        if resource.resource_type != CLIENT_METRICS:
            continue
        answered[key] = None
        try:
            if names.count(resource.resource_name) > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "duplicate resource")
            if describe:
                outcome = await _describe(
                    deps, context, module, resource, bool(
                        getattr(request, "include_documentation", False))
                )
            else:
                outcome = await _alter(deps, context, bool(request.validate_only), resource)
        except KafkaError as error:
            outcome = _failure(error)
        except OSError as error:
            log.exception("client metrics store failed")
            outcome = _failure(KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(error)))
        results.append(
            responses.build(
                result_class, resource_type=resource.resource_type,
                resource_name=resource.resource_name, **outcome,
            )
        )
    cls = responses.response_class(api_key, version)
    return responses.build(cls, throttle_time=0, **{results_field: tuple(results)})


def wrap_config_handlers(table: HandlerTable, deps: TelemetryDeps) -> None:
    """Route CLIENT_METRICS resources of the config APIs already in `table` here."""
    for api_key in (ApiKey.DESCRIBE_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        inner = table.get(api_key)
        if inner is not None:
            table[api_key] = partial(_split, deps, inner, api_key)


def handlers(deps: TelemetryDeps) -> HandlerTable:
    return {
        ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: partial(handle_get_telemetry_subscriptions, deps),
        ApiKey.PUSH_TELEMETRY: partial(handle_push_telemetry, deps),
        ApiKey.LIST_CONFIG_RESOURCES: partial(handle_list_config_resources, deps),
    }
