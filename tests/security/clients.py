"""Real-client actions for the ACL tests: each runs one API through confluent-kafka and
returns the Kafka error name it ended with ("" for success). Every wait has a deadline."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)

from broker.raw import RawClient, request_module
from tidelog.errors import ErrorCode

FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 1, 2, 3, 8, 9
FIND_COORDINATOR, INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH, DESCRIBE_ACLS = 10, 22, 23, 29
CREATE_ACLS = 30
CREATE_TOPICS, OFFSET_DELETE, DESCRIBE_CLUSTER = 19, 47, 60
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
ANONYMOUS = "User:ANONYMOUS"
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
WAIT_S = 20.0

_QUIET = logging.getLogger("tests.security.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def admin(bootstrap: str) -> AdminClient:
    """Keep the client in a variable until its futures resolve: a collected AdminClient fails
    them with _DESTROY."""
    return AdminClient({"bootstrap.servers": bootstrap, "logger": _QUIET})


def acl(
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    *,
    allow: bool = True,
    principal: str = ANONYMOUS,
    host: str = "*",
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
) -> AclBinding:
    permission = AclPermissionType.ALLOW if allow else AclPermissionType.DENY
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


ADMIN_ACL = acl(ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER)
EVERY_ACL = AclBindingFilter(
    ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
    AclPermissionType.ANY,
)


# Every ACL except ADMIN_ACL (deleting that one would lock the tests out).
_ALL_BUT_ADMIN = [
    AclBindingFilter(
        resource_type, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY,
    )
    for resource_type in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID)
] + [
    AclBindingFilter(
        ResourceType.BROKER, None, ResourcePatternType.ANY, None, None, operation,
        AclPermissionType.ANY,
    )
    for operation in AclOperation
    if operation not in (AclOperation.ANY, AclOperation.UNKNOWN, AclOperation.ALTER)
] + [
    AclBindingFilter(
        ResourceType.BROKER, None, ResourcePatternType.ANY, None, None, AclOperation.ALTER,
        AclPermissionType.DENY,
    )
]


def write_acls_file(data_dir: Path, bindings: Iterable[dict[str, str]]) -> None:
    """Seed `<data-dir>/acls.json` (docs/security.md) before the broker's first start."""
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "acls.json").write_text(json.dumps({"version": 1, "acls": list(bindings)}))


ADMIN_ACL_JSON = {
    "resource_type": "CLUSTER", "pattern_type": "LITERAL", "name": "kafka-cluster",
    "principal": ANONYMOUS, "host": "*", "operation": "ALTER", "permission_type": "ALLOW",
}


def error_of(future: Any) -> str:
    try:
        future.result(timeout=WAIT_S)
    except KafkaException as error:
        return str(error.args[0].name())
    return ""


def set_acls(bootstrap: str, bindings: list[AclBinding]) -> None:
    """Replace every ACL by ADMIN_ACL + `bindings` (needs ALTER on the cluster: ADMIN_ACL)."""
    client = admin(bootstrap)
    for future in client.delete_acls(_ALL_BUT_ADMIN).values():
        future.result(timeout=WAIT_S)
    wanted = [ADMIN_ACL, *bindings]
    for binding, future in client.create_acls(wanted).items():
        assert error_of(future) == "", binding


def produce(bootstrap: str, topic: str, *, idempotent: bool = False) -> str:
    outcome: list[str] = []
    fatal: list[str] = []

    def delivered(error: KafkaError | None, _message: Any) -> None:
        outcome.append("" if error is None else error.name())

    def on_error(error: KafkaError) -> None:
        if error.fatal():
            fatal.append(error.name())

    producer = Producer({
        "bootstrap.servers": bootstrap, "enable.idempotence": idempotent,
        "message.timeout.ms": 10000, "logger": _QUIET, "error_cb": on_error,
    })
    try:
        producer.produce(topic, b"value", callback=delivered)
    except KafkaException as error:  # fatal already (InitProducerId refused)
        return str(error.args[0].name())
    deadline = time.monotonic() + WAIT_S
    while not outcome and not fatal and time.monotonic() < deadline:
        try:
            producer.poll(0.1)
        except KafkaException as error:  # the fatal error, raised once error_cb ran
            return str(error.args[0].name())
    if not fatal:  # a fatal producer raises on purge and flush
        producer.purge()
        producer.flush(1)
    if fatal:
        return fatal[0]
    assert outcome, "no delivery report"
    return outcome[0]


