"""Routes for the Topics page: list, create, describe, delete, alter configs."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tidelog.console.errors import BadRequest
from tidelog.console.openapi import api
from tidelog.console.web import (
    audited,
    blocking,
    cluster_of,
    int_param,
    json_body,
    state_of,
    str_param,
)


@api("GET", "/api/topics", "Topics with partitions, replicas, messages and size")
async def list_topics(request: Request) -> Response:
    state = state_of(request)
    cluster = cluster_of(request)
    topics = await blocking(lambda: cluster.topics(state.history.sizes()))
    return JSONResponse({"topics": topics})


@api("POST", "/api/topics", "Create a topic: {name, partitions, replication_factor, configs}")
async def create_topic(request: Request) -> Response:
    cluster = cluster_of(request)
    body = await json_body(request)
    name = str_param(body.get("name"), "name")
    partitions = int_param(body.get("partitions", 1), "partitions", minimum=1, maximum=10000) or 1
    replication = int_param(body.get("replication_factor", 1), "replication_factor",
                            minimum=1, maximum=100) or 1
    configs = body.get("configs") or {}
    if not isinstance(configs, dict) or not all(isinstance(v, str | int) for v in
                                                configs.values()):
        raise BadRequest("configs must be an object of config name to string value")
    configs = {str(k): str(v) for k, v in configs.items()}
    details = {"partitions": partitions, "replication_factor": replication, "configs": configs}
    await audited(request, "create-topic", name, details,
                  lambda: cluster.create_topic(name, partitions, replication, configs))
    return JSONResponse({"created": name}, status_code=201)


@api("GET", "/api/topics/{topic}", "Per partition leader, replicas, ISR, offsets; configs")
async def get_topic(request: Request) -> Response:
    state = state_of(request)
    cluster = cluster_of(request)
    name = request.path_params["topic"]
    return JSONResponse(await blocking(lambda: cluster.topic(name, state.history.sizes())))


@api("DELETE", "/api/topics/{topic}", "Delete a topic: {confirm: the topic's name}")
async def delete_topic(request: Request) -> Response:
    cluster = cluster_of(request)
    name = request.path_params["topic"]
    body = await json_body(request)
    if body.get("confirm") != name:
        raise BadRequest("type the topic's name in confirm to delete it")
    await audited(request, "delete-topic", name, {},
                  lambda: cluster.delete_topic(name))
    return JSONResponse({"deleted": name})


@api("PATCH", "/api/topics/{topic}/configs", "Alter configs: {set: {name: value}, delete: []}")
async def alter_configs(request: Request) -> Response:
    cluster = cluster_of(request)
    name = request.path_params["topic"]
    body = await json_body(request)
    set_ = body.get("set") or {}
    delete = body.get("delete") or []
    if not isinstance(set_, dict) or not isinstance(delete, list):
        raise BadRequest("set must be an object and delete a list of config names")
    if not set_ and not delete:
        raise BadRequest("nothing to change: give set or delete")
    set_ = {str(k): str(v) for k, v in set_.items()}
    delete = [str(k) for k in delete]
    await audited(request, "alter-topic-configs", name, {"set": set_, "delete": delete},
                  lambda: cluster.alter_topic_configs(name, set_, delete))
    return JSONResponse({"configs": await blocking(lambda: cluster.topic_configs(name))})
