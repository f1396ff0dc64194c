"""DescribeClientQuotas (48) and AlterClientQuotas (49), v0-1 (KIP-546).

Kafka's order (KafkaApis, ControllerApis): DescribeClientQuotas needs DESCRIBE_CONFIGS on the
cluster (else a top-level CLUSTER_AUTHORIZATION_FAILED), AlterClientQuotas ALTER_CONFIGS on the
cluster (else every entry CLUSTER_AUTHORIZATION_FAILED). Invalid filters and entries answer
INVALID_REQUEST (an unknown entity type in a filter: UNSUPPORTED_VERSION) with Kafka's
messages, from the pure model (`security/quota_entity.py`). A change is written to the store
before the broker's quota manager takes it, so the next request is throttled by it and a
restart keeps it; `validate_only` validates and answers without writing.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from tidelog.broker.handlers.authorization import Op, cluster_allowed
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.quotas.manager import QuotaManager
from tidelog.broker.quotas.store import QuotaStore
from tidelog.errors import ErrorCode
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.security.authorizer import Authorizer
from tidelog.security.quota_entity import (
    DescribeComponent,
    QuotaAlteration,
    QuotaEntity,
    QuotaRequestError,
    QuotaUnsupportedError,
)

log = logging.getLogger("tidelog.broker.quotas")
MAX_ENTRIES = 10_000  # per AlterClientQuotas request, and components per filter
_REFUSED = "Cluster authorization failed."


@dataclass(frozen=True, slots=True)
class ClientQuotaDeps:
    authorizer: Authorizer | None  # None: no ACL checks
    store: QuotaStore
    manager: QuotaManager
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one change at a time


async def handle_describe_client_quotas(
    deps: ClientQuotaDeps, context: RequestContext, request: Any
) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.DESCRIBE_CLIENT_QUOTAS, version)
    cls = responses.response_class(ApiKey.DESCRIBE_CLIENT_QUOTAS, version)

    def refused(code: ErrorCode, message: str) -> Any:
        return responses.build(cls, error_code=code, error_message=message, entries=None)

    if deps.authorizer is not None and not cluster_allowed(
        deps.authorizer, context, Op.DESCRIBE_CONFIGS
    ):
        return refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _REFUSED)
    if len(request.components) > MAX_ENTRIES:
        return refused(ErrorCode.INVALID_REQUEST, "too many filter components")
    components = [
        DescribeComponent(item.entity_type, int(item.match_type), item.match)
        for item in request.components
    ]
    try:
        found = deps.manager.quotas.describe(components, bool(request.strict))
    except QuotaUnsupportedError as error:
        return refused(ErrorCode.UNSUPPORTED_VERSION, str(error))
    except QuotaRequestError as error:
        return refused(ErrorCode.INVALID_REQUEST, str(error))
    entries = tuple(
        responses.build(
            module.EntryData,
            entity=tuple(
                responses.build(module.EntityData, entity_type=kind, entity_name=name)
                for kind, name in entity.parts
            ),
            values=tuple(
                responses.build(module.ValueData, key=key, value=value)
                for key, value in sorted(values.items())
            ),
        )
        for entity, values in found
    )
    return responses.build(cls, error_code=ErrorCode.NONE, error_message=None, entries=entries)


async def handle_alter_client_quotas(
    deps: ClientQuotaDeps, context: RequestContext, request: Any
) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.ALTER_CLIENT_QUOTAS, version)
    cls = responses.response_class(ApiKey.ALTER_CLIENT_QUOTAS, version)
    alterations = [
        QuotaAlteration(
            tuple((part.entity_type, part.entity_name) for part in entry.entity),
            tuple((op.key, float(op.value), bool(op.remove)) for op in entry.ops),
        )
        for entry in request.entries[:MAX_ENTRIES]
    ]

    def entity_data(parts: tuple[tuple[str, str | None], ...]) -> tuple[Any, ...]:
        return tuple(
            responses.build(module.EntityData, entity_type=kind, entity_name=name)
            for kind, name in parts
        )

    if (deps.authorizer is not None and not cluster_allowed(
        deps.authorizer, context, Op.ALTER_CONFIGS
    )) or len(request.entries) > MAX_ENTRIES:
        code, message = (
            (ErrorCode.INVALID_REQUEST, "too many entries")
            if len(request.entries) > MAX_ENTRIES
            else (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _REFUSED)
        )
        return responses.build(cls, entries=tuple(
            responses.build(module.EntryData, error_code=code, error_message=message,
                            entity=entity_data(alteration.entity))
            for alteration in alterations
        ))
    async with deps.lock:
        stored, results = await asyncio.to_thread(
            deps.store.update, alterations, bool(request.validate_only)
        )
        if not request.validate_only:
            deps.manager.replace(stored)
    # Kafka names a refused entity's parts as sent, an accepted one's in its map's order
    # (client-id before user: the sorted order here).
    as_sent = {
        QuotaEntity(tuple(sorted(dict(a.entity).items(), key=lambda part: part[0]))): a.entity
        for a in alterations
    }
    for entity, outcome in results.items():
        if outcome is None and not request.validate_only:
            log.info("client quotas of %s altered by %s", entity, context.principal)
    return responses.build(cls, entries=tuple(
        responses.build(
            module.EntryData,
            error_code=ErrorCode.NONE if outcome is None else ErrorCode.INVALID_REQUEST,
            error_message=outcome,
            entity=entity_data(entity.parts if outcome is None else as_sent[entity]),
        )
        for entity, outcome in results.items()
    ))


def handlers(deps: ClientQuotaDeps) -> HandlerTable:
    return {
        ApiKey.DESCRIBE_CLIENT_QUOTAS: partial(handle_describe_client_quotas, deps),
        ApiKey.ALTER_CLIENT_QUOTAS: partial(handle_alter_client_quotas, deps),
    }
