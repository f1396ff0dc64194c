"""Routes for the Consumer groups page: list, describe, reset offsets (preview, apply), delete."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tidelog.console.errors import BadRequest
from tidelog.console.openapi import api
from tidelog.console.web import audited, blocking, cluster_of, int_param, json_body


@api("GET", "/api/groups", "Consumer groups with state, protocol, members and total lag")
async def list_groups(request: Request) -> Response:
    cluster = cluster_of(request)
    return JSONResponse({"groups": await blocking(cluster.groups)})


@api("GET", "/api/groups/{group}", "Members, assignment, committed/end offsets and lag")
async def get_group(request: Request) -> Response:
    cluster = cluster_of(request)
    group = request.path_params["group"]
    return JSONResponse(await blocking(lambda: cluster.group(group)))


async def _reset_args(request: Request) -> tuple[str | None, str, int | None]:
    body = await json_body(request)
    strategy = body.get("strategy")
    if strategy not in ("earliest", "latest", "timestamp", "shift", "offset"):
        raise BadRequest("strategy must be earliest, latest, timestamp, shift or offset")
    value = int_param(body.get("value"), "value",
                      required=strategy in ("timestamp", "shift", "offset"))
    if strategy in ("timestamp", "offset") and value is not None and value < 0:
        raise BadRequest(f"value must be at least 0 for {strategy}")
    topic = body.get("topic") or None
    if topic is not None and not isinstance(topic, str):
        raise BadRequest("topic must be a string")
    return topic, strategy, value


@api("POST", "/api/groups/{group}/reset-preview",
     "Preview a reset: {topic?, strategy: earliest|latest|timestamp|shift|offset, value}")
async def reset_preview(request: Request) -> Response:
    cluster = cluster_of(request)
    group = request.path_params["group"]
    topic, strategy, value = await _reset_args(request)
    return JSONResponse(await blocking(
        lambda: cluster.preview_reset(group, topic, strategy, value)))


@api("POST", "/api/groups/{group}/reset",
     "Reset offsets (same body as the preview; only for empty groups)")
async def reset_apply(request: Request) -> Response:
    cluster = cluster_of(request)
    group = request.path_params["group"]
    topic, strategy, value = await _reset_args(request)

    def run() -> dict[str, Any]:
        preview = cluster.preview_reset(group, topic, strategy, value)
        cluster.apply_reset(group, preview["offsets"])
        return preview

    details = {"topic": topic, "strategy": strategy, "value": value}
    return JSONResponse(await audited(request, "reset-offsets", group, details, run))


@api("DELETE", "/api/groups/{group}", "Delete a consumer group (only when empty)")
async def delete_group(request: Request) -> Response:
    cluster = cluster_of(request)
    group = request.path_params["group"]
    await audited(request, "delete-group", group, {},
                  lambda: cluster.delete_group(group))
    return JSONResponse({"deleted": group})