def fetch(bootstrap: str, topic: str) -> str:
    """Read partition 0 from the beginning with assign() (Metadata, ListOffsets, Fetch);
    "" once a record arrives. A refused Metadata reaches only error_cb."""
    reported: list[str] = []
    consumer = _group_consumer(bootstrap, unique("fetch"), reported)
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and not reported:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                return str(message.error().name())
            return ""
        return reported[0] if reported else "TIMED_OUT"
    finally:
        consumer.close()


def consume_in_group(bootstrap: str, topic: str, group: str) -> str:
    """subscribe() + poll until a record (FindCoordinator, JoinGroup, SyncGroup, OffsetFetch,
    Fetch), then a synchronous commit (OffsetCommit)."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "logger": _QUIET,
    })
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    continue
                return str(message.error().name())
            try:
                consumer.commit(message=message, asynchronous=False)
            except KafkaException as error:
                return str(error.args[0].name())
            return ""
        return "TIMED_OUT"
    finally:
        consumer.close()


def _broker_error(local: str, reported: list[str]) -> str:
    """librdkafka answers a refused FindCoordinator with a local error (_WAIT_COORD,
    _TIMED_OUT) on the call and the broker's code on error_cb: the broker's wins."""
    return reported[0] if local.startswith("_") and reported else local


def _drain_errors(consumer: Consumer, reported: list[str]) -> None:
    """error_cb runs inside poll(): poll until it has run (bounded)."""
    deadline = time.monotonic() + 5.0
    while not reported and time.monotonic() < deadline:
        consumer.poll(0.1)


def _group_consumer(bootstrap: str, group: str, reported: list[str]) -> Consumer:
    def on_error(error: KafkaError) -> None:
        if not error.name().startswith("_"):
            reported.append(error.name())

    return Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "logger": _QUIET, "error_cb": on_error,
    })


def commit_offset(bootstrap: str, topic: str, group: str) -> str:
    """A simple consumer's commit (assign, no membership): FindCoordinator, OffsetCommit."""
    reported: list[str] = []
    consumer = _group_consumer(bootstrap, group, reported)
    try:
        result = consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        errors = [tp.error for tp in result or () if tp.error is not None]
        return errors[0].name() if errors else ""
    except KafkaException as error:
        _drain_errors(consumer, reported)
        return _broker_error(str(error.args[0].name()), reported)
    finally:
        consumer.close()


def committed(bootstrap: str, topic: str, group: str) -> str:
    """FindCoordinator, OffsetFetch for one named partition."""
    reported: list[str] = []
    consumer = _group_consumer(bootstrap, group, reported)
    try:
        result = consumer.committed([TopicPartition(topic, 0)], timeout=5)
        errors = [tp.error for tp in result if tp.error is not None]
        return errors[0].name() if errors else ""
    except KafkaException as error:
        _drain_errors(consumer, reported)
        return _broker_error(str(error.args[0].name()), reported)
    finally:
        consumer.close()


def topic_metadata(bootstrap: str, topic: str) -> str:
    client = admin(bootstrap)
    metadata = client.list_topics(topic=topic, timeout=WAIT_S)
    error = metadata.topics[topic].error
    return "" if error is None else str(error.name())


def listed_topics(bootstrap: str) -> set[str]:
    client = admin(bootstrap)
    return set(client.list_topics(timeout=WAIT_S).topics)


def list_offsets(bootstrap: str, topic: str) -> str:
    client = admin(bootstrap)
    futures = client.list_offsets(
        {TopicPartition(topic, 0): OffsetSpec.latest()}, request_timeout=WAIT_S
    )
    return error_of(next(iter(futures.values())))


def create_topic(bootstrap: str, topic: str) -> str:
    client = admin(bootstrap)
    futures = client.create_topics([NewTopic(topic, 1)], request_timeout=WAIT_S)
    return error_of(futures[topic])


def delete_topic(bootstrap: str, topic: str) -> str:
    client = admin(bootstrap)
    futures = client.delete_topics([topic], request_timeout=WAIT_S)
    return error_of(futures[topic])


