"""Routes for the Overview page: the cluster's brokers (/api/cluster) and the throughput history
scraped from the brokers' /metrics (/api/metrics; its live stream is in `routes_streams`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tidelog.console.errors import ConsoleError
from tidelog.console.openapi import api
from tidelog.console.web import blocking, cluster_of, state_of


@api("GET", "/api/cluster", "Cluster id, controller, brokers (up/down), metrics endpoints")
async def get_cluster(request: Request) -> Response:
    state = state_of(request)
    cluster = cluster_of(request)
    metrics = [{"url": u, "up": state.history.up.get(u), "error": state.history.errors.get(u),
                "disk_bytes": state.history.disk_bytes(u)} for u in state.config.metrics]
    try:
        overview = await blocking(cluster.overview)
    except ConsoleError as error:
        brokers = [{**b, "up": False, "controller": False}
                   for b in state.known_brokers.values()]
        return JSONResponse({"reachable": False, "error": str(error), "brokers": brokers,
                             "bootstrap": state.config.bootstrap, "metrics": metrics})
    live = {b["id"] for b in overview["brokers"]}
    for b in overview["brokers"]:
        state.known_brokers[b["id"]] = {**b, "up": True}
    brokers = [{**b, "up": b["id"] in live, "partitions_led": b["partitions_led"]
                if b["id"] in live else 0}
               for b in sorted(state.known_brokers.values(), key=lambda b: b["id"])]
    return JSONResponse({"reachable": True, **overview, "brokers": brokers,
                         "bootstrap": state.config.bootstrap, "metrics": metrics})


@api("GET", "/api/metrics", "Throughput history (15 minutes) from the brokers' /metrics")
async def get_metrics(request: Request) -> Response:
    state = state_of(request)
    return JSONResponse({"available": bool(state.config.metrics),
                         "points": list(state.history.points)})
