"""Server-sent event streams: live charts (/api/metrics/stream, one point per scrape) and live
tail (/api/topics/{topic}/tail, sampled so a busy topic cannot swamp the browser)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

from confluent_kafka import KafkaError, TopicPartition
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from tidelog.console.cluster_messages import message_dict
from tidelog.console.errors import BadRequest, not_allowed
from tidelog.console.filters import FilterError, compile_filter
from tidelog.console.openapi import api
from tidelog.console.web import blocking, cluster_of, state_of

TAIL_BATCH_MAX = 50


@api("GET", "/api/metrics/stream", "Server-sent events: one throughput point per scrape")
async def metrics_stream(request: Request) -> Response:
    state = state_of(request)
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=100)
    state.subscribers.append(queue)

    async def events() -> AsyncIterator[str]:
        try:
            yield ": connected\n\n"
            while not await request.is_disconnected():
                try:
                    point = await asyncio.wait_for(queue.get(), 15)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                yield f"data: {json.dumps(point)}\n\n"
        finally:
            state.subscribers.remove(queue)

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


@api("GET", "/api/topics/{topic}/tail",
     "Server-sent events: new messages (filter applies); sampled, with the count skipped")
async def tail(request: Request) -> Response:
    cluster = cluster_of(request)
    topic = request.path_params["topic"]
    expression = request.query_params.get("filter", "")
    unfiltered = not expression.strip()
    try:
        keep = compile_filter(expression)
    except FilterError as error:
        raise BadRequest(f"filter: {error}") from None
    meta = await blocking(lambda: cluster.topic(topic))  # 404 before streaming
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=20)
    stop = threading.Event()
    ends = {p["partition"]: p["log_end_offset"] for p in meta["partitions"]}

    def pump() -> None:
        consumer = cluster.consumer(tail=True)
        try:
            consumer.assign([TopicPartition(topic, p, o) for p, o in ends.items()])
            while not stop.is_set():
                raw = []
                for m in consumer.consume(10000, 0.5):
                    error = m.error()
                    if error is not None:
                        if error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                            raise not_allowed(f"reading topic {topic!r}", error.name())
                        continue  # end of partition; the unused group's coordinator
                    raw.append(m)
                # Sampling keeps the browser responsive on a busy topic: the newest few. Without
                # a filter only those are decoded (decoding all of 10,000 msg/s would lag).
                if unfiltered:
                    batch = [message_dict(m) for m in raw[-TAIL_BATCH_MAX:]]
                    skipped = len(raw) - len(batch)
                else:
                    batch = [d for d in map(message_dict, raw) if keep(d)]
                    skipped = max(0, len(batch) - TAIL_BATCH_MAX)
                    batch = batch[-TAIL_BATCH_MAX:]
                event = {"messages": batch, "skipped": skipped}
                if batch or skipped:
                    loop.call_soon_threadsafe(_offer, queue, event)
        except Exception as error:  # reported to the stream, never raised into the loop
            loop.call_soon_threadsafe(_offer, queue, {"error": str(error)})
        finally:
            consumer.close()

    thread = threading.Thread(target=pump, name=f"tail-{topic}", daemon=True)
    thread.start()

    async def events() -> AsyncIterator[str]:
        try:
            yield ": connected\n\n"
            while not await request.is_disconnected():
                try:
                    event = await asyncio.wait_for(queue.get(), 5)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                yield f"data: {json.dumps(event)}\n\n"
        finally:
            stop.set()

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


def _offer(queue: asyncio.Queue[dict[str, Any]], event: dict[str, Any]) -> None:
    if queue.full():
        dropped = queue.get_nowait()
        event = {**event, "skipped": event.get("skipped", 0) + len(dropped.get("messages", []))
                 + dropped.get("skipped", 0)}
    queue.put_nowait(event)
