"""InitProducerId (key 22, v0-4): a fresh producer id for idempotent producers, and for a
transactional.id the transaction coordinator's answer (`transactions.init_transactional`).

Ids come from `ProducerIdAllocator`, which reserves blocks on disk first, so an id is never
handed out twice, even across restarts. Epoch 0 for a new id. Without a transaction
coordinator (`transactions` None) a transactional.id is answered with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, a fatal error every client reports by name. In a cluster
server.py routes transactional ids here (with the cluster's TransactionDeps) and idempotent
producers to cluster_admin.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from tidelog.broker.handlers.authorization import Op, Type, allowed, cluster_allowed
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.handlers.transactions import TransactionDeps, init_transactional
from tidelog.broker.producer_ids import ProducerIdAllocator
from tidelog.errors import ErrorCode
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.security.authorizer import Authorizer


@dataclass(frozen=True, slots=True)
class ProducerIdDeps:
    producer_ids: ProducerIdAllocator
    authorizer: Authorizer | None = None  # None: no ACL checks (authorizer.class.name unset)
    transactions: TransactionDeps | None = None  # None: transactional ids are refused


def idempotent_write_refused(
    authorizer: Authorizer | None, context: RequestContext, request: Any
) -> bool:
    """An idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
    (KIP-679); a transactional one is checked on its transactional id further on."""
    return (
        authorizer is not None
        and request.transactional_id is None
        and not cluster_allowed(authorizer, context, Op.IDEMPOTENT_WRITE)
        and not authorizer.authorize_by_resource_type(
            context.principal, context.client_host, Op.WRITE, Type.TOPIC
        )
    )


async def handle_init_producer_id(
    deps: ProducerIdDeps, context: RequestContext, request: Any
) -> Any:
    cls = responses.response_class(ApiKey.INIT_PRODUCER_ID, context.header.api_version)
    authorizer = deps.authorizer
    if authorizer is not None:
        # Kafka's order: a transactional producer needs WRITE on its id (checked before the
        # empty id is refused); an idempotent one IDEMPOTENT_WRITE on the cluster or WRITE on
        # some topic (KIP-679).
        if request.transactional_id is not None:
            refused = not allowed(
                authorizer, context, Op.WRITE, Type.TRANSACTIONAL_ID, request.transactional_id
            )
            error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        else:
            refused = not cluster_allowed(
                authorizer, context, Op.IDEMPOTENT_WRITE
            ) and not authorizer.authorize_by_resource_type(
                context.principal, context.client_host, Op.WRITE, Type.TOPIC
            )
            error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        if refused:
            return responses.build(
                cls, throttle_time=0, error_code=error, producer_id=-1, producer_epoch=-1,
            )
    if request.transactional_id is not None:
        # An empty transactional id is INVALID_REQUEST first, as Kafka's
        # TransactionCoordinator.handleInitProducerId says.
        empty = request.transactional_id == ""
        if deps.transactions is not None and not empty:
            answer = await init_transactional(
                deps.transactions, context.header.api_version, request
            )
            return responses.build(
                cls, throttle_time=0, error_code=answer.error,
                producer_id=answer.producer_id, producer_epoch=answer.producer_epoch,
            )
        return responses.build(
            cls,
            throttle_time=0,
            error_code=(ErrorCode.INVALID_REQUEST if empty
                        else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            producer_id=-1,
            producer_epoch=-1,
        )
    return responses.build(
        cls,
        throttle_time=0,
        error_code=ErrorCode.NONE,
        producer_id=deps.producer_ids.allocate(),
        producer_epoch=0,
    )


def handlers(deps: ProducerIdDeps) -> HandlerTable:
    return {ApiKey.INIT_PRODUCER_ID: partial(handle_init_producer_id, deps)}