def create_partitions(bootstrap: str, topic: str) -> str:
    client = admin(bootstrap)
    futures = client.create_partitions(
        [NewPartitions(topic, 2)], validate_only=True, request_timeout=WAIT_S
    )
    return error_of(futures[topic])


def describe_configs(bootstrap: str, topic: str) -> str:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    client = admin(bootstrap)
    return error_of(client.describe_configs([resource])[resource])


def alter_configs(bootstrap: str, topic: str) -> str:
    resource = ConfigResource(
        ConfigResource.Type.TOPIC, topic,
        incremental_configs=[ConfigEntry("retention.ms", "3600000",
                                         incremental_operation=AlterConfigOpType.SET)],
    )
    client = admin(bootstrap)
    return error_of(client.incremental_alter_configs([resource])[resource])


def delete_records(bootstrap: str, topic: str) -> str:
    client = admin(bootstrap)
    futures = client.delete_records([TopicPartition(topic, 0, 0)])
    return error_of(next(iter(futures.values())))


def describe_group(bootstrap: str, group: str) -> str:
    client = admin(bootstrap)
    futures = client.describe_consumer_groups([group], request_timeout=WAIT_S)
    return error_of(futures[group])


def listed_groups(bootstrap: str) -> set[str]:
    client = admin(bootstrap)
    result = client.list_consumer_groups(request_timeout=WAIT_S).result(WAIT_S)
    return {listing.group_id for listing in result.valid}


def delete_group(bootstrap: str, group: str) -> str:
    client = admin(bootstrap)
    futures = client.delete_consumer_groups([group], request_timeout=WAIT_S)
    return error_of(futures[group])


def describe_cluster(bootstrap: str) -> str:
    """DescribeCluster v1 on the wire (librdkafka's describe_cluster sends Metadata)."""
    with RawClient(bootstrap) as client:
        module = request_module(DESCRIBE_CLUSTER, 1)
        response = client.call(DESCRIBE_CLUSTER, 1, module.DescribeClusterRequest(
            include_cluster_authorized_operations=False, endpoint_type=1,
        ))
    return _code_name(response.error_code)


def list_offsets_raw(bootstrap: str, topic: str) -> str:
    """ListOffsets v7 on the wire: librdkafka asks Metadata first and stops there."""
    with RawClient(bootstrap) as client:
        module = request_module(LIST_OFFSETS, 7)
        response = client.call(LIST_OFFSETS, 7, module.ListOffsetsRequest(
            replica_id=-1, isolation_level=0, topics=(module.ListOffsetsTopic(
                name=topic, partitions=(
                    module.ListOffsetsPartition(partition_index=0, timestamp=-1),
                ),
            ),),
        ))
    return _code_name(response.topics[0].partitions[0].error_code)


def fetch_raw(bootstrap: str, topic: str) -> str:
    """Fetch v11 of partition 0 from offset 0 on the wire."""
    with RawClient(bootstrap) as client:
        module = request_module(FETCH, 11)
        partition = module.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20, log_start_offset=-1
        )
        response = client.call(FETCH, 11, module.FetchRequest(
            replica_id=-1, max_wait=timedelta(0), min_bytes=0, max_bytes=1 << 20,
            isolation_level=0, topics=(module.FetchTopic(topic=topic, partitions=(partition,)),),
            forgotten_topics_data=(),
        ))
    return _code_name(response.responses[0].partitions[0].error_code)


def offset_commit_raw(bootstrap: str, topic: str, group: str) -> str:
    """OffsetCommit v8 of a simple consumer (generation -1, no member) on the wire."""
    with RawClient(bootstrap) as client:
        module = request_module(OFFSET_COMMIT, 8)
        response = client.call(OFFSET_COMMIT, 8, module.OffsetCommitRequest(
            group_id=group, member_id="", topics=(module.OffsetCommitRequestTopic(
                name=topic, partitions=(module.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1, committed_metadata=None,
                ),),
            ),),
        ))
    return _code_name(response.topics[0].partitions[0].error_code)


def offset_fetch_raw(bootstrap: str, topic: str, group: str) -> str:
    """OffsetFetch v7 for one named partition: the group's error, else the partition's."""
    with RawClient(bootstrap) as client:
        module = request_module(OFFSET_FETCH, 7)
        response = client.call(OFFSET_FETCH, 7, module.OffsetFetchRequest(
            group_id=group,
            topics=(module.OffsetFetchRequestTopic(name=topic, partition_indexes=(0,)),),
        ))
    group_error = _code_name(response.error_code)
    if group_error or not response.topics:
        return group_error
    return _code_name(response.topics[0].partitions[0].error_code)


