"""Routes for the Messages page: browse, export (JSON or CSV), produce, re-produce (live tail is
in `routes_streams`)."""

from __future__ import annotations

import base64
import csv
import io
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tidelog.console.cluster_messages import MAX_PAGE
from tidelog.console.errors import BadRequest
from tidelog.console.filters import FilterError, compile_filter
from tidelog.console.openapi import api
from tidelog.console.web import (
    audited,
    blocking,
    bytes_param,
    cluster_of,
    int_param,
    json_body,
    str_param,
)


def _read_params(request: Request, topic: str) -> dict[str, Any]:
    q = request.query_params
    start = q.get("start", "newest")
    if start not in ("oldest", "newest", "offset", "timestamp"):
        raise BadRequest("start must be oldest, newest, offset or timestamp")
    offset = int_param(q.get("offset"), "offset", minimum=0, required=start == "offset")
    timestamp = int_param(q.get("timestamp"), "timestamp", minimum=0, required=start == "timestamp")
    limit = int_param(q.get("limit"), "limit", minimum=1, maximum=MAX_PAGE) or 100
    partitions: list[int] | None = None
    if q.get("partition") not in (None, "", "all"):
        partitions = [int_param(p, "partition", minimum=0, required=True) or 0
                      for p in q.get("partition", "").split(",")]
    try:
        keep = compile_filter(q.get("filter", ""))
    except FilterError as error:
        raise BadRequest(f"filter: {error}") from None
    return {"topic": topic, "partitions": partitions, "start": start, "offset": offset,
            "timestamp": timestamp, "limit": limit, "keep": keep}


@api("GET", "/api/topics/{topic}/messages",
     "Browse: partition, start=oldest|newest|offset|timestamp, offset, timestamp (ms), limit, "
     "filter, compact=1 (no key/value copies, base64 only for non-UTF-8 bytes)")
async def read_messages(request: Request) -> Response:
    cluster = cluster_of(request)
    params = _read_params(request, request.path_params["topic"])
    page = await blocking(lambda: cluster.read(**params))
    if request.query_params.get("compact") in ("1", "true"):
        _compact(page["messages"])
    return JSONResponse(page)


def _compact(messages: list[dict[str, Any]]) -> None:
    """`compact=1` (the browser's pages): no top-level key/value copies, and no base64 where
    `text` already holds the bytes (UTF-8), so a page of 1 KiB values is a third the JSON."""
    for m in messages:
        del m["key"], m["value"]
        for raw in (m["key_raw"], m["value_raw"]):
            if raw is not None and raw["text"] is not None:
                del raw["base64"]


@api("GET", "/api/topics/{topic}/messages/export",
     "Export the same selection as browse: format=json|csv")
async def export_messages(request: Request) -> Response:
    cluster = cluster_of(request)
    topic = request.path_params["topic"]
    fmt = request.query_params.get("format", "json")
    if fmt not in ("json", "csv"):
        raise BadRequest("format must be json or csv")
    params = _read_params(request, topic)
    page = await blocking(lambda: cluster.read(**params))
    rows = [{k: m[k] for k in ("topic", "partition", "offset", "timestamp", "key", "value",
                               "headers")} for m in page["messages"]]
    disposition = {"Content-Disposition": f'attachment; filename="{topic}.{fmt}"'}
    if fmt == "json":
        return Response(json.dumps(rows, indent=2), media_type="application/json",
                        headers=disposition)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["topic", "partition", "offset", "timestamp", "key", "value", "headers"])
    for r in rows:
        writer.writerow([r["topic"], r["partition"], r["offset"], r["timestamp"], r["key"],
                         r["value"], json.dumps(r["headers"])])
    return Response(out.getvalue(), media_type="text/csv", headers=disposition)


@api("POST", "/api/topics/{topic}/messages",
     "Produce: {key, value, headers: [[name, value]], partition, encoding: text|base64}")
async def produce(request: Request) -> Response:
    cluster = cluster_of(request)
    topic = request.path_params["topic"]
    body = await json_body(request)
    encoding = body.get("encoding", "text")
    if encoding not in ("text", "base64"):
        raise BadRequest("encoding must be text or base64")
    key = bytes_param(body.get("key"), encoding, "key")
    value = bytes_param(body.get("value"), encoding, "value")
    headers_in = body.get("headers") or []
    if not isinstance(headers_in, list) or not all(
            isinstance(h, list) and len(h) == 2 and isinstance(h[0], str) for h in headers_in):
        raise BadRequest("headers must be a list of [name, value] pairs")
    headers = [(h[0], bytes_param(h[1], encoding, f"header {h[0]!r}")) for h in headers_in]
    partition = int_param(body.get("partition"), "partition", minimum=0)
    details = {"partition": partition, "key_size": len(key or b""),
               "value_size": len(value or b"")}
    result = await audited(request, "produce", topic, details, lambda: cluster.produce(
        topic, key=key, value=value, headers=headers, partition=partition))
    return JSONResponse(result, status_code=201)


@api("POST", "/api/reproduce",
     "Re-produce a message to another topic: {topic, partition, offset, to_topic}")
async def reproduce(request: Request) -> Response:
    cluster = cluster_of(request)
    body = await json_body(request)
    topic = str_param(body.get("topic"), "topic")
    partition = int_param(body.get("partition"), "partition", minimum=0, required=True) or 0
    offset = int_param(body.get("offset"), "offset", minimum=0, required=True) or 0
    to_topic = str_param(body.get("to_topic"), "to_topic")

    def run() -> dict[str, Any]:
        m = cluster.fetch_one(topic, partition, offset)
        raw = (m["key_raw"], m["value_raw"])
        key, value = (base64.b64decode(r["base64"]) if r else None for r in raw)
        headers = [(n, v.encode("utf-8") if v is not None else None) for n, v in m["headers"]]
        return cluster.produce(to_topic, key=key, value=value, headers=headers,
                                     partition=None)

    result = await audited(request, "reproduce", to_topic,
                           {"from": f"{topic}/{partition}@{offset}"}, run)
    return JSONResponse(result, status_code=201)
