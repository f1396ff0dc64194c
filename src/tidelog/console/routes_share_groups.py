"""Routes for the Share groups page (KIP-932): list, describe (members, assignments, start
offsets and lag), reset start offsets (preview, then apply while the group is empty; audited),
delete (confirmed by the group's id; audited). A cluster without share groups answers the list
with {supported: false, reason} and the rest with 501, in words."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tidelog.console.cluster_share_groups import SHARE_STRATEGIES
from tidelog.console.errors import BadRequest
from tidelog.console.openapi import api
from tidelog.console.web import (
    audited,
    blocking,
    cluster_of,
    int_param,
    json_body,
    state_of,
)

MAX_NAME = 249  # Kafka's longest topic name; group ids this long are already odd


@api("GET", "/api/share-groups", "Share groups: id, state, member count, partitions with a "
     "start offset, total lag; {supported: false, reason} on a cluster without share groups")
async def list_share_groups(request: Request) -> Response:
    cluster = cluster_of(request)
    return JSONResponse(await blocking(cluster.share_groups))


@api("GET", "/api/share-groups/{group}", "A share group: members with their assignment; per "
     "partition the start offset (SPSO), log end offset, lag, and from Tidelog's /metrics "
     "the acquired and in-flight record counts (null without metrics)")
async def get_share_group(request: Request) -> Response:
    cluster = cluster_of(request)
    group = request.path_params["group"]
    detail = await blocking(lambda: cluster.share_group(group))
    # No admin request answers these: they come from the last /metrics scrape.
    counts = state_of(request).history.share_partitions(group)
    for p in detail["partitions"]:
        found = counts.get((p["topic"], p["partition"])) if counts is not None else None
        p["acquired"] = found.get("acquired") if found else None
        p["in_flight"] = found.get("in_flight") if found else None
    return JSONResponse(detail)


async def _reset_args(request: Request) -> tuple[str | None, int | None, str, int | None]:
    body = await json_body(request)
    strategy = body.get("strategy")
    if strategy not in SHARE_STRATEGIES:
        raise BadRequest(f"strategy must be one of {', '.join(SHARE_STRATEGIES)}")
    value = int_param(body.get("value"), "value", minimum=0,
                      required=strategy in ("timestamp", "offset"))
    topic = body.get("topic") or None
    if topic is not None and (not isinstance(topic, str) or len(topic) > MAX_NAME):
        raise BadRequest("topic must be a topic name")
    partition = int_param(body.get("partition"), "partition", minimum=0)
    return topic, partition, strategy, value


@api("POST", "/api/share-groups/{group}/reset-preview", "Preview a start-offset reset: "
     "{topic?, partition?, strategy: earliest|latest|timestamp|offset, value}")
async def share_reset_preview(request: Request) -> Response:
    cluster = cluster_of(request)
    group = request.path_params["group"]
    topic, partition, strategy, value = await _reset_args(request)
    return JSONResponse(await blocking(
        lambda: cluster.preview_share_reset(group, topic, partition, strategy, value)))


@api("POST", "/api/share-groups/{group}/reset", "Reset start offsets (same body as the "
     "preview; only while the group is empty, as kafka-share-groups --reset-offsets)")
async def share_reset_apply(request: Request) -> Response:
    cluster = cluster_of(request)
    group = request.path_params["group"]
    topic, partition, strategy, value = await _reset_args(request)

    def run() -> dict[str, Any]:
        preview = cluster.preview_share_reset(group, topic, partition, strategy, value)
        cluster.apply_share_reset(group, preview["offsets"])
        return preview

    details = {"topic": topic, "partition": partition, "strategy": strategy, "value": value}
    return JSONResponse(await audited(request, "reset-share-offsets", group, details, run))


@api("DELETE", "/api/share-groups/{group}", "Delete an empty share group: {confirm: group id}")
async def delete_share_group(request: Request) -> Response:
    cluster = cluster_of(request)
    group = request.path_params["group"]
    body = await json_body(request)
    if body.get("confirm") != group:
        raise BadRequest("confirm must repeat the share group's id")
    await audited(request, "delete-share-group", group, {},
                  lambda: cluster.delete_share_group(group))
    return JSONResponse({"deleted": group})