def init_producer_id_raw(bootstrap: str) -> str:
    """InitProducerId v4 of an idempotent (non-transactional) producer on the wire."""
    with RawClient(bootstrap) as client:
        module = request_module(INIT_PRODUCER_ID, 4)
        response = client.call(INIT_PRODUCER_ID, 4, module.InitProducerIdRequest(
            transactional_id=None, transaction_timeout=timedelta(minutes=1), producer_id=-1,
            producer_epoch=-1,
        ))
    return _code_name(response.error_code)


def describe_acls_raw(bootstrap: str) -> str:
    """DescribeAcls v3 (every ACL) on the wire: confluent-kafka's describe_acls drops the
    top-level error and answers an empty list."""
    with RawClient(bootstrap) as client:
        module = request_module(DESCRIBE_ACLS, 3)
        response = client.call(DESCRIBE_ACLS, 3, module.DescribeAclsRequest(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
            principal_filter=None, host_filter=None, operation=1, permission_type=1,
        ))
    return _code_name(response.error_code)


def offset_delete_raw(bootstrap: str, topic: str, group: str) -> str:
    """OffsetDelete v0 of partition 0: the top-level error, else the partition's."""
    with RawClient(bootstrap) as client:
        module = request_module(OFFSET_DELETE, 0)
        response = client.call(OFFSET_DELETE, 0, module.OffsetDeleteRequest(
            group_id=group, topics=(module.OffsetDeleteRequestTopic(
                name=topic, partitions=(module.OffsetDeleteRequestPartition(partition_index=0),),
            ),),
        ))
    top = _code_name(response.error_code)
    return top or _code_name(response.topics[0].partitions[0].error_code)


def offset_for_leader_epoch_raw(bootstrap: str, topic: str, replica_id: int = -1) -> str:
    with RawClient(bootstrap) as client:
        module = request_module(OFFSET_FOR_LEADER_EPOCH, 4)
        response = client.call(OFFSET_FOR_LEADER_EPOCH, 4, module.OffsetForLeaderEpochRequest(
            replica_id=replica_id, topics=(module.OffsetForLeaderTopic(
                topic=topic, partitions=(module.OffsetForLeaderPartition(
                    partition=0, leader_epoch=0,
                ),),
            ),),
        ))
    return _code_name(response.topics[0].partitions[0].error_code)


def consumer_group_heartbeat_raw(bootstrap: str, topic: str, group: str) -> str:
    """A KIP-848 member joining (ConsumerGroupHeartbeat v0, epoch 0) subscribed to `topic`."""
    with RawClient(bootstrap) as client:
        module = request_module(CONSUMER_GROUP_HEARTBEAT, 0)
        response = client.call(CONSUMER_GROUP_HEARTBEAT, 0, module.ConsumerGroupHeartbeatRequest(
            group_id=group, member_id="", member_epoch=0,
            rebalance_timeout=timedelta(seconds=30), subscribed_topic_names=(topic,),
            topic_partitions=(),
        ))
    return _code_name(response.error_code)


def find_transaction_coordinator_raw(bootstrap: str, transactional_id: str) -> str:
    with RawClient(bootstrap) as client:
        module = request_module(FIND_COORDINATOR, 4)
        response = client.call(FIND_COORDINATOR, 4, module.FindCoordinatorRequest(
            key_type=1, coordinator_keys=(transactional_id,),
        ))
    return _code_name(response.coordinators[0].error_code)


def create_topic_raw(bootstrap: str, topic: str) -> Any:
    """CreateTopics v7 (validate only); returns the topic's result entity."""
    with RawClient(bootstrap) as client:
        module = request_module(CREATE_TOPICS, 7)
        response = client.call(CREATE_TOPICS, 7, module.CreateTopicsRequest(
            topics=(module.CreatableTopic(
                name=topic, num_partitions=2, replication_factor=1, assignments=(), configs=(),
            ),),
            timeout=timedelta(seconds=10), validate_only=True,
        ))
    return response.topics[0]


