"""DescribeLogDirs (key 35, v1-5): this broker's log directory and the partitions in it.

Tidelog keeps every partition in one directory (`--data-dir`, Kafka's `log.dirs` with one
entry), so the answer is one result: its absolute path, each partition's size on disk, an
offset lag of 0 (Kafka's max(0, high watermark - log end offset) for a current replica, never
positive; Tidelog has no future replicas: AlterReplicaLogDirs is not served), v4+ the
filesystem's total and usable bytes, v5 `is_cordoned` false. Topics null asks for every
partition; a named partition this broker does not hold is left out, as in Kafka. DESCRIBE on
the cluster is required (KafkaApis: CLUSTER_AUTHORIZATION_FAILED, v3+ at the top level).
Runs on the event loop; `os.statvfs` is one short system call.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from tidelog.broker.handlers.authorization import Op, cluster_allowed
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.topic_registry import TopicRegistry
from tidelog.errors import ErrorCode
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.security.authorizer import Authorizer
from tidelog.storage.log import PartitionLog


@dataclass(frozen=True, slots=True)
class LogDirsDeps:
    data_dir: Path
    topics: TopicRegistry
    authorizer: Authorizer | None = None  # None: no ACL checks (authorizer.class.name unset)


def _wanted(request: Any) -> set[tuple[str, int]] | None:
    if request.topics is None:
        return None
    return {(t.topic, int(p)) for t in request.topics for p in t.partitions}


def _selected(
    logs: Iterable[PartitionLog], wanted: set[tuple[str, int]] | None
) -> dict[str, list[PartitionLog]]:
    by_topic: dict[str, list[PartitionLog]] = {}
    for partition_log in logs:
        tp = partition_log.topic_partition
        if wanted is None or (tp.topic, tp.partition) in wanted:
            by_topic.setdefault(tp.topic, []).append(partition_log)
    return by_topic


async def handle_describe_log_dirs(
    deps: LogDirsDeps, context: RequestContext, request: Any
) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.DESCRIBE_LOG_DIRS, version)
    cls = responses.response_class(ApiKey.DESCRIBE_LOG_DIRS, version)
    if deps.authorizer is not None and not cluster_allowed(deps.authorizer, context, Op.DESCRIBE):
        return responses.build(
            cls, throttle_time=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=()
        )
    by_topic = _selected(deps.topics.local_logs(), _wanted(request))
    topics = tuple(
        responses.build(
            module.DescribeLogDirsTopic,
            name=name,
            partitions=tuple(
                responses.build(
                    module.DescribeLogDirsPartition,
                    partition_index=partition_log.topic_partition.partition,
                    partition_size=partition_log.size_bytes(),
                    offset_lag=0,
                    is_future_key=False,
                )
                for partition_log in sorted(logs, key=lambda p: p.topic_partition.partition)
            ),
        )
        for name, logs in sorted(by_topic.items())
    )
    data_dir = deps.data_dir.resolve()
    disk = os.statvfs(data_dir)
    result = responses.build(
        module.DescribeLogDirsResult,
        error_code=ErrorCode.NONE,
        log_dir=str(data_dir),
        topics=topics,
        total_bytes=disk.f_blocks * disk.f_frsize,
        usable_bytes=disk.f_bavail * disk.f_frsize,
        is_cordoned=False,
    )
    return responses.build(cls, throttle_time=0, error_code=ErrorCode.NONE, results=(result,))


def handlers(deps: LogDirsDeps) -> HandlerTable:
    return {ApiKey.DESCRIBE_LOG_DIRS: partial(handle_describe_log_dirs, deps)}
