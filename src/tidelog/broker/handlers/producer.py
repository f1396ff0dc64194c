"""InitProducerId (key 22, v0-4): a fresh producer id for idempotent producers.

Ids come from `ProducerIdAllocator`, which reserves blocks on disk first, so an id is never
handed out twice, even across restarts. Epoch 0 for a new id. Transactions are not supported:
a transactional.id is answered with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, a fatal error that
every client reports by name instead of retrying forever.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tidelog.broker import responses
from tidelog.errors import ErrorCode

if TYPE_CHECKING:
    from tidelog.broker.router import RequestContext
    from tidelog.broker.state import Broker

INIT_PRODUCER_ID = 22


async def handle_init_producer_id(broker: Broker, context: RequestContext, request: Any) -> Any:
    cls = responses.response_class(INIT_PRODUCER_ID, context.header.api_version)
    if request.transactional_id is not None:
        return responses.build(
            cls,
            throttle_time=0,
            error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            producer_id=-1,
            producer_epoch=-1,
        )
    return responses.build(
        cls,
        throttle_time=0,
        error_code=ErrorCode.NONE,
        producer_id=broker.producer_ids.allocate(),
        producer_epoch=0,
    )


HANDLERS = {INIT_PRODUCER_ID: handle_init_producer_id}
