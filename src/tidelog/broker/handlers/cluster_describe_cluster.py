"""Cluster-mode DescribeCluster: every live broker and the controller, from the view.

The single node's handler (admin.py) answers the checks, errors and authorized operations;
in a cluster its one-broker list is replaced by the live brokers' endpoints on the listener
the request came in on (as Metadata answers), and `controller_id` by the active controller's
(ZooKeeper mode: a broker). Kafka's tools rely on it: kafka-reassign-partitions.sh refuses
a plan naming a broker DescribeCluster does not list. Runs on the event loop.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

from tidelog.broker.handlers.admin import handle_describe_cluster
from tidelog.broker.handlers.cluster_as_admin import admin_deps
from tidelog.broker.handlers.cluster_common import ClusterDeps
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.errors import ErrorCode
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey


async def handle_cluster_describe_cluster(
    deps: ClusterDeps, context: RequestContext, request: Any
) -> Any:
    answer = await handle_describe_cluster(admin_deps(deps), context, request)
    view = deps.replication.view
    if answer.error_code != ErrorCode.NONE or view is None:
        return answer
    module = responses.response_module(ApiKey.DESCRIBE_CLUSTER, context.header.api_version)
    brokers = []
    for broker_id in sorted(view.brokers):
        endpoint = view.endpoint(broker_id, context.listener_name)
        if endpoint is not None:
            brokers.append(responses.build(
                module.DescribeClusterBroker, broker_id=broker_id, host=endpoint[0],
                port=endpoint[1], rack=None,
            ))
    return dataclasses.replace(
        answer, brokers=tuple(brokers),
        controller_id=view.controller_id if view.controller_id >= 0 else answer.controller_id,
    )


def handlers(deps: ClusterDeps) -> HandlerTable:
    return {ApiKey.DESCRIBE_CLUSTER: partial(handle_cluster_describe_cluster, deps)}