def consumer_group_describe_raw(bootstrap: str, group: str) -> Any:
    """ConsumerGroupDescribe v0 with authorized operations; returns the group's entity."""
    with RawClient(bootstrap) as client:
        module = request_module(CONSUMER_GROUP_DESCRIBE, 0)
        response = client.call(CONSUMER_GROUP_DESCRIBE, 0, module.ConsumerGroupDescribeRequest(
            group_ids=(group,), include_authorized_operations=True,
        ))
    return response.groups[0]


def code_name(code: Any) -> str:
    """A kio error code as its Kafka name, "" for NONE."""
    return _code_name(code)


def create_acls_raw(bootstrap: str, creations: list[dict[str, Any]]) -> list[str]:
    """CreateAcls v3 with raw field values (codes as integers); each creation's error."""
    with RawClient(bootstrap) as client:
        module = request_module(CREATE_ACLS, 3)
        response = client.call(CREATE_ACLS, 3, module.CreateAclsRequest(
            creations=tuple(module.AclCreation(**fields) for fields in creations),
        ))
    return [_code_name(result.error_code) for result in response.results]


def describe_acls_filter_raw(bootstrap: str, **fields: Any) -> str:
    """DescribeAcls v3 with raw filter values: its top-level error."""
    values: dict[str, Any] = {
        "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
        "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1,
    }
    values.update(fields)
    with RawClient(bootstrap) as client:
        module = request_module(DESCRIBE_ACLS, 3)
        response = client.call(DESCRIBE_ACLS, 3, module.DescribeAclsRequest(**values))
    return _code_name(response.error_code)


def offset_fetch_v1_raw(bootstrap: str, topic: str, group: str) -> list[str]:
    """OffsetFetch v1 (no top-level error): each partition's error."""
    with RawClient(bootstrap) as client:
        module = request_module(OFFSET_FETCH, 1)
        response = client.call(OFFSET_FETCH, 1, module.OffsetFetchRequest(
            group_id=group,
            topics=(module.OffsetFetchRequestTopic(name=topic, partition_indexes=(0,)),),
        ))
    return [_code_name(p.error_code) for t in response.topics for p in t.partitions]


def follower_fetch_raw(bootstrap: str, topic: str) -> str:
    """Fetch v11 as a follower (replica_id 1)."""
    with RawClient(bootstrap) as client:
        module = request_module(FETCH, 11)
        partition = module.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20, log_start_offset=-1
        )
        response = client.call(FETCH, 11, module.FetchRequest(
            replica_id=1, max_wait=timedelta(0), min_bytes=0, max_bytes=1 << 20,
            isolation_level=0, topics=(module.FetchTopic(topic=topic, partitions=(partition,)),),
            forgotten_topics_data=(),
        ))
    return _code_name(response.responses[0].partitions[0].error_code)


def topic_id_raw(bootstrap: str, topic: str) -> Any:
    """The topic's id from Metadata v12 (needs DESCRIBE on it)."""
    with RawClient(bootstrap) as client:
        module = request_module(METADATA, 12)
        return client.call(METADATA, 12, module.MetadataRequest(
            topics=(module.MetadataRequestTopic(name=topic, topic_id=None),),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False,
        )).topics[0].topic_id


def follower_fetch_v15_raw(bootstrap: str, topic_id: Any) -> str:
    """Fetch v15 as a follower: replica_state.replica_id 1 (KIP-903), the topic by id."""
    with RawClient(bootstrap) as client:
        module = request_module(FETCH, 15)
        partition = module.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20, log_start_offset=-1
        )
        response = client.call(FETCH, 15, module.FetchRequest(
            replica_state=module.ReplicaState(replica_id=1, replica_epoch=-1),
            max_wait=timedelta(0), min_bytes=0, max_bytes=1 << 20, isolation_level=0,
            topics=(module.FetchTopic(topic_id=topic_id, partitions=(partition,)),),
            forgotten_topics_data=(),
        ))
    return _code_name(response.responses[0].partitions[0].error_code)


def _code_name(code: Any) -> str:
    name = ErrorCode(int(getattr(code, "value", code))).name
    return "" if name == "NONE" else name


def cluster_operations(bootstrap: str) -> set[str]:
    client = admin(bootstrap)
    result = client.describe_cluster(
        include_authorized_operations=True, request_timeout=WAIT_S
    ).result(WAIT_S)
    return {operation.name for operation in result.authorized_operations or ()}
