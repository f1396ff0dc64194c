"""Routes for the Transactions page: every transaction the coordinators know (state, producer
id and epoch, partitions with each open transaction's first offset, start time), and aborting
a hanging one on a partition (audited)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tidelog.console.openapi import api
from tidelog.console.web import audited, blocking, cluster_of, int_param, json_body, str_param


@api("GET", "/api/transactions", "Transactions: id, state, producer id/epoch, timeout, start "
     "time, partitions (with an open transaction's start_offset)")
async def list_transactions(request: Request) -> Response:
    cluster = cluster_of(request)
    return JSONResponse(await blocking(cluster.transactions))


@api("POST", "/api/transactions/abort", "Abort a hanging transaction on one partition: "
     "{topic, partition, start_offset} (kafka-transactions abort --start-offset)")
async def abort_transaction(request: Request) -> Response:
    cluster = cluster_of(request)
    body = await json_body(request)
    topic = str_param(body.get("topic"), "topic")
    partition = int_param(body.get("partition"), "partition", minimum=0, required=True)
    start = int_param(body.get("start_offset"), "start_offset", minimum=0, required=True)
    assert partition is not None and start is not None
    result = await audited(request, "abort-transaction", f"{topic}-{partition}",
                           {"start_offset": start},
                           lambda: cluster.abort_transaction(topic, partition, start))
    return JSONResponse({"aborted": result})
