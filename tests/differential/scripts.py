"""The scripted sessions: every exchange the differential test sends to both brokers.

Names of topics and groups carry the run's token, so the sessions can be replayed against
long-lived brokers. Records are written with fixed timestamps (September 2020) so that every
timestamp Kafka or Tidelog derives from them is compared exactly; only wall-clock ones are
masked (see compare.MASK_RULES).
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Callable, Sequence
from typing import Any

from .harness import Session, Step
from .wire import _crc32c

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, API_VERSIONS = 15, 16, 18
CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, INIT_PRODUCER_ID = 19, 20, 21, 22
OFFSET_FOR_LEADER_EPOCH, DESCRIBE_CONFIGS, ALTER_CONFIGS, CREATE_PARTITIONS = 23, 32, 33, 37
DELETE_GROUPS, INCREMENTAL_ALTER_CONFIGS, OFFSET_DELETE = 42, 44, 47
DESCRIBE_CLUSTER, CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 60, 68, 69
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
WRITE_TXN_MARKERS = 27
DESCRIBE_LOG_DIRS = 35
DESCRIBE_TOPIC_PARTITIONS = 75
ELECT_LEADERS = 43
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51
SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 77, 78, 79
DESCRIBE_SHARE_GROUP_OFFSETS, ALTER_SHARE_GROUP_OFFSETS, DELETE_SHARE_GROUP_OFFSETS = 90, 91, 92
DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
GET_TELEMETRY_SUBSCRIPTIONS, PUSH_TELEMETRY, LIST_CONFIG_RESOURCES = 71, 72, 74
CLIENT_METRICS = 16

API_NAMES = {
    PRODUCE: "Produce", FETCH: "Fetch", LIST_OFFSETS: "ListOffsets", METADATA: "Metadata",
    OFFSET_COMMIT: "OffsetCommit", OFFSET_FETCH: "OffsetFetch",
    FIND_COORDINATOR: "FindCoordinator", JOIN_GROUP: "JoinGroup", HEARTBEAT: "Heartbeat",
    LEAVE_GROUP: "LeaveGroup", SYNC_GROUP: "SyncGroup", DESCRIBE_GROUPS: "DescribeGroups",
    LIST_GROUPS: "ListGroups", API_VERSIONS: "ApiVersions", CREATE_TOPICS: "CreateTopics",
    DELETE_TOPICS: "DeleteTopics", DELETE_RECORDS: "DeleteRecords",
    INIT_PRODUCER_ID: "InitProducerId", OFFSET_FOR_LEADER_EPOCH: "OffsetForLeaderEpoch",
    DESCRIBE_CONFIGS: "DescribeConfigs", ALTER_CONFIGS: "AlterConfigs",
    CREATE_PARTITIONS: "CreatePartitions",
    DELETE_GROUPS: "DeleteGroups", INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigs",
    OFFSET_DELETE: "OffsetDelete", DESCRIBE_CLUSTER: "DescribeCluster",
    DESCRIBE_LOG_DIRS: "DescribeLogDirs", DESCRIBE_TOPIC_PARTITIONS: "DescribeTopicPartitions",
    GET_TELEMETRY_SUBSCRIPTIONS: "GetTelemetrySubscriptions", PUSH_TELEMETRY: "PushTelemetry",
    LIST_CONFIG_RESOURCES: "ListConfigResources",
    ELECT_LEADERS: "ElectLeaders",
    ALTER_PARTITION_REASSIGNMENTS: "AlterPartitionReassignments",
    LIST_PARTITION_REASSIGNMENTS: "ListPartitionReassignments",
    CONSUMER_GROUP_HEARTBEAT: "ConsumerGroupHeartbeat",
    CONSUMER_GROUP_DESCRIBE: "ConsumerGroupDescribe",
    DESCRIBE_ACLS: "DescribeAcls", CREATE_ACLS: "CreateAcls", DELETE_ACLS: "DeleteAcls",
    ADD_PARTITIONS_TO_TXN: "AddPartitionsToTxn", ADD_OFFSETS_TO_TXN: "AddOffsetsToTxn",
    END_TXN: "EndTxn", TXN_OFFSET_COMMIT: "TxnOffsetCommit",
    DESCRIBE_PRODUCERS: "DescribeProducers", DESCRIBE_TRANSACTIONS: "DescribeTransactions",
    LIST_TRANSACTIONS: "ListTransactions", WRITE_TXN_MARKERS: "WriteTxnMarkers",
    SASL_HANDSHAKE: "SaslHandshake", SASL_AUTHENTICATE: "SaslAuthenticate",
    DESCRIBE_USER_SCRAM_CREDENTIALS: "DescribeUserScramCredentials",
    ALTER_USER_SCRAM_CREDENTIALS: "AlterUserScramCredentials",
    SHARE_GROUP_HEARTBEAT: "ShareGroupHeartbeat", SHARE_GROUP_DESCRIBE: "ShareGroupDescribe",
    SHARE_FETCH: "ShareFetch", SHARE_ACKNOWLEDGE: "ShareAcknowledge",
    DESCRIBE_SHARE_GROUP_OFFSETS: "DescribeShareGroupOffsets",
    ALTER_SHARE_GROUP_OFFSETS: "AlterShareGroupOffsets",
    DELETE_SHARE_GROUP_OFFSETS: "DeleteShareGroupOffsets",
    DESCRIBE_CLIENT_QUOTAS: "DescribeClientQuotas", ALTER_CLIENT_QUOTAS: "AlterClientQuotas",
}
T0 = 1_600_000_000_000  # 2020-09-13T12:26:40Z: every record timestamp is T0 + something
TOPIC, BROKER = 2, 4  # DescribeConfigs resource types
OK = "NONE(0)"

Ctx = dict[str, Any]


# ---------------------------------------------------------------- record batches


def batch(
    records: Sequence[tuple[str | None, str | None, int]],
    *,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
    magic: int = 2,
    last_offset_delta: int | None = None,
    count: int | None = None,
    bad_crc: bool = False,
    gzip_codec: bool = False,
) -> bytes:
    """A magic v2 batch of (key, value, timestamp offset from T0) records."""
    section = bytearray()
    base_ts = T0 + records[0][2]
    for delta, (key, value, ts) in enumerate(records):
        body = bytearray(b"\x00")
        body += _varint(T0 + ts - base_ts) + _varint(delta)
        for part in (key, value):
            if part is None:
                body += _varint(-1)
            else:
                raw = part.encode()
                body += _varint(len(raw)) + raw
        body += _varint(0)
        section += _varint(len(body)) + body
    payload = bytes(section)
    if gzip_codec:
        payload = gzip.compress(payload, mtime=0)
        attributes |= 1
    head = struct.pack(
        ">hiqqqhii",
        attributes,
        len(records) - 1 if last_offset_delta is None else last_offset_delta,
        base_ts,
        max(T0 + r[2] for r in records),
        producer_id,
        producer_epoch,
        base_sequence,
        len(records) if count is None else count,
    )
    crc = _crc32c(head + payload) ^ (0xFFFF if bad_crc else 0)
    after_length = struct.pack(">ibI", -1, magic, crc) + head + payload
    return struct.pack(">qi", base_offset, len(after_length)) + after_length


def _varint(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw & ~0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def records(n: int, start: int = 0, prefix: str = "v") -> list[tuple[str | None, str | None, int]]:
    return [(f"k{start + i}", f"{prefix}{start + i}", (start + i) * 1000) for i in range(n)]


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


def assignment(topic: str, partitions: Sequence[int]) -> bytes:
    """ConsumerProtocolAssignment v0."""
    out = struct.pack(">hih", 0, 1, len(topic)) + topic.encode()
    out += struct.pack(">i", len(partitions)) + b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


# ---------------------------------------------------------------- request bodies


def md(version: int, topics: Sequence[str] | None, auto: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"topics": None if topics is None else [{"name": t} for t in topics]}
    if version >= 4:
        body["allow_auto_topic_creation"] = auto
    return body


def create_body(
    name: str,
    partitions: int = 1,
    rf: int = 1,
    configs: dict[str, str | None] | None = None,
    validate_only: bool = False,
    assignments: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "topics": [topic(name, partitions, rf, configs, assignments)],
        "timeout": 30000,
        "validate_only": validate_only,
    }


def topic(
    name: str,
    partitions: int = 1,
    rf: int = 1,
    configs: dict[str, str | None] | None = None,
    assignments: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": rf,
        "assignments": assignments or [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
    }


def produce_body(
    name: str, parts: dict[int, bytes | None], acks: int = -1, txn: str | None = None
) -> dict[str, Any]:
    return {
        "transactional_id": txn,
        "acks": acks,
        "timeout": 10000,
        "topic_data": [
            {
                "name": name,
                "partition_data": [{"index": p, "records": data} for p, data in parts.items()],
            }
        ],
    }


def fetch_body(
    version: int,
    name: str,
    offset: int,
    *,
    partition: int = 0,
    max_bytes: int = 1 << 20,
    partition_max_bytes: int = 1 << 20,
    isolation: int = 0,
    max_wait: int = 0,
    min_bytes: int = 0,
    session_id: int = 0,
    session_epoch: int = -1,
    current_leader_epoch: int = -1,
    topic_id: str | None = None,
) -> dict[str, Any]:
    part: dict[str, Any] = {
        "partition": partition,
        "fetch_offset": offset,
        "partition_max_bytes": partition_max_bytes,
    }
    if version >= 9:
        part["current_leader_epoch"] = current_leader_epoch
    body: dict[str, Any] = {
        "max_wait": max_wait,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": isolation,
        "topics": [
            {"topic_id" if version >= 13 else "topic": topic_id or name, "partitions": [part]}
        ],
    }
    if version >= 7:
        body["session_id"] = session_id
        body["session_epoch"] = session_epoch
    return body


def list_offsets_body(
    version: int,
    name: str,
    timestamps: dict[int, int],
    isolation: int = 0,
    current_leader_epoch: int | None = None,
) -> dict[str, Any]:
    parts = []
    for partition, ts in timestamps.items():
        part: dict[str, Any] = {"partition_index": partition, "timestamp": ts}
        if current_leader_epoch is not None:
            part["current_leader_epoch"] = current_leader_epoch
        parts.append(part)
    body: dict[str, Any] = {"replica_id": -1, "topics": [{"name": name, "partitions": parts}]}
    if version >= 2:
        body["isolation_level"] = isolation
    if version >= 10:
        body["timeout"] = 5000
    return body


def commit_body(
    group: str,
    name: str,
    offsets: dict[int, int],
    generation: int = -1,
    member: str = "",
    metadata: str | None = "",
) -> dict[str, Any]:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member,
        "topics": [
            {
                "name": name,
                "partitions": [
                    {"partition_index": p, "committed_offset": o, "committed_metadata": metadata}
                    for p, o in offsets.items()
                ],
            }
        ],
    }


def offset_fetch_v8(
    group: str, name: str | None, partitions: Sequence[int] = (0,), require_stable: bool = False
) -> dict[str, Any]:
    topics = None if name is None else [{"name": name, "partition_indexes": list(partitions)}]
    return {"groups": [{"group_id": group, "topics": topics}], "require_stable": require_stable}


def join_body(
    group: str,
    name: str,
    member: str | Callable[[Ctx], str] = "",
    *,
    session_timeout: int = 30000,
    protocol_type: str = "consumer",
    protocols: Sequence[str] = ("range",),
    instance: str | None = None,
) -> Callable[[Ctx], dict[str, Any]]:
    def body(ctx: Ctx) -> dict[str, Any]:
        return {
            "group_id": group,
            "session_timeout": session_timeout,
            "rebalance_timeout": 30000,
            "member_id": member(ctx) if callable(member) else member,
            "group_instance_id": instance,
            "protocol_type": protocol_type,
            "protocols": [{"name": p, "metadata": subscription(name)} for p in protocols],
            "reason": None,
        }

    return body


def config_resource(
    rtype: int, name: str, keys: Sequence[str] | None
) -> dict[str, Any]:
    return {
        "resource_type": rtype,
        "resource_name": name,
        "configuration_keys": None if keys is None else list(keys),
    }


def alter_body(
    rtype: int, name: str, ops: Sequence[tuple[str, int, str | None]], validate_only: bool = False
) -> dict[str, Any]:
    return {
        "resources": [
            {
                "resource_type": rtype,
                "resource_name": name,
                "configs": [
                    {"name": k, "config_operation": op, "value": v} for k, op, v in ops
                ],
            }
        ],
        "validate_only": validate_only,
    }


# ---------------------------------------------------------------- setup steps


def _error_of(response: Any, *path: Any) -> Any:
    try:
        for part in path:
            response = response[part]
        return response
    except (KeyError, IndexError, TypeError):
        return None


def setup_topic(
    name: str, partitions: int = 1, configs: dict[str, str | None] | None = None
) -> list[Step]:
    """Create a topic (not compared) and wait until its metadata shows every leader."""

    def ready(response: Any) -> bool:
        topics = response.get("topics") or []
        return (
            bool(topics)
            and topics[0]["error_code"] == OK
            and len(topics[0]["partitions"]) == partitions
            and all(p["error_code"] == OK and p["leader_id"] >= 0 for p in topics[0]["partitions"])
        )

    return [
        Step(
            f"setup-create-{name}",
            CREATE_TOPICS,
            7,
            create_body(name, partitions, configs=configs),
            compare=False,
            until=lambda r: _error_of(r, "topics", 0, "error_code")
            in (OK, "TOPIC_ALREADY_EXISTS(36)"),
        ),
        setup_wait_topic(name, ready),
    ]


def setup_wait_topic(name: str, ready: Callable[[Any], bool]) -> Step:
    return Step(
        f"setup-wait-{name}", METADATA, 12, md(12, [name]), compare=False, until=ready
    )


def setup_produce(name: str, partition: int, data: bytes) -> Step:
    return Step(
        f"setup-produce-{name}-{partition}-{len(data)}",
        PRODUCE,
        9,
        produce_body(name, {partition: data}),
        compare=False,
        until=lambda r: _error_of(r, "responses", 0, "partition_responses", 0, "error_code")
        == OK,
    )


def setup_coordinator(key: str, key_type: int = 0) -> list[Step]:
    """Wait until the group (or transaction) coordinator for ``key`` is available and has
    loaded its partition of the internal topic (Kafka answers NOT_COORDINATOR or
    COORDINATOR_LOAD_IN_PROGRESS meanwhile)."""
    steps = [
        Step(
            f"setup-coordinator-{key_type}-{key}",
            FIND_COORDINATOR,
            4,
            {"key_type": key_type, "coordinator_keys": [key]},
            compare=False,
            until=lambda r: _error_of(r, "coordinators", 0, "error_code") == OK,
        )
    ]
    if key_type == 0:
        steps.append(
            Step(
                f"setup-loaded-{key}",
                OFFSET_FETCH,
                8,
                offset_fetch_v8(key, None),
                compare=False,
                until=lambda r: _error_of(r, "groups", 0, "error_code") == OK,
            )
        )
    return steps


def setup_producer_ids() -> Step:
    """Kafka answers COORDINATOR_LOAD_IN_PROGRESS until its first block of producer ids
    arrives from the controller."""
    return Step(
        "setup-producer-ids",
        INIT_PRODUCER_ID,
        4,
        {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
         "producer_epoch": -1},
        compare=False,
        until=lambda r: _error_of(r, "error_code") == OK,
    )


def capture_topic_id(key: str) -> Callable[[Any, Ctx], None]:
    def capture(response: Any, ctx: Ctx) -> None:
        ctx[key] = response["topics"][0]["topic_id"]

    return capture


# ---------------------------------------------------------------- the sessions


def sessions(token: str) -> list[Session]:
    t = f"{token}-"
    return [
        _bootstrap(t),
        _api_versions(t),
        _metadata(t),
        _create_topics(t),
        _create_partitions(t),
        _delete_topics(t),
        _produce(t),
        _idempotence(t),
        _fetch(t),
        _list_offsets(t),
        _offset_for_leader_epoch(t),
        _delete_records(t),
        _offsets(t),
        _classic_group(t),
        _consumer_group(t),
        _share_group(t),
        _groups_admin(t),
        _configs(t),
        _init_producer_id(t),
        _transactions(t),
        _describe_cluster(t),
        _describe_topic_partitions(t),
        _acls(t),
        _internal_topics(t),
        _sasl_on_plaintext(t),
        _scram_users(t),
        _client_quotas(t),
        _client_metrics(t),
    ]


def _bootstrap(t: str) -> Session:
    def node(response: Any, ctx: Ctx) -> None:
        ctx["node"] = response["brokers"][0]["node_id"]

    return Session(
        "bootstrap",
        [Step("self", METADATA, 12, md(12, []), compare=False, capture=node)],
    )


def _api_versions_transform(kafka: Any, tidelog: Any) -> tuple[Any, Any]:
    """Compare only the APIs Tidelog serves, and each max version as "Kafka >= Tidelog"."""
    if not (isinstance(kafka, dict) and isinstance(tidelog, dict)):
        return kafka, tidelog
    served = {k["api_key"]: k for k in tidelog.get("api_keys", [])}
    kept = []
    for entry in kafka.get("api_keys", []):
        mine = served.get(entry["api_key"])
        if mine is None:
            continue
        entry = dict(entry)
        if entry["max_version"] >= mine["max_version"]:
            entry["max_version"] = mine["max_version"]
        kept.append(entry)
    kafka = {**kafka, "api_keys": kept}
    return kafka, tidelog


def _api_versions(t: str) -> Session:
    steps = [
        Step(f"v{v}", API_VERSIONS, v, {}, transform=_api_versions_transform)
        for v in range(0, 3)
    ]
    for v in (3, 4):
        steps.append(
            Step(
                f"v{v}",
                API_VERSIONS,
                v,
                {"client_software_name": "tidelog-diff", "client_software_version": "1.0"},
                transform=_api_versions_transform,
            )
        )
    steps += [
        Step(
            "v3-bad-software-name",
            API_VERSIONS,
            3,
            {"client_software_name": "bad name!", "client_software_version": "1.0"},
            transform=_api_versions_transform,
        ),
        Step(
            "v127-unsupported",
            API_VERSIONS,
            127,
            # What a newer client sends: request header v2 (the empty tagged-field byte after
            # the client id) and a v3-shaped body. Kafka reads a header of an unknown
            # ApiVersions version as v2 and answers in the v0 layout (KIP-511).
            b"\x00" + bytes([13]) + b"tidelog-diff" + bytes([4]) + b"1.0" + b"\x00",
            response_version=0,
            transform=_api_versions_transform,
        ),
        Step("metadata-v99-unsupported", METADATA, 99, b"\x00\x00\x00\x00"),
        Step("unknown-api-key-999", 999, 0, b""),
        Step("after-close-metadata", METADATA, 12, md(12, [])),
    ]
    return Session("api_versions", steps)


def _sasl_on_plaintext(t: str) -> Session:
    """Both brokers' harness listener is PLAINTEXT: the SASL APIs are out of place there and
    Kafka answers ILLEGAL_SASL_STATE (KafkaApis); the SASL exchanges themselves are tested
    with real clients in tests/security."""
    steps = [Step(f"handshake-v{v}", SASL_HANDSHAKE, v, {"mechanism": "PLAIN"})
             for v in (0, 1)]
    steps += [Step(f"authenticate-v{v}", SASL_AUTHENTICATE, v, {"auth_bytes": b"\x00a\x00b"})
              for v in (0, 1, 2)]
    steps.append(Step("after-sasl-metadata", METADATA, 12, md(12, [])))
    return Session("sasl_on_plaintext", steps)


def _scram_users(t: str) -> Session:
    """SCRAM users through the admin API (Kafka: KRaft metadata; Tidelog: the data dir)."""

    def upsert(name: str, mechanism: int = 1, iterations: int = 4096) -> dict[str, Any]:
        return {"name": name, "mechanism": mechanism, "iterations": iterations,
                "salt": b"0123456789abcdef", "salted_password": bytes(range(32))}

    def alter(deletions: list[tuple[str, int]], upsertions: list[dict[str, Any]]
              ) -> dict[str, Any]:
        return {"deletions": [{"name": n, "mechanism": m} for n, m in deletions],
                "upsertions": upsertions}

    def describe(*names: str) -> dict[str, Any]:
        return {"users": [{"name": n} for n in names]}

    def described(response: Any) -> bool:
        return all(r["error_code"] == OK for r in response["results"])

    u = f"{t}scram"
    steps = [
        Step("alter-upsert", ALTER_USER_SCRAM_CREDENTIALS, 0, alter([], [upsert(f"{u}1")])),
        Step("describe-one", DESCRIBE_USER_SCRAM_CREDENTIALS, 0, describe(f"{u}1"),
             until=described),
        Step("describe-missing", DESCRIBE_USER_SCRAM_CREDENTIALS, 0, describe(f"{u}none")),
        Step("describe-duplicate", DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
             describe(f"{u}1", f"{u}1")),
        Step("alter-too-few-iterations", ALTER_USER_SCRAM_CREDENTIALS, 0,
             alter([], [upsert(f"{u}2", iterations=10)])),
        Step("alter-too-many-iterations", ALTER_USER_SCRAM_CREDENTIALS, 0,
             alter([], [upsert(f"{u}2", iterations=100_000)])),
        Step("alter-unknown-mechanism", ALTER_USER_SCRAM_CREDENTIALS, 0,
             alter([], [upsert(f"{u}3", mechanism=0)])),
        Step("alter-delete-missing", ALTER_USER_SCRAM_CREDENTIALS, 0, alter([(f"{u}4", 1)], [])),
        Step("alter-twice", ALTER_USER_SCRAM_CREDENTIALS, 0,
             alter([], [upsert(f"{u}5"), upsert(f"{u}5")])),
        Step("alter-empty-name", ALTER_USER_SCRAM_CREDENTIALS, 0, alter([], [upsert("")])),
        Step("alter-delete", ALTER_USER_SCRAM_CREDENTIALS, 0, alter([(f"{u}1", 1)], [])),
    ]
    return Session("scram_users", steps)


def _client_metrics(t: str) -> Session:
    """KIP-714: CLIENT_METRICS config resources (IncrementalAlterConfigs, DescribeConfigs),
    ListConfigResources, then the telemetry APIs themselves, which Kafka serves only with a
    telemetry receiver plugin configured (the peer has none: it closes the connection)."""
    name = f"{t}cm"

    def alter(configs: list[tuple[str, int, str | None]], resource: str = name,
              validate_only: bool = False) -> dict[str, Any]:
        return {"resources": [{"resource_type": CLIENT_METRICS, "resource_name": resource,
                               "configs": [{"name": n, "config_operation": op, "value": v}
                                           for n, op, v in configs]}],
                "validate_only": validate_only}

    def describe(resource: str) -> dict[str, Any]:
        return {"resources": [config_resource(CLIENT_METRICS, resource, None)],
                "include_synonyms": False, "include_documentation": False}

    def listed(response: Any) -> bool:
        return any(r["resource_name"] == name for r in response.get("config_resources", []))

    def only_mine(kafka: Any, tidelog: Any) -> tuple[Any, Any]:
        def keep(response: Any) -> Any:
            if not isinstance(response, dict):
                return response
            return {**response, "config_resources": [
                r for r in response.get("config_resources", []) if r["resource_name"] == name]}
        return keep(kafka), keep(tidelog)

    steps = [
        Step("alter-v1-set", INCREMENTAL_ALTER_CONFIGS, 1, alter([
            ("metrics", 0, "org.apache.kafka.producer., org.apache.kafka.consumer."),
            ("interval.ms", 0, "1000"),
            ("match", 0, "client_software_name=librdkafka"),
        ])),
        Step("alter-v1-append", INCREMENTAL_ALTER_CONFIGS, 1,
             alter([("metrics", 2, "org.apache.kafka.admin.")])),
        Step("list-v1-client-metrics", LIST_CONFIG_RESOURCES, 1,
             {"resource_types": [CLIENT_METRICS]}, until=listed, transform=only_mine),
        Step("list-v0", LIST_CONFIG_RESOURCES, 0, {}, until=listed, transform=only_mine),
        Step("describe-v4", DESCRIBE_CONFIGS, 4, describe(name)),
        Step("describe-v4-unknown", DESCRIBE_CONFIGS, 4, describe(f"{t}cm-absent")),
        Step("describe-v4-empty-name", DESCRIBE_CONFIGS, 4, describe("")),
        Step("alter-v1-interval-too-small", INCREMENTAL_ALTER_CONFIGS, 1,
             alter([("interval.ms", 0, "50")])),
        Step("alter-v1-unknown-config", INCREMENTAL_ALTER_CONFIGS, 1,
             alter([("colour", 0, "blue")])),
        Step("alter-v1-bad-match", INCREMENTAL_ALTER_CONFIGS, 1,
             alter([("match", 0, "client_colour=blue")])),
        Step("alter-v1-append-interval", INCREMENTAL_ALTER_CONFIGS, 1,
             alter([("interval.ms", 2, "5")])),
        Step("alter-v1-validate-only", INCREMENTAL_ALTER_CONFIGS, 1,
             alter([("metrics", 0, "*")], validate_only=True)),
        Step("list-v1-unknown-type", LIST_CONFIG_RESOURCES, 1, {"resource_types": [7]}),
        Step("get-subscriptions-v0", GET_TELEMETRY_SUBSCRIPTIONS, 0,
             {"client_instance_id": None}, timeout_s=5.0),
        Step("push-v0-unknown-instance", PUSH_TELEMETRY, 0, {
            "client_instance_id": "6e1d6a0e-8f1a-4e0a-9c38-6d2b0c2f5d11", "subscription_id": 1,
            "terminating": False, "compression_type": 0, "metrics": b"",
        }, timeout_s=5.0),
    ]
    return Session("client_metrics", steps)


def _client_quotas(t: str) -> Session:
    """Describe/AlterClientQuotas (Kafka: KRaft metadata; Tidelog: the data dir). One entry
    per AlterClientQuotas step: Kafka answers entries in its map's order."""

    def entry(parts: list[tuple[str, str | None]], ops: list[tuple[str, float, bool]]
              ) -> dict[str, Any]:
        return {"entity": [{"entity_type": k, "entity_name": n} for k, n in parts],
                "ops": [{"key": k, "value": v, "remove": r} for k, v, r in ops]}

    def alter(parts: list[tuple[str, str | None]], ops: list[tuple[str, float, bool]],
              validate_only: bool = False) -> dict[str, Any]:
        return {"entries": [entry(parts, ops)], "validate_only": validate_only}

    def describe(components: list[tuple[str, int, str | None]], strict: bool = True
                 ) -> dict[str, Any]:
        return {"components": [{"entity_type": k, "match_type": m, "match": s}
                               for k, m, s in components], "strict": strict}

    def found(response: Any) -> bool:
        return bool(response["entries"])

    user, client = f"{t}quser", f"{t}qclient"
    rate = [("producer_byte_rate", 1024.0, False)]
    steps = [
        Step("alter-user", ALTER_CLIENT_QUOTAS, 1,
             alter([("user", user)], [*rate, ("request_percentage", 12.5, False)])),
        Step("alter-user-default-client", ALTER_CLIENT_QUOTAS, 0,
             alter([("user", user), ("client-id", None)], [("consumer_byte_rate", 2048.0, False)])),
        Step("describe-user", DESCRIBE_CLIENT_QUOTAS, 1, describe([("user", 0, user)]),
             until=found),
        Step("describe-user-any-client", DESCRIBE_CLIENT_QUOTAS, 0,
             describe([("user", 0, user), ("client-id", 2, None)]), until=found),
        Step("describe-missing", DESCRIBE_CLIENT_QUOTAS, 1, describe([("client-id", 0, client)])),
        Step("describe-unknown-type", DESCRIBE_CLIENT_QUOTAS, 1, describe([("group", 0, "g")])),
        Step("describe-exact-null", DESCRIBE_CLIENT_QUOTAS, 1, describe([("user", 0, None)])),
        Step("describe-default-with-match", DESCRIBE_CLIENT_QUOTAS, 1,
             describe([("user", 1, "x")])),
        Step("describe-twice", DESCRIBE_CLIENT_QUOTAS, 1,
             describe([("user", 0, user), ("user", 2, None)])),
        Step("describe-ip-with-user", DESCRIBE_CLIENT_QUOTAS, 1,
             describe([("user", 0, user), ("ip", 2, None)])),
        Step("describe-bad-match-type", DESCRIBE_CLIENT_QUOTAS, 1, describe([("user", 9, None)])),
        Step("alter-validate-only", ALTER_CLIENT_QUOTAS, 1,
             alter([("client-id", client)], rate, validate_only=True)),
        Step("describe-after-validate-only", DESCRIBE_CLIENT_QUOTAS, 1,
             describe([("client-id", 0, client)])),
        Step("alter-empty-entity", ALTER_CLIENT_QUOTAS, 1, alter([], rate)),
        Step("alter-unknown-type", ALTER_CLIENT_QUOTAS, 1, alter([("group", "g")], rate)),
        Step("alter-empty-name", ALTER_CLIENT_QUOTAS, 1, alter([("user", "")], rate)),
        Step("alter-ip-with-user", ALTER_CLIENT_QUOTAS, 1,
             alter([("user", user), ("ip", "127.0.0.1")], rate)),
        Step("alter-unknown-key", ALTER_CLIENT_QUOTAS, 1,
             alter([("user", user)], [("foo", 1, False)])),
        Step("alter-zero", ALTER_CLIENT_QUOTAS, 1,
             alter([("user", user)], [("producer_byte_rate", 0.0, False)])),
        Step("alter-fraction", ALTER_CLIENT_QUOTAS, 1,
             alter([("user", user)], [("producer_byte_rate", 1.5, False)])),
        Step("alter-ip-key-on-user", ALTER_CLIENT_QUOTAS, 1,
             alter([("user", user)], [("connection_creation_rate", 5.0, False)])),
        Step("alter-remove", ALTER_CLIENT_QUOTAS, 1,
             alter([("user", user)], [("producer_byte_rate", 0.0, True),
                                      ("request_percentage", 0.0, True)])),
        Step("alter-remove-other", ALTER_CLIENT_QUOTAS, 1,
             alter([("user", user), ("client-id", None)], [("consumer_byte_rate", 0.0, True)])),
    ]
    return Session("client_quotas", steps)


def _metadata(t: str) -> Session:
    m1, absent, auto = f"{t}m1", f"{t}absent", f"{t}auto"
    steps = setup_topic(m1, 3)
    for v in (0, 1, 4, 7, 9, 10, 12, 13):
        steps.append(
            Step(
                f"v{v}-present",
                METADATA,
                v,
                md(v, [m1]),
                capture=capture_topic_id("m1_id") if v == 12 else None,
            )
        )
    steps += [
        Step("v4-absent-no-auto", METADATA, 4, md(4, [absent])),
        Step("v12-absent-no-auto", METADATA, 12, md(12, [absent])),
        Step("v12-empty-list", METADATA, 12, md(12, [])),
        Step("v12-invalid-name-auto", METADATA, 12, md(12, [f"{t}bad/name"], auto=True)),
        Step("v12-invalid-name-no-auto", METADATA, 12, md(12, ["bad name!"])),
        Step("v12-duplicate-topic", METADATA, 12, md(12, [m1, m1])),
        Step("v12-present-and-absent", METADATA, 12, md(12, [m1, absent])),
        Step(
            "v12-by-topic-id",
            METADATA,
            12,
            lambda ctx: {"topics": [{"topic_id": ctx["m1_id"], "name": None}]},
        ),
        Step(
            "v12-unknown-topic-id",
            METADATA,
            12,
            {"topics": [{"topic_id": "0b5f2d9c-1a2b-4c3d-8e4f-5a6b7c8d9e0f", "name": None}]},
        ),
        Step(
            "v8-authorized-operations",
            METADATA,
            8,
            {
                "topics": [{"name": m1}],
                "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": True,
                "include_topic_authorized_operations": True,
            },
        ),
        Step("v12-all-topics", METADATA, 12, md(12, None), transform=only_run_topics(t)),
        Step("v1-all-topics", METADATA, 1, md(1, None), transform=only_run_topics(t)),
        Step("v4-auto-create", METADATA, 4, md(4, [auto], auto=True)),
        Step(
            "setup-auto-created",
            METADATA,
            12,
            md(12, [auto]),
            compare=False,
            until=lambda r: _error_of(r, "topics", 0, "partitions", 0, "error_code") == OK,
        ),
        Step("v12-after-auto-create", METADATA, 12, md(12, [auto])),
        Step("v0-absent-auto-creates", METADATA, 0, md(0, [f"{t}auto0"])),
    ]
    return Session("metadata", steps)


def only_run_topics(t: str) -> Callable[[Any, Any], tuple[Any, Any]]:
    """Metadata of every topic: keep the run's own topics (a peer may hold others, and each
    broker has its own internal topics, compared in internal_topics)."""

    def keep(response: Any) -> Any:
        if isinstance(response, dict) and isinstance(response.get("topics"), list):
            topics = [x for x in response["topics"] if str(x.get("name", "")).startswith(t)]
            return {**response, "topics": topics}
        return response

    return lambda kafka, tidelog: (keep(kafka), keep(tidelog))


def _create_topics(t: str) -> Session:
    c = f"{t}c-"

    def manual(ctx: Ctx) -> dict[str, Any]:
        return create_body(
            f"{c}manual",
            -1,
            -1,
            assignments=[{"partition_index": 0, "broker_ids": [ctx["node"]]},
                         {"partition_index": 1, "broker_ids": [ctx["node"]]}],
        )

    def manual_and_count(ctx: Ctx) -> dict[str, Any]:
        return create_body(
            f"{c}manual-count",
            2,
            -1,
            assignments=[{"partition_index": 0, "broker_ids": [ctx["node"]]}],
        )

    steps = [
        Step("v7-ok", CREATE_TOPICS, 7, create_body(f"{c}ok", 2)),
        Step("v7-already-exists", CREATE_TOPICS, 7, create_body(f"{c}ok", 2)),
        Step("v2-ok", CREATE_TOPICS, 2, create_body(f"{c}v2", 1)),
        Step("v4-ok", CREATE_TOPICS, 4, create_body(f"{c}v4", 1)),
        Step("v5-ok-returns-configs", CREATE_TOPICS, 5, create_body(f"{c}v5", 1)),
        Step(
            "v7-validate-only",
            CREATE_TOPICS,
            7,
            create_body(f"{c}validate", 4, validate_only=True),
        ),
        Step("v12-after-validate-only", METADATA, 12, md(12, [f"{c}validate"])),
        Step(
            "v7-duplicate-in-request",
            CREATE_TOPICS,
            7,
            {"topics": [topic(f"{c}dup"), topic(f"{c}dup")], "timeout": 30000},
        ),
        Step("v7-empty-name", CREATE_TOPICS, 7, create_body("")),
        Step("v7-slash-name", CREATE_TOPICS, 7, create_body(f"{c}a/b")),
        Step("v7-dot-name", CREATE_TOPICS, 7, create_body(".")),
        Step("v7-dotdot-name", CREATE_TOPICS, 7, create_body("..")),
        Step("v7-space-name", CREATE_TOPICS, 7, create_body(f"{c}a b")),
        Step("v7-name-250-chars", CREATE_TOPICS, 7, create_body(c + "x" * (250 - len(c)))),
        Step("v7-name-249-chars", CREATE_TOPICS, 7, create_body(c + "y" * (249 - len(c)))),
        Step("v7-zero-partitions", CREATE_TOPICS, 7, create_body(f"{c}p0", 0)),
        Step("v7-negative-partitions", CREATE_TOPICS, 7, create_body(f"{c}pneg", -5)),
        Step("v7-default-partitions", CREATE_TOPICS, 7, create_body(f"{c}pdef", -1, -1)),
        Step("v7-replication-factor-3", CREATE_TOPICS, 7, create_body(f"{c}rf3", 1, 3)),
        Step("v7-replication-factor-0", CREATE_TOPICS, 7, create_body(f"{c}rf0", 1, 0)),
        Step("v7-replication-factor-neg2", CREATE_TOPICS, 7, create_body(f"{c}rfn", 1, -2)),
        Step(
            "v7-bad-cleanup-policy",
            CREATE_TOPICS,
            7,
            create_body(f"{c}cfg1", configs={"cleanup.policy": "bogus"}),
        ),
        Step(
            "v7-non-numeric-retention",
            CREATE_TOPICS,
            7,
            create_body(f"{c}cfg2", configs={"retention.ms": "abc"}),
        ),
        Step(
            "v7-unknown-config",
            CREATE_TOPICS,
            7,
            create_body(f"{c}cfg3", configs={"no.such.config": "1"}),
        ),
        Step(
            "v7-segment-bytes-too-small",
            CREATE_TOPICS,
            7,
            create_body(f"{c}cfg4", configs={"segment.bytes": "10"}),
        ),
        Step(
            "v7-bad-compression-type",
            CREATE_TOPICS,
            7,
            create_body(f"{c}cfg5", configs={"compression.type": "zip"}),
        ),
        Step(
            "v7-bad-timestamp-type",
            CREATE_TOPICS,
            7,
            create_body(f"{c}cfg6", configs={"message.timestamp.type": "WallClock"}),
        ),
        Step(
            "v7-null-config-value",
            CREATE_TOPICS,
            7,
            create_body(f"{c}cfg7", configs={"retention.ms": None}),
        ),
        Step(
            "v7-good-configs",
            CREATE_TOPICS,
            7,
            create_body(
                f"{c}cfg8",
                configs={"cleanup.policy": "compact,delete", "retention.ms": "3600000"},
            ),
        ),
        Step(
            "v7-min-insync-above-rf",
            CREATE_TOPICS,
            7,
            create_body(f"{c}cfg9", configs={"min.insync.replicas": "3"}),
        ),
        Step("v7-manual-assignment", CREATE_TOPICS, 7, manual),
        Step("v7-assignment-and-count", CREATE_TOPICS, 7, manual_and_count),
        Step(
            "v7-assignment-unknown-broker",
            CREATE_TOPICS,
            7,
            create_body(
                f"{c}manual-bad",
                -1,
                -1,
                assignments=[{"partition_index": 0, "broker_ids": [4242]}],
            ),
        ),
        Step("v7-collides-with-dot", CREATE_TOPICS, 7, create_body(f"{c}col.x")),
        Step("v7-collides-with-underscore", CREATE_TOPICS, 7, create_body(f"{c}col_x")),
        Step(
            "v7-mixed-good-and-bad",
            CREATE_TOPICS,
            7,
            {"topics": [topic(f"{c}mix-good"), topic(f"{c}mix-bad", 0)], "timeout": 30000},
        ),
    ]
    for step in steps:
        if step.api_key == CREATE_TOPICS and step.name != "v7-ok":
            step.transform = shared_configs
    steps[0].transform = _config_names_only
    return Session("create_topics", steps)


def shared_configs(kafka: Any, tidelog: Any) -> tuple[Any, Any]:
    """Drop the config entries only one broker lists (both brokers, recursively, in every
    ``configs`` list of named entries): which names each broker knows is compared once, in
    create_topics.v7-ok and configs.describe-v4-topic-all-names; elsewhere the values of the
    shared names are compared."""
    if isinstance(kafka, dict) and isinstance(tidelog, dict):
        kafka, tidelog = dict(kafka), dict(tidelog)
        for key in set(kafka) & set(tidelog):
            a, b = kafka[key], tidelog[key]
            if key == "configs" and _named(a) and _named(b):
                names = {c["name"] for c in a} & {c["name"] for c in b}
                kafka[key] = [c for c in a if c["name"] in names]
                tidelog[key] = [c for c in b if c["name"] in names]
            else:
                kafka[key], tidelog[key] = shared_configs(a, b)
        return kafka, tidelog
    if isinstance(kafka, list) and isinstance(tidelog, list) and len(kafka) == len(tidelog):
        pairs = [shared_configs(a, b) for a, b in zip(kafka, tidelog, strict=True)]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    return kafka, tidelog


def _named(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(c, dict) and "name" in c for c in value)


def _create_partitions(t: str) -> Session:
    cp = f"{t}cp"
    body = lambda name, count, validate=False, assignments=None: {  # noqa: E731
        "topics": [{"name": name, "count": count, "assignments": assignments}],
        "timeout": 30000,
        "validate_only": validate,
    }
    steps = setup_topic(cp, 1)
    steps += [
        Step("v3-grow-to-3", CREATE_PARTITIONS, 3, body(cp, 3)),
        Step(
            "setup-grown",
            METADATA,
            12,
            md(12, [cp]),
            compare=False,
            until=lambda r: len(_error_of(r, "topics", 0, "partitions") or []) == 3,
        ),
        Step("v12-after-grow", METADATA, 12, md(12, [cp])),
        Step("v3-same-count", CREATE_PARTITIONS, 3, body(cp, 3)),
        Step("v3-shrink", CREATE_PARTITIONS, 3, body(cp, 2)),
        Step("v0-validate-only", CREATE_PARTITIONS, 0, body(cp, 5, True)),
        Step("v3-unknown-topic", CREATE_PARTITIONS, 3, body(f"{t}cp-absent", 2)),
        Step(
            "v3-duplicate-topic",
            CREATE_PARTITIONS,
            3,
            {
                "topics": [
                    {"name": cp, "count": 6, "assignments": None},
                    {"name": cp, "count": 7, "assignments": None},
                ],
                "timeout": 30000,
                "validate_only": False,
            },
        ),
        Step(
            "v3-assignment-count-mismatch",
            CREATE_PARTITIONS,
            3,
            lambda ctx: body(cp, 5, assignments=[{"broker_ids": [ctx["node"]]}]),
        ),
        Step(
            "v3-assignment-unknown-broker",
            CREATE_PARTITIONS,
            3,
            body(cp, 4, assignments=[{"broker_ids": [4242]}]),
        ),
    ]
    return Session("create_partitions", steps)


def _delete_topics(t: str) -> Session:
    d1, d2, d3 = f"{t}del1", f"{t}del2", f"{t}del3"
    steps = setup_topic(d1) + setup_topic(d2) + setup_topic(d3)
    steps.append(
        Step("setup-id", METADATA, 12, md(12, [d2]), compare=False, capture=capture_topic_id("d2"))
    )
    steps += [
        Step("v4-by-name", DELETE_TOPICS, 4, {"topic_names": [d1], "timeout": 30000}),
        Step(
            "setup-gone",
            METADATA,
            12,
            md(12, [d1]),
            compare=False,
            until=lambda r: _error_of(r, "topics", 0, "error_code") != OK,
        ),
        Step("v12-after-delete", METADATA, 12, md(12, [d1])),
        Step("v4-unknown-name", DELETE_TOPICS, 4, {"topic_names": [d1], "timeout": 30000}),
        Step(
            "v6-by-id",
            DELETE_TOPICS,
            6,
            lambda ctx: {"topics": [{"name": None, "topic_id": ctx["d2"]}], "timeout": 30000},
        ),
        Step(
            "v6-unknown-id",
            DELETE_TOPICS,
            6,
            {
                "topics": [{"name": None, "topic_id": "0b5f2d9c-1a2b-4c3d-8e4f-5a6b7c8d9e0f"}],
                "timeout": 30000,
            },
        ),
        Step(
            "v6-name-and-id",
            DELETE_TOPICS,
            6,
            {
                "topics": [{"name": d3, "topic_id": "0b5f2d9c-1a2b-4c3d-8e4f-5a6b7c8d9e0f"}],
                "timeout": 30000,
            },
        ),
        Step(
            "v6-duplicate-name",
            DELETE_TOPICS,
            6,
            {
                "topics": [
                    {"name": d3, "topic_id": None},
                    {"name": d3, "topic_id": None},
                ],
                "timeout": 30000,
            },
        ),
        Step("v1-invalid-name", DELETE_TOPICS, 1, {"topic_names": ["bad name!"], "timeout": 30000}),
    ]
    return Session("delete_topics", steps)


def _produce(t: str) -> Session:
    p, p3, small, lat = f"{t}p", f"{t}p3", f"{t}p-small", f"{t}p-lat"
    compacted = f"{t}p-compact"
    steps = (
        setup_topic(p)
        + setup_topic(p3, 3)
        + setup_topic(small, 1, {"max.message.bytes": "200"})
        + setup_topic(lat, 1, {"message.timestamp.type": "LogAppendTime"})
        + setup_topic(compacted, 1, {"cleanup.policy": "compact"})
    )

    def one(name: str, data: bytes | None, acks: int = -1, partition: int = 0) -> dict[str, Any]:
        return produce_body(name, {partition: data}, acks)

    steps += [
        Step("v9-acks-1", PRODUCE, 9, one(p, batch(records(3)), 1)),
        Step("v7-acks-all", PRODUCE, 7, one(p, batch(records(2, 3)))),
        Step("v3-acks-1", PRODUCE, 3, one(p, batch(records(1, 5)), 1)),
        Step("v5-acks-1", PRODUCE, 5, one(p, batch(records(1, 6)), 1)),
        Step("v10-acks-1", PRODUCE, 10, one(p, batch(records(1, 7)), 1)),
        Step("v12-acks-1", PRODUCE, 12, one(p, batch(records(1, 7)), 1)),
        Step("v9-acks-0", PRODUCE, 9, one(p, batch(records(1, 8)), 0), expect_response=False),
        Step("v9-after-acks-0-latest", LIST_OFFSETS, 7, list_offsets_body(7, p, {0: -1})),
        Step("v9-two-batches", PRODUCE, 9, one(p, batch(records(2, 9)) + batch(records(2, 11)))),
        Step("v9-gzip", PRODUCE, 9, one(p, batch(records(3, 13), gzip_codec=True))),
    ]
    # Each malformed batch goes to a topic of its own, so one that a broker appends cannot
    # shift the offsets every later exchange sees.
    edge_cases: list[tuple[str, bytes | None, int]] = [
        ("v9-acks-2", batch(records(1)), 2),
        ("v9-bad-crc", batch(records(1), bad_crc=True), -1),
        ("v9-magic-1", batch(records(1), magic=1), -1),
        ("v9-magic-3", batch(records(1), magic=3), -1),
        ("v9-nonzero-base-offset", batch(records(1), base_offset=500), -1),
        ("v9-last-offset-delta-wrong", batch(records(2), last_offset_delta=5), -1),
        ("v9-count-wrong", batch(records(2), count=3), -1),
        ("v9-truncated-batch", batch(records(2))[:-5], -1),
        ("v9-empty-records", b"", -1),
        ("v9-garbage-records", b"\x00" * 70, -1),
        ("v9-bad-codec-7", batch(records(1), attributes=7), -1),
        ("v9-control-batch-from-client", batch([("\x00\x00\x00\x00", "x", 0)],
                                               attributes=0x20), -1),
        ("v9-transactional-without-txn", batch(records(1), attributes=0x10, producer_id=4000,
                                               producer_epoch=0, base_sequence=0), -1),
    ]
    for name, data, acks in edge_cases:
        edge = f"{t}pe-{name[3:]}"
        steps += setup_topic(edge)
        steps.append(Step(name, PRODUCE, 9, one(edge, data, acks)))
        steps.append(Step(f"{name}-then-latest", LIST_OFFSETS, 7,
                          list_offsets_body(7, edge, {0: -1})))
    steps += [
        Step("v9-null-records", PRODUCE, 9, one(f"{t}pe-magic-1", None), timeout_s=3.0),
        Step("v9-unknown-topic", PRODUCE, 9, one(f"{t}p-absent", batch(records(1)))),
        Step("v9-unknown-partition", PRODUCE, 9, one(p, batch(records(1)), partition=7)),
        Step("v9-negative-partition", PRODUCE, 9, one(p, batch(records(1)), partition=-1)),
        Step(
            "v9-three-partitions-one-bad",
            PRODUCE,
            9,
            produce_body(
                p3,
                {0: batch(records(1)), 1: batch(records(1), bad_crc=True), 2: batch(records(2))},
            ),
        ),
        Step("v9-too-large-for-topic", PRODUCE, 9, one(small, batch([("k", "x" * 300, 0)]))),
        Step("v9-fits-topic", PRODUCE, 9, one(small, batch([("k", "x" * 50, 0)]))),
        Step(
            "v9-too-large-for-broker",
            PRODUCE,
            9,
            one(p, batch([("k", "x" * 1_100_000, 0)])),
        ),
        Step("v9-log-append-time", PRODUCE, 9, one(lat, batch(records(2)))),
        # KIP-467: the keyless records of a batch for a compacted topic are named.
        Step("v9-compacted-keyless-records", PRODUCE, 9, one(compacted, batch(
            [("k", "1", 0), (None, "2", 0), ("k", "3", 0), (None, "4", 0)]))),
        Step("v7-compacted-keyless-record", PRODUCE, 7, one(compacted, batch([(None, "5", 0)]))),
        Step("v9-compacted-keyed", PRODUCE, 9, one(compacted, batch([("k", "6", 0)]))),
        Step("v11-fetch-log-append-time", FETCH, 11, fetch_body(11, lat, 0)),
        Step("v9-empty-topic-data", PRODUCE, 9, {"acks": -1, "timeout": 1000, "topic_data": []}),
        Step("v9-after-all-latest", LIST_OFFSETS, 7, list_offsets_body(7, p, {0: -1})),
        Step("v11-fetch-all", FETCH, 11, fetch_body(11, p, 0)),
    ]
    return Session("produce", steps)


def _idempotence(t: str) -> Session:
    ip = f"{t}idem"
    steps = [*setup_topic(ip, 2), setup_producer_ids()]

    def capture_pid(response: Any, ctx: Ctx) -> None:
        ctx["pid"] = response["producer_id"]
        ctx["epoch"] = response["producer_epoch"]

    def idem(
        seq: int, n: int = 1, epoch_delta: int = 0, pid: int | None = None, partition: int = 0
    ):
        def body(ctx: Ctx) -> dict[str, Any]:
            data = batch(
                records(n, seq),
                producer_id=ctx["pid"] if pid is None else pid,
                producer_epoch=ctx["epoch"] + epoch_delta,
                base_sequence=seq,
            )
            return produce_body(ip, {partition: data})

        return body

    steps += [
        Step("init-producer-id", INIT_PRODUCER_ID, 4, {"transactional_id": None,
             "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1},
             capture=capture_pid),
        Step("v9-seq-0", PRODUCE, 9, idem(0, 2)),
        Step("v9-seq-2", PRODUCE, 9, idem(2, 1)),
        Step("v9-duplicate-seq-2", PRODUCE, 9, idem(2, 1)),
        Step("v9-duplicate-seq-0", PRODUCE, 9, idem(0, 2)),
        Step("v9-seq-gap", PRODUCE, 9, idem(7, 1)),
        Step("v9-old-epoch", PRODUCE, 9, idem(3, 1, epoch_delta=-1)),
        Step("v9-future-epoch-seq-5", PRODUCE, 9, idem(5, 1, epoch_delta=1)),
        Step("v9-unknown-producer-seq-0", PRODUCE, 9, idem(0, 1, pid=999_999)),
        Step("v9-unknown-producer-seq-9", PRODUCE, 9, idem(9, 1, pid=999_998)),
        Step("v9-never-written-partition-seq-5", PRODUCE, 9, idem(5, 1, partition=1)),
        Step("v11-fetch", FETCH, 11, fetch_body(11, ip, 0)),
    ]
    return Session("idempotence", steps)


def _fetch(t: str) -> Session:
    f = f"{t}f"
    steps = setup_topic(f)
    steps += [
        setup_produce(f, 0, batch(records(3))),
        setup_produce(f, 0, batch(records(3, 3))),
        setup_produce(f, 0, batch(records(4, 6))),
        Step("setup-id", METADATA, 12, md(12, [f]), compare=False, capture=capture_topic_id("f")),
    ]

    def session_capture(response: Any, ctx: Ctx) -> None:
        ctx["fetch_session"] = response["session_id"]

    steps += [
        Step("v11-at-start", FETCH, 11, fetch_body(11, f, 0)),
        Step("v17-at-start", FETCH, 17, lambda ctx: fetch_body(17, f, 0, topic_id=ctx["f"])),
        Step("v18-mid-batch", FETCH, 18, lambda ctx: fetch_body(18, f, 4, topic_id=ctx["f"])),
        Step("v11-mid-batch", FETCH, 11, fetch_body(11, f, 4)),
        Step("v11-at-end", FETCH, 11, fetch_body(11, f, 10)),
        Step("v11-beyond-end", FETCH, 11, fetch_body(11, f, 11)),
        Step("v11-far-beyond-end", FETCH, 11, fetch_body(11, f, 1_000_000)),
        Step("v11-negative-offset", FETCH, 11, fetch_body(11, f, -1)),
        Step("v11-max-bytes-1", FETCH, 11, fetch_body(11, f, 0, max_bytes=1)),
        Step("v11-partition-max-bytes-1", FETCH, 11, fetch_body(11, f, 0, partition_max_bytes=1)),
        Step(
            "v11-partition-max-bytes-100",
            FETCH,
            11,
            fetch_body(11, f, 0, partition_max_bytes=100),
        ),
        Step("v11-read-committed", FETCH, 11, fetch_body(11, f, 0, isolation=1)),
        Step("v4-at-start", FETCH, 4, fetch_body(4, f, 0)),
        Step("v4-read-committed", FETCH, 4, fetch_body(4, f, 6, isolation=1)),
        Step("v7-at-start", FETCH, 7, fetch_body(7, f, 3)),
        Step("v12-at-start", FETCH, 12, fetch_body(12, f, 0)),
        Step("v13-by-topic-id", FETCH, 13, lambda ctx: fetch_body(13, f, 0, topic_id=ctx["f"])),
        Step(
            "v13-unknown-topic-id",
            FETCH,
            13,
            fetch_body(13, f, 0, topic_id="0b5f2d9c-1a2b-4c3d-8e4f-5a6b7c8d9e0f"),
        ),
        Step("v16-by-topic-id", FETCH, 16, lambda ctx: fetch_body(16, f, 6, topic_id=ctx["f"])),
        Step("v11-unknown-topic", FETCH, 11, fetch_body(11, f"{t}f-absent", 0)),
        Step("v11-unknown-partition", FETCH, 11, fetch_body(11, f, 0, partition=3)),
        Step(
            "v11-future-leader-epoch",
            FETCH,
            11,
            fetch_body(11, f, 0, current_leader_epoch=7),
        ),
        Step(
            "v11-wait-at-end",
            FETCH,
            11,
            fetch_body(11, f, 10, max_wait=200, min_bytes=1),
        ),
        Step(
            "v11-new-session",
            FETCH,
            11,
            fetch_body(11, f, 0, session_id=0, session_epoch=0),
            capture=session_capture,
        ),
        Step(
            "v11-incremental-session",
            FETCH,
            11,
            lambda ctx: {
                **fetch_body(11, f, 10, session_id=ctx["fetch_session"], session_epoch=1),
                "topics": [],
            },
        ),
        Step(
            "v11-session-bad-epoch",
            FETCH,
            11,
            lambda ctx: fetch_body(11, f, 10, session_id=ctx["fetch_session"], session_epoch=5),
        ),
        Step(
            "v11-unknown-session",
            FETCH,
            11,
            fetch_body(11, f, 0, session_id=123456789, session_epoch=1),
        ),
        Step(
            "v11-close-sessionless",
            FETCH,
            11,
            fetch_body(11, f, 0, session_id=0, session_epoch=-1),
        ),
        Step(
            "v11-two-partitions-same-request",
            FETCH,
            11,
            {
                **fetch_body(11, f, 0),
                "topics": [
                    {
                        "topic": f,
                        "partitions": [
                            {"partition": 0, "fetch_offset": 8, "partition_max_bytes": 1 << 20},
                            {"partition": 1, "fetch_offset": 0, "partition_max_bytes": 1 << 20},
                        ],
                    }
                ],
            },
        ),
        Step("setup-delete-to-3", DELETE_RECORDS, 2, {"topics": [{"name": f, "partitions": [
            {"partition_index": 0, "offset": 3}]}], "timeout": 30000}, compare=False),
        Step("v11-below-log-start", FETCH, 11, fetch_body(11, f, 0)),
        Step("v11-at-log-start", FETCH, 11, fetch_body(11, f, 3)),
    ]
    return Session("fetch", steps)


def _log_dirs_transform(kafka: Any, tidelog: Any) -> tuple[Any, Any]:
    """Each broker's own directory and disk: the path and byte totals become placeholders
    (compared: that both are there and positive); partitions and sizes are compared."""

    def mask(answer: Any) -> Any:
        if not isinstance(answer, dict):
            return answer
        results = []
        for result in answer.get("results", []):
            result = dict(result)
            result["log_dir"] = "<log-dir>" if result.get("log_dir") else result.get("log_dir")
            for key in ("total_bytes", "usable_bytes"):
                if isinstance(result.get(key), int) and result[key] > 0:
                    result[key] = "<bytes>"
            results.append(result)
        return {**answer, "results": results}

    return mask(kafka), mask(tidelog)


def _list_offsets(t: str) -> Session:
    lo = f"{t}lo"
    steps = setup_topic(lo, 2)
    steps += [
        setup_produce(lo, 0, batch([("a", "1", 1000)])),
        setup_produce(lo, 0, batch([("b", "2", 2000), ("c", "3", 5000), ("d", "4", 3000)])),
        setup_produce(lo, 0, batch([("e", "5", 4000)])),
    ]
    cases = [
        ("earliest", -2),
        ("latest", -1),
        ("max-timestamp", -3),
        ("ts-0", 0),
        ("ts-before-first", T0 - 1),
        ("ts-exact-first", T0 + 1000),
        ("ts-between", T0 + 1500),
        ("ts-inside-batch", T0 + 4500),
        ("ts-exact-max", T0 + 5000),
        ("ts-future", T0 + 10_000),
        ("ts-minus-5", -5),
    ]
    for name, ts in cases:
        steps.append(Step(f"v7-{name}", LIST_OFFSETS, 7, list_offsets_body(7, lo, {0: ts})))
    # The tiered-storage specs, each from the version that names it (and one before).
    for version, name, ts in [
        (8, "earliest-local", -4), (8, "latest-tiered", -5), (9, "latest-tiered", -5),
        (10, "latest", -1), (10, "earliest-pending-upload", -6),
        (11, "earliest-pending-upload", -6), (11, "ts-minus-7", -7),
    ]:
        steps.append(
            Step(f"v{version}-{name}", LIST_OFFSETS, version,
                 list_offsets_body(version, lo, {0: ts}))
        )
    steps += [
        Step("v7-empty-partition-latest", LIST_OFFSETS, 7, list_offsets_body(7, lo, {1: -1})),
        # DescribeLogDirs of this topic's partitions (and one that does not exist): the same
        # batches make the same partition sizes on both brokers.
        *[
            Step(f"describe-log-dirs-v{version}", DESCRIBE_LOG_DIRS, version,
                 {"topics": [{"topic": lo, "partitions": [0, 1, 7]}]},
                 transform=_log_dirs_transform)
            for version in (1, 4, 5)
        ],
        Step("describe-log-dirs-v4-no-topics", DESCRIBE_LOG_DIRS, 4, {"topics": []},
             transform=_log_dirs_transform),
        Step("v7-empty-partition-max-ts", LIST_OFFSETS, 7, list_offsets_body(7, lo, {1: -3})),
        Step("v7-empty-partition-ts", LIST_OFFSETS, 7, list_offsets_body(7, lo, {1: T0})),
        Step("v1-latest", LIST_OFFSETS, 1, list_offsets_body(1, lo, {0: -1})),
        Step("v1-ts", LIST_OFFSETS, 1, list_offsets_body(1, lo, {0: T0 + 1500})),
        Step("v4-earliest", LIST_OFFSETS, 4, list_offsets_body(4, lo, {0: -2})),
        Step("v6-read-committed-latest", LIST_OFFSETS, 6,
             list_offsets_body(6, lo, {0: -1}, isolation=1)),
        Step("v7-unknown-partition", LIST_OFFSETS, 7, list_offsets_body(7, lo, {9: -1})),
        Step("v7-unknown-topic", LIST_OFFSETS, 7, list_offsets_body(7, f"{t}lo-absent", {0: -1})),
        Step(
            "v7-future-leader-epoch",
            LIST_OFFSETS,
            7,
            list_offsets_body(7, lo, {0: -1}, current_leader_epoch=9),
        ),
        Step(
            "v7-current-leader-epoch-0",
            LIST_OFFSETS,
            7,
            list_offsets_body(7, lo, {0: -1}, current_leader_epoch=0),
        ),
        Step(
            "v7-duplicate-partition",
            LIST_OFFSETS,
            7,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": lo,
                        "partitions": [
                            {"partition_index": 0, "timestamp": -1},
                            {"partition_index": 0, "timestamp": -2},
                        ],
                    }
                ],
            },
        ),
        Step(
            "setup-delete-to-2",
            DELETE_RECORDS,
            2,
            {"topics": [{"name": lo, "partitions": [{"partition_index": 0, "offset": 2}]}],
             "timeout": 30000},
            compare=False,
        ),
        Step("v7-earliest-after-delete", LIST_OFFSETS, 7, list_offsets_body(7, lo, {0: -2})),
        Step("v7-ts-0-after-delete", LIST_OFFSETS, 7, list_offsets_body(7, lo, {0: 0})),
        Step("v7-max-ts-after-delete", LIST_OFFSETS, 7, list_offsets_body(7, lo, {0: -3})),
        Step("v8-earliest-local-after-delete", LIST_OFFSETS, 8,
             list_offsets_body(8, lo, {0: -4})),
    ]
    return Session("list_offsets", steps)


def _offset_for_leader_epoch(t: str) -> Session:
    e = f"{t}ole"
    steps = setup_topic(e)
    steps.append(setup_produce(e, 0, batch(records(4))))

    def body(version: int, name: str, epoch: int, partition: int = 0,
             current: int = -1) -> dict[str, Any]:
        out: dict[str, Any] = {
            "topics": [
                {
                    "topic": name,
                    "partitions": [
                        {"partition": partition, "current_leader_epoch": current,
                         "leader_epoch": epoch}
                    ],
                }
            ]
        }
        if version >= 3:
            out["replica_id"] = -1
        return out

    steps += [
        Step("v4-epoch-0", OFFSET_FOR_LEADER_EPOCH, 4, body(4, e, 0)),
        Step("v2-epoch-0", OFFSET_FOR_LEADER_EPOCH, 2, body(2, e, 0)),
        Step("v4-future-epoch", OFFSET_FOR_LEADER_EPOCH, 4, body(4, e, 5)),
        Step("v4-current-epoch-fenced", OFFSET_FOR_LEADER_EPOCH, 4, body(4, e, 0, current=7)),
        Step("v4-unknown-partition", OFFSET_FOR_LEADER_EPOCH, 4, body(4, e, 0, partition=4)),
        Step("v4-unknown-topic", OFFSET_FOR_LEADER_EPOCH, 4, body(4, f"{t}ole-absent", 0)),
    ]
    return Session("offset_for_leader_epoch", steps)


def _delete_records(t: str) -> Session:
    dr = f"{t}dr"
    steps = setup_topic(dr)
    steps.append(setup_produce(dr, 0, batch(records(10))))

    def body(offset: int, partition: int = 0, name: str = dr) -> dict[str, Any]:
        return {
            "topics": [{"name": name, "partitions": [{"partition_index": partition,
                                                     "offset": offset}]}],
            "timeout": 30000,
        }

    steps += [
        Step("v2-to-5", DELETE_RECORDS, 2, body(5)),
        Step("v2-below-start", DELETE_RECORDS, 2, body(2)),
        Step("v2-at-start", DELETE_RECORDS, 2, body(5)),
        Step("v2-beyond-hw", DELETE_RECORDS, 2, body(100)),
        Step("v0-to-hw-with-minus-1", DELETE_RECORDS, 0, body(-1)),
        Step("v2-minus-2", DELETE_RECORDS, 2, body(-2)),
        Step("v2-unknown-partition", DELETE_RECORDS, 2, body(0, partition=3)),
        Step("v2-unknown-topic", DELETE_RECORDS, 2, body(0, name=f"{t}dr-absent")),
        Step("v7-earliest-after", LIST_OFFSETS, 7, list_offsets_body(7, dr, {0: -2})),
    ]
    return Session("delete_records", steps)


def _offsets(t: str) -> Session:
    o, g, g2 = f"{t}o", f"{t}g-simple", f"{t}g-none"
    steps = [*setup_topic(o, 2), *setup_coordinator(g), *setup_coordinator(g2)]
    steps += [
        Step("commit-v8-simple", OFFSET_COMMIT, 8, commit_body(g, o, {0: 5, 1: 7}, metadata="m")),
        Step("commit-v2-simple", OFFSET_COMMIT, 2, commit_body(g, o, {0: 6})),
        Step("commit-v9-simple", OFFSET_COMMIT, 9, commit_body(g, o, {1: 8})),
        Step("fetch-v8", OFFSET_FETCH, 8, offset_fetch_v8(g, o, (0, 1))),
        Step("fetch-v8-all-topics", OFFSET_FETCH, 8, offset_fetch_v8(g, None)),
        Step("fetch-v8-require-stable", OFFSET_FETCH, 8, offset_fetch_v8(g, o, (0,), True)),
        Step("fetch-v1", OFFSET_FETCH, 1, {"group_id": g,
             "topics": [{"name": o, "partition_indexes": [0, 1]}]}),
        Step("fetch-v5", OFFSET_FETCH, 5, {"group_id": g,
             "topics": [{"name": o, "partition_indexes": [0, 1]}]}),
        Step("fetch-v7-require-stable", OFFSET_FETCH, 7, {"group_id": g,
             "topics": [{"name": o, "partition_indexes": [0]}], "require_stable": True}),
        Step("fetch-v9", OFFSET_FETCH, 9, {"groups": [{"group_id": g, "member_id": None,
             "member_epoch": -1, "topics": [{"name": o, "partition_indexes": [0, 1]}]}]}),
        Step("fetch-v8-unknown-group", OFFSET_FETCH, 8, offset_fetch_v8(g2, o, (0,))),
        Step("fetch-v8-unknown-group-all", OFFSET_FETCH, 8, offset_fetch_v8(g2, None)),
        Step("fetch-v8-unknown-topic", OFFSET_FETCH, 8, offset_fetch_v8(g, f"{t}o-absent", (0,))),
        Step("fetch-v8-unknown-partition", OFFSET_FETCH, 8, offset_fetch_v8(g, o, (5,))),
        Step("fetch-v8-two-groups", OFFSET_FETCH, 8, {"groups": [
            {"group_id": g, "topics": [{"name": o, "partition_indexes": [0]}]},
            {"group_id": g2, "topics": [{"name": o, "partition_indexes": [0]}]}],
            "require_stable": False}),
        Step("fetch-v8-empty-group-id", OFFSET_FETCH, 8, offset_fetch_v8("", o, (0,))),
        Step("commit-v8-unknown-topic", OFFSET_COMMIT, 8,
             commit_body(g, f"{t}o-absent", {0: 1})),
        Step("commit-v8-unknown-partition", OFFSET_COMMIT, 8, commit_body(g, o, {9: 1})),
        Step("commit-v8-generation-5-no-group", OFFSET_COMMIT, 8,
             commit_body(f"{t}g-gen", o, {0: 1}, generation=5, member="m-1")),
        Step("commit-v8-generation-minus-1-member", OFFSET_COMMIT, 8,
             commit_body(f"{t}g-gen2", o, {0: 1}, generation=-1, member="m-1")),
        # The group now exists, EMPTY: Kafka's validateOffsetCommit accepts generation -1
        # whatever member id it carries (a consumer-protocol client that only assigns).
        Step("commit-v8-generation-minus-1-member-again", OFFSET_COMMIT, 8,
             commit_body(f"{t}g-gen2", o, {0: 2}, generation=-1, member="m-1")),
        Step("commit-v9-generation-minus-1-other-member", OFFSET_COMMIT, 9,
             commit_body(f"{t}g-gen2", o, {0: 3}, generation=-1, member="m-2")),
        Step("commit-v8-metadata-too-large", OFFSET_COMMIT, 8,
             commit_body(g, o, {0: 9}, metadata="x" * 5000)),
        Step("commit-v8-null-metadata", OFFSET_COMMIT, 8,
             commit_body(g, o, {0: 10}, metadata=None)),
        Step("commit-v8-negative-offset", OFFSET_COMMIT, 8, commit_body(g, o, {1: -5})),
        Step("commit-v8-empty-group-id", OFFSET_COMMIT, 8, commit_body("", o, {0: 1})),
        Step("fetch-v8-after-edge-commits", OFFSET_FETCH, 8, offset_fetch_v8(g, o, (0, 1))),
        Step("offset-delete-empty-group", OFFSET_DELETE, 0, {"group_id": g, "topics": [
            {"name": o, "partitions": [{"partition_index": 0}]}]}),
        Step("offset-delete-unknown-group", OFFSET_DELETE, 0, {"group_id": g2, "topics": [
            {"name": o, "partitions": [{"partition_index": 0}]}]}),
        Step("offset-delete-unknown-topic", OFFSET_DELETE, 0, {"group_id": g, "topics": [
            {"name": f"{t}o-absent", "partitions": [{"partition_index": 0}]}]}),
        Step("fetch-v8-after-offset-delete", OFFSET_FETCH, 8, offset_fetch_v8(g, o, (0, 1))),
        # v10: topics by id (the other broker's id differs: each side uses its own).
        Step("setup-id", METADATA, 12, md(12, [o]), compare=False,
             capture=capture_topic_id("o_id")),
        Step("commit-v10-by-id", OFFSET_COMMIT, 10, lambda ctx: {
            **commit_body(g, o, {0: 11, 1: 12}),
            "topics": [{"topic_id": ctx["o_id"], "partitions": [
                {"partition_index": p, "committed_offset": off, "committed_metadata": ""}
                for p, off in ((0, 11), (1, 12))]}],
        }),
        Step("commit-v10-unknown-id", OFFSET_COMMIT, 10, {
            **commit_body(g, o, {0: 1}),
            "topics": [{"topic_id": _ABSENT_ID, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}],
        }),
        Step("fetch-v10-by-id", OFFSET_FETCH, 10, lambda ctx: {"groups": [{
            "group_id": g, "member_id": None, "member_epoch": -1,
            "topics": [{"topic_id": ctx["o_id"], "partition_indexes": [0, 1]}]}],
            "require_stable": False}),
        Step("fetch-v10-unknown-id", OFFSET_FETCH, 10, {"groups": [{
            "group_id": g, "member_id": None, "member_epoch": -1,
            "topics": [{"topic_id": _ABSENT_ID, "partition_indexes": [0]}]}],
            "require_stable": False}),
        Step("fetch-v10-all-topics", OFFSET_FETCH, 10, {"groups": [{
            "group_id": g, "member_id": None, "member_epoch": -1, "topics": None}],
            "require_stable": False}),
        # Produce v13 names topics by id too.
        Step("produce-v13-by-id-and-unknown-id", PRODUCE, 13, lambda ctx: {
            "transactional_id": None, "acks": 1, "timeout": 10000, "topic_data": [
                {"topic_id": topic_id, "partition_data": [
                    {"index": 0, "records": batch(records(2))}]}
                for topic_id in (ctx["o_id"], _ABSENT_ID)]}),
    ]
    return Session("offsets", steps)


_ABSENT_ID = "0b5f2d9c-1a2b-4c3d-8e4f-5a6b7c8d9e0f"


def _classic_group(t: str) -> Session:
    topic_name, g = f"{t}cg", f"{t}g-classic"
    steps = [*setup_topic(topic_name, 2), *setup_coordinator(g)]

    def capture_member(response: Any, ctx: Ctx) -> None:
        ctx["member"] = response["member_id"]

    def capture_generation(response: Any, ctx: Ctx) -> None:
        ctx["generation"] = response["generation_id"]

    member: Callable[[Ctx], str] = lambda ctx: ctx["member"]  # noqa: E731

    def sync(ctx: Ctx, generation: int | None = None, member_id: str | None = None,
             protocol_type: str | None = "consumer") -> dict[str, Any]:
        return {
            "group_id": g,
            "generation_id": ctx["generation"] if generation is None else generation,
            "member_id": ctx["member"] if member_id is None else member_id,
            "group_instance_id": None,
            "protocol_type": protocol_type,
            "protocol_name": "range",
            "assignments": [{"member_id": ctx["member"],
                             "assignment": assignment(topic_name, [0, 1])}],
        }

    def heartbeat(generation: int | None = None, member_id: str | None = None,
                  group: str = g) -> Callable[[Ctx], dict[str, Any]]:
        return lambda ctx: {
            "group_id": group,
            "generation_id": ctx["generation"] if generation is None else generation,
            "member_id": ctx["member"] if member_id is None else member_id,
            "group_instance_id": None,
        }

    steps += [
        Step("find-coordinator-v0", FIND_COORDINATOR, 0, {"key": g}),
        Step("find-coordinator-v3", FIND_COORDINATOR, 3, {"key": g, "key_type": 0}),
        Step("find-coordinator-v4-batch", FIND_COORDINATOR, 4,
             {"key_type": 0, "coordinator_keys": [g, f"{t}g-other"]}),
        Step("find-coordinator-v4-bad-key-type", FIND_COORDINATOR, 4,
             {"key_type": 5, "coordinator_keys": [g]}),
        Step("find-coordinator-v4-empty-key", FIND_COORDINATOR, 4,
             {"key_type": 0, "coordinator_keys": [""]}),
        Step("find-coordinator-v3-v4-only-batch", FIND_COORDINATOR, 3, {"key": "", "key_type": 0}),
        Step("join-v9-empty-group-id", JOIN_GROUP, 9, join_body("", topic_name)),
        Step("join-v9-session-timeout-too-small", JOIN_GROUP, 9,
             join_body(g, topic_name, session_timeout=1000)),
        Step("join-v9-session-timeout-too-large", JOIN_GROUP, 9,
             join_body(g, topic_name, session_timeout=3_600_000)),
        Step("join-v9-no-protocols", JOIN_GROUP, 9, join_body(g, topic_name, protocols=())),
        Step("join-v9-unknown-member", JOIN_GROUP, 9, join_body(g, topic_name, "ghost-member")),
        Step("join-v9-member-id-required", JOIN_GROUP, 9, join_body(g, topic_name),
             capture=capture_member),
        Step("join-v9-with-member-id", JOIN_GROUP, 9, join_body(g, topic_name, member),
             capture=capture_generation),
        Step("join-v9-other-protocol-type", JOIN_GROUP, 9,
             join_body(g, topic_name, "", protocol_type="connect")),
        Step("sync-v5-wrong-generation", SYNC_GROUP, 5, lambda ctx: sync(ctx, generation=99)),
        Step("sync-v5-unknown-member", SYNC_GROUP, 5, lambda ctx: sync(ctx, member_id="ghost")),
        Step("sync-v5-wrong-protocol-type", SYNC_GROUP, 5,
             lambda ctx: sync(ctx, protocol_type="connect")),
        Step("sync-v5-leader", SYNC_GROUP, 5, sync),
        Step("sync-v0-leader-again", SYNC_GROUP, 0, lambda ctx: {
            "group_id": g, "generation_id": ctx["generation"], "member_id": ctx["member"],
            "assignments": []}),
        Step("heartbeat-v4", HEARTBEAT, 4, heartbeat()),
        Step("heartbeat-v0", HEARTBEAT, 0, lambda ctx: {"group_id": g,
             "generation_id": ctx["generation"], "member_id": ctx["member"]}),
        Step("heartbeat-v4-wrong-generation", HEARTBEAT, 4, heartbeat(generation=99)),
        Step("heartbeat-v4-unknown-member", HEARTBEAT, 4, heartbeat(member_id="ghost")),
        Step("heartbeat-v4-unknown-group", HEARTBEAT, 4, heartbeat(group=f"{t}g-nothere")),
        Step("heartbeat-v4-empty-group-id", HEARTBEAT, 4, heartbeat(group="")),
        Step("commit-v8-member", OFFSET_COMMIT, 8, lambda ctx: commit_body(
            g, topic_name, {0: 3}, generation=ctx["generation"], member=ctx["member"])),
        Step("commit-v8-member-wrong-generation", OFFSET_COMMIT, 8, lambda ctx: commit_body(
            g, topic_name, {0: 4}, generation=ctx["generation"] + 1, member=ctx["member"])),
        Step("commit-v8-simple-into-live-group", OFFSET_COMMIT, 8,
             commit_body(g, topic_name, {0: 4})),
        Step("commit-v8-unknown-member", OFFSET_COMMIT, 8, lambda ctx: commit_body(
            g, topic_name, {0: 4}, generation=ctx["generation"], member="ghost")),
        Step("fetch-v8-stable-group", OFFSET_FETCH, 8, offset_fetch_v8(g, topic_name, (0, 1))),
        Step("describe-v5", DESCRIBE_GROUPS, 5, {"groups": [g],
             "include_authorized_operations": False}),
        Step("describe-v0", DESCRIBE_GROUPS, 0, {"groups": [g]}),
        Step("describe-v5-unknown", DESCRIBE_GROUPS, 5, {"groups": [f"{t}g-nothere"],
             "include_authorized_operations": False}),
        Step("describe-v6", DESCRIBE_GROUPS, 6, {"groups": [g],
             "include_authorized_operations": False}),
        Step("describe-v6-unknown", DESCRIBE_GROUPS, 6, {"groups": [f"{t}g-nothere"],
             "include_authorized_operations": False}),
        Step("describe-v5-empty-id", DESCRIBE_GROUPS, 5, {"groups": [""],
             "include_authorized_operations": False}),
        Step("offset-delete-subscribed", OFFSET_DELETE, 0, {"group_id": g, "topics": [
            {"name": topic_name, "partitions": [{"partition_index": 0}]}]}),
        Step("delete-groups-non-empty", DELETE_GROUPS, 2, {"groups_names": [g]}),
        Step("leave-v3-unknown-member", LEAVE_GROUP, 3, {"group_id": g, "members": [
            {"member_id": "ghost", "group_instance_id": None}]}),
        Step("leave-v5-batch", LEAVE_GROUP, 5, lambda ctx: {"group_id": g, "members": [
            {"member_id": ctx["member"], "group_instance_id": None, "reason": "bye"}]}),
        Step("describe-v5-after-leave", DESCRIBE_GROUPS, 5, {"groups": [g],
             "include_authorized_operations": False}),
        Step("leave-v0-unknown-member", LEAVE_GROUP, 0, {"group_id": g, "member_id": "ghost"}),
        Step("join-v3-old-version-member", JOIN_GROUP, 3, lambda ctx: {
            "group_id": f"{t}g-v3", "session_timeout": 30000, "rebalance_timeout": 30000,
            "member_id": "", "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription(topic_name)}]}),
        Step("join-v9-static-member", JOIN_GROUP, 9,
             join_body(f"{t}g-static", topic_name, instance="instance-1")),
        Step("offset-delete-after-leave", OFFSET_DELETE, 0, {"group_id": g, "topics": [
            {"name": topic_name, "partitions": [{"partition_index": 0}]}]}),
        Step("delete-groups-empty", DELETE_GROUPS, 2, {"groups_names": [g]}),
        Step("delete-groups-unknown", DELETE_GROUPS, 2, {"groups_names": [f"{t}g-nothere"]}),
        Step("delete-groups-v0-empty-id", DELETE_GROUPS, 0, {"groups_names": [""]}),
        Step("describe-v5-after-delete", DESCRIBE_GROUPS, 5, {"groups": [g],
             "include_authorized_operations": False}),
    ]
    return Session("classic_group", steps)


def _groups_admin(t: str) -> Session:
    g = f"{t}g-listed"
    lg_topic = f"{t}lg"
    steps = [*setup_topic(lg_topic), *setup_coordinator(g)]

    def only_ours(kafka: Any, tidelog: Any) -> tuple[Any, Any]:
        """Brokers may hold other groups (a shared peer); compare the run's groups only."""

        def keep(response: Any) -> Any:
            if isinstance(response, dict) and isinstance(response.get("groups"), list):
                groups = [x for x in response["groups"] if x.get("group_id", "").startswith(t)]
                return {**response, "groups": groups}
            return response

        return keep(kafka), keep(tidelog)

    steps += [
        Step("setup-commit", OFFSET_COMMIT, 8, commit_body(g, lg_topic, {0: 1}), compare=False),
        Step("list-v0", LIST_GROUPS, 0, {}, transform=only_ours),
        Step("list-v3", LIST_GROUPS, 3, {}, transform=only_ours),
        Step("list-v4-empty-state", LIST_GROUPS, 4, {"states_filter": ["Empty"]},
             transform=only_ours),
        Step("list-v4-stable-state", LIST_GROUPS, 4, {"states_filter": ["Stable"]},
             transform=only_ours),
        Step("list-v4-bogus-state", LIST_GROUPS, 4, {"states_filter": ["Bogus"]},
             transform=only_ours),
        Step("list-v5-classic-type", LIST_GROUPS, 5,
             {"states_filter": [], "types_filter": ["classic"]}, transform=only_ours),
        Step("list-v5-consumer-type", LIST_GROUPS, 5,
             {"states_filter": [], "types_filter": ["consumer"]}, transform=only_ours),
        Step("list-v5-bogus-type", LIST_GROUPS, 5,
             {"states_filter": [], "types_filter": ["bogus"]}, transform=only_ours),
        Step("describe-v5-simple-group", DESCRIBE_GROUPS, 5,
             {"groups": [g], "include_authorized_operations": True}),
    ]
    return Session("groups_admin", steps)


def _consumer_group(t: str) -> Session:
    ct, g = f"{t}kip848", f"{t}g-848"
    steps = [*setup_topic(ct, 2), *setup_coordinator(g), *setup_coordinator(f"{t}g-upgrade")]

    def capture(response: Any, ctx: Ctx) -> None:
        ctx["cmember"] = response["member_id"]
        ctx["cepoch"] = response["member_epoch"]

    def hb(version: int, member: str | Callable[[Ctx], str], epoch: int | Callable[[Ctx], int],
           topics: Sequence[str] | None = None, assignor: str | None = None,
           group: str = g) -> Callable[[Ctx], dict[str, Any]]:
        def body(ctx: Ctx) -> dict[str, Any]:
            out: dict[str, Any] = {
                "group_id": group,
                "member_id": member(ctx) if callable(member) else member,
                "member_epoch": epoch(ctx) if callable(epoch) else epoch,
                "instance_id": None,
                "rack_id": None,
                "rebalance_timeout": 30000 if (epoch == 0) else -1,
                "subscribed_topic_names": None if topics is None else list(topics),
                "server_assignor": assignor,
                "topic_partitions": [] if epoch == 0 else None,
            }
            if version >= 1:
                out["subscribed_topic_regex"] = None
            return out

        return body

    me: Callable[[Ctx], str] = lambda ctx: ctx["cmember"]  # noqa: E731
    ug = f"{t}g-upgrade"

    def capture_classic(response: Any, ctx: Ctx) -> None:
        ctx["cclassic"] = response["member_id"]

    def capture_classic_generation(response: Any, ctx: Ctx) -> None:
        ctx["cgeneration"] = response["generation_id"]

    classic_member: Callable[[Ctx], str] = lambda ctx: ctx["cclassic"]  # noqa: E731
    ep: Callable[[Ctx], int] = lambda ctx: ctx["cepoch"]  # noqa: E731
    steps += [
        Step("heartbeat-v1-empty-member-id", CONSUMER_GROUP_HEARTBEAT, 1,
             hb(1, "", 0, [ct], group=f"{t}g-848-v1")),
        Step("heartbeat-v0-join", CONSUMER_GROUP_HEARTBEAT, 0, hb(0, "", 0, [ct]),
             capture=capture),
        Step("heartbeat-v0-steady", CONSUMER_GROUP_HEARTBEAT, 0, hb(0, me, ep), capture=capture),
        Step("heartbeat-v0-fenced-epoch", CONSUMER_GROUP_HEARTBEAT, 0, hb(0, me, 99)),
        Step("heartbeat-v0-unknown-member", CONSUMER_GROUP_HEARTBEAT, 0,
             hb(0, "Zm9vYmFyYmF6cXV4cXV1eA", 3)),
        Step("heartbeat-v1-bad-assignor", CONSUMER_GROUP_HEARTBEAT, 1,
             hb(1, "Zm9vYmFyYmF6cXV4cXV1eA", 0, [ct], assignor="bogus")),
        Step("heartbeat-v1-join-no-subscription", CONSUMER_GROUP_HEARTBEAT, 1,
             hb(1, "Zm9vYmFyYmF6cXV4cXV1eQ", 0, None)),
        Step("heartbeat-v1-empty-group-id", CONSUMER_GROUP_HEARTBEAT, 1,
             hb(1, "Zm9vYmFyYmF6cXV4cXV1eg", 0, [ct], group="")),
        Step("describe-v0", CONSUMER_GROUP_DESCRIBE, 0,
             {"group_ids": [g], "include_authorized_operations": False}),
        Step("describe-v1-unknown", CONSUMER_GROUP_DESCRIBE, 1,
             {"group_ids": [f"{t}g-848-nothere"], "include_authorized_operations": False}),
        Step("classic-join-into-consumer-group", JOIN_GROUP, 9, join_body(g, ct, ""),
             capture=capture_classic),
        # KIP-848 mixed group: a classic member joins the consumer group and is served by it.
        Step("classic-join-into-consumer-group-with-id", JOIN_GROUP, 9,
             join_body(g, ct, classic_member), capture=capture_classic_generation),
        Step("classic-sync-in-consumer-group", SYNC_GROUP, 5, lambda ctx: {
            "group_id": g, "generation_id": ctx["cgeneration"], "member_id": ctx["cclassic"],
            "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
            "assignments": []}),
        Step("classic-heartbeat-in-consumer-group", HEARTBEAT, 4, lambda ctx: {
            "group_id": g, "generation_id": ctx["cgeneration"], "member_id": ctx["cclassic"],
            "group_instance_id": None}),
        Step("classic-leave-from-consumer-group", LEAVE_GROUP, 5, lambda ctx: {
            "group_id": g, "members": [{"member_id": ctx["cclassic"], "group_instance_id": None,
                                        "reason": None}]}),
        # Online upgrade: a consumer-protocol member joins a stable classic group.
        Step("upgrade-classic-join", JOIN_GROUP, 9, join_body(ug, ct), capture=capture_classic),
        Step("upgrade-classic-join-with-id", JOIN_GROUP, 9, join_body(ug, ct, classic_member),
             capture=capture_classic_generation),
        Step("upgrade-classic-sync", SYNC_GROUP, 5, lambda ctx: {
            "group_id": ug, "generation_id": ctx["cgeneration"], "member_id": ctx["cclassic"],
            "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": ctx["cclassic"], "assignment": assignment(ct, [0, 1])}]}),
        Step("upgrade-consumer-heartbeat", CONSUMER_GROUP_HEARTBEAT, 1,
             hb(1, "Zm9vYmFyYmF6cXV4cXV1dw", 0, [ct], group=ug)),
        Step("upgrade-classic-heartbeat-rebalance", HEARTBEAT, 4, lambda ctx: {
            "group_id": ug, "generation_id": ctx["cgeneration"], "member_id": ctx["cclassic"],
            "group_instance_id": None}),
        Step("upgrade-describe-groups-classic-api", DESCRIBE_GROUPS, 5,
             {"groups": [ug], "include_authorized_operations": False}),
        Step("describe-groups-classic-api", DESCRIBE_GROUPS, 5,
             {"groups": [g], "include_authorized_operations": False}),
        Step("heartbeat-v0-leave", CONSUMER_GROUP_HEARTBEAT, 0, hb(0, me, -1)),
        Step("describe-v0-after-leave", CONSUMER_GROUP_DESCRIBE, 0,
             {"group_ids": [g], "include_authorized_operations": False}),
    ]
    return Session("consumer_group", steps)


def _share_group(t: str) -> Session:
    """Share groups (KIP-932): heartbeats, describe, ShareFetch / ShareAcknowledge with their
    session and record-state errors, and the share-group offsets APIs."""
    st, g = f"{t}share", f"{t}g-share"
    member = "c2hhcmVtZW1iZXIwMDAwMQ"
    steps = [
        *setup_topic(st),
        setup_produce(st, 0, batch(records(4))),
        Step("setup-id", METADATA, 12, md(12, [st]), compare=False,
             capture=capture_topic_id("share")),
        *setup_coordinator(g),
        Step("setup-earliest", INCREMENTAL_ALTER_CONFIGS, 1,
             alter_body(32, g, [("share.auto.offset.reset", 0, "earliest")]), compare=False,
             until=lambda r: _error_of(r, "responses", 0, "error_code") == OK),
    ]

    def hb(epoch: int, topics: Sequence[str] | None, who: str = member,
           group: str = g) -> dict[str, Any]:
        return {"group_id": group, "member_id": who, "member_epoch": epoch, "rack_id": None,
                "subscribed_topic_names": None if topics is None else list(topics)}

    def fetch(epoch: int, acks: Sequence[tuple[int, int, int]] = (),
              who: str = member) -> Callable[[Ctx], dict[str, Any]]:
        def body(ctx: Ctx) -> dict[str, Any]:
            return {
                "group_id": g, "member_id": who, "share_session_epoch": epoch,
                "max_wait": 500, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100,
                "batch_size": 100, "forgotten_topics_data": [],
                "topics": [{"topic_id": ctx["share"], "partitions": [{
                    "partition_index": 0,
                    "acknowledgement_batches": [
                        {"first_offset": a, "last_offset": b, "acknowledge_types": [k]}
                        for a, b, k in acks],
                }]}],
            }
        return body

    def ack(epoch: int, acks: Sequence[tuple[int, int, int]]) -> Callable[[Ctx], dict[str, Any]]:
        def body(ctx: Ctx) -> dict[str, Any]:
            return {
                "group_id": g, "member_id": member, "share_session_epoch": epoch,
                "topics": [{"topic_id": ctx["share"], "partitions": [{
                    "partition_index": 0,
                    "acknowledgement_batches": [
                        {"first_offset": a, "last_offset": b, "acknowledge_types": [k]}
                        for a, b, k in acks],
                }]}],
            }
        return body

    def acquired(response: Any) -> bool:
        try:
            return bool(response["responses"][0]["partitions"][0]["acquired_records"])
        except (KeyError, IndexError, TypeError):
            return False

    def offsets(group: str) -> dict[str, Any]:
        return {"groups": [{"group_id": group, "topics": [
            {"topic_name": st, "partitions": [0]}]}]}

    steps += [
        Step("heartbeat-join", SHARE_GROUP_HEARTBEAT, 1, hb(0, [st])),
        Step("heartbeat-empty-member-id", SHARE_GROUP_HEARTBEAT, 1, hb(0, [st], who="")),
        Step("heartbeat-join-no-subscription", SHARE_GROUP_HEARTBEAT, 1,
             hb(0, None, who="c2hhcmVtZW1iZXIwMDAwMg")),
        Step("heartbeat-fenced-epoch", SHARE_GROUP_HEARTBEAT, 1, hb(99, None)),
        Step("heartbeat-unknown-member", SHARE_GROUP_HEARTBEAT, 1,
             hb(3, None, who="c2hhcmVtZW1iZXIwMDAwMw")),
        Step("describe", SHARE_GROUP_DESCRIBE, 1,
             {"group_ids": [g], "include_authorized_operations": False}),
        Step("describe-unknown", SHARE_GROUP_DESCRIBE, 1,
             {"group_ids": [f"{t}g-share-nothere"], "include_authorized_operations": False}),
        Step("setup-acquire", SHARE_FETCH, 1, fetch(0), compare=False, until=acquired),
        Step("fetch-wrong-session-epoch", SHARE_FETCH, 1, fetch(7)),
        Step("fetch-unknown-session", SHARE_FETCH, 1, fetch(1, who="c2hhcmVtZW1iZXIwMDAwNA")),
        Step("fetch-acks-on-initial-epoch", SHARE_FETCH, 1, fetch(0, [(0, 0, 1)])),
        Step("acknowledge-epoch-0", SHARE_ACKNOWLEDGE, 1, ack(0, [(0, 0, 1)])),
        Step("acknowledge-never-acquired", SHARE_ACKNOWLEDGE, 1, ack(1, [(50, 60, 1)])),
        Step("acknowledge-accept", SHARE_ACKNOWLEDGE, 1, ack(2, [(0, 3, 1)])),
        Step("acknowledge-again", SHARE_ACKNOWLEDGE, 1, ack(3, [(0, 3, 1)])),
        Step("describe-offsets-v0", DESCRIBE_SHARE_GROUP_OFFSETS, 0, offsets(g)),
        Step("describe-offsets-v1-unknown-group", DESCRIBE_SHARE_GROUP_OFFSETS, 1,
             offsets(f"{t}g-share-nothere")),
        Step("alter-offsets-non-empty", ALTER_SHARE_GROUP_OFFSETS, 0,
             {"group_id": g, "topics": [{"topic_name": st, "partitions": [
                 {"partition_index": 0, "start_offset": 0}]}]}),
        Step("delete-offsets-non-empty", DELETE_SHARE_GROUP_OFFSETS, 0,
             {"group_id": g, "topics": [{"topic_name": st}]}),
        Step("describe-groups-classic-api", DESCRIBE_GROUPS, 5,
             {"groups": [g], "include_authorized_operations": False}),
        Step("list-groups-v5-share", LIST_GROUPS, 5, {"states_filter": [],
                                                      "types_filter": ["share"]}),
        Step("delete-groups-non-empty", DELETE_GROUPS, 2, {"groups_names": [g]}),
        Step("fetch-close-session", SHARE_FETCH, 1, fetch(4)),
        Step("heartbeat-leave", SHARE_GROUP_HEARTBEAT, 1, hb(-1, None)),
        Step("delete-groups-empty", DELETE_GROUPS, 2, {"groups_names": [g]}),
    ]
    return Session("share_group", steps)


def _configs(t: str) -> Session:
    ct = f"{t}cfg"
    steps = setup_topic(ct, 1, {"retention.ms": "3600000"})
    keys = ["retention.ms", "cleanup.policy", "segment.bytes", "max.message.bytes",
            "min.insync.replicas", "message.timestamp.type"]

    def describe(resources: list[dict[str, Any]], synonyms: bool = False,
                 documentation: bool = False, version: int = 4) -> dict[str, Any]:
        body: dict[str, Any] = {"resources": resources, "include_synonyms": synonyms}
        if version >= 3:
            body["include_documentation"] = documentation
        return body

    broker_keys = ["num.partitions", "auto.create.topics.enable", "log.retention.ms",
                   "default.replication.factor", "log.segment.bytes"]
    steps += [
        Step("describe-v4-topic-keys", DESCRIBE_CONFIGS, 4,
             describe([config_resource(TOPIC, ct, keys)])),
        Step("describe-v4-topic-keys-synonyms", DESCRIBE_CONFIGS, 4,
             describe([config_resource(TOPIC, ct, ["retention.ms", "cleanup.policy"])], True)),
        Step("describe-v1-topic-keys", DESCRIBE_CONFIGS, 1,
             describe([config_resource(TOPIC, ct, keys)], version=1)),
        Step("describe-v4-topic-all-names", DESCRIBE_CONFIGS, 4,
             describe([config_resource(TOPIC, ct, None)]),
             transform=_config_names_only),
        Step("describe-v4-topic-unknown-key", DESCRIBE_CONFIGS, 4,
             describe([config_resource(TOPIC, ct, ["no.such.config"])])),
        Step("describe-v4-unknown-topic", DESCRIBE_CONFIGS, 4,
             describe([config_resource(TOPIC, f"{t}cfg-absent", None)])),
        Step("describe-v4-empty-topic-name", DESCRIBE_CONFIGS, 4,
             describe([config_resource(TOPIC, "", None)])),
        Step("describe-v4-broker-keys", DESCRIBE_CONFIGS, 4,
             lambda ctx: describe([config_resource(BROKER, str(ctx["node"]), broker_keys)])),
        Step("describe-v4-broker-default-resource", DESCRIBE_CONFIGS, 4,
             describe([config_resource(BROKER, "", ["num.partitions"])])),
        Step("describe-v4-unknown-broker", DESCRIBE_CONFIGS, 4,
             describe([config_resource(BROKER, "4242", ["num.partitions"])])),
        Step("describe-v4-broker-non-numeric", DESCRIBE_CONFIGS, 4,
             describe([config_resource(BROKER, "abc", ["num.partitions"])])),
        Step("describe-v4-bad-resource-type", DESCRIBE_CONFIGS, 4,
             describe([config_resource(7, ct, None)])),
        Step("describe-v3-documentation", DESCRIBE_CONFIGS, 3,
             describe([config_resource(TOPIC, ct, ["retention.ms"])], documentation=True,
                      version=3)),
        Step("alter-v1-set", INCREMENTAL_ALTER_CONFIGS, 1,
             alter_body(TOPIC, ct, [("retention.ms", 0, "7200000")])),
        Step("describe-after-set", DESCRIBE_CONFIGS, 4,
             describe([config_resource(TOPIC, ct, ["retention.ms"])])),
        Step("alter-v1-bad-value", INCREMENTAL_ALTER_CONFIGS, 1,
             alter_body(TOPIC, ct, [("retention.ms", 0, "abc")])),
        Step("alter-v1-unknown-key", INCREMENTAL_ALTER_CONFIGS, 1,
             alter_body(TOPIC, ct, [("no.such.config", 0, "1")])),
        Step("alter-v1-bad-cleanup-policy", INCREMENTAL_ALTER_CONFIGS, 1,
             alter_body(TOPIC, ct, [("cleanup.policy", 0, "bogus")])),
        Step("alter-v1-delete", INCREMENTAL_ALTER_CONFIGS, 1,
             alter_body(TOPIC, ct, [("retention.ms", 1, None)])),
        Step("describe-after-delete", DESCRIBE_CONFIGS, 4,
             describe([config_resource(TOPIC, ct, ["retention.ms"])])),
        Step("alter-v1-append-list", INCREMENTAL_ALTER_CONFIGS, 1,
             alter_body(TOPIC, ct, [("cleanup.policy", 2, "compact")])),
        Step("alter-v1-subtract-list", INCREMENTAL_ALTER_CONFIGS, 1,
             alter_body(TOPIC, ct, [("cleanup.policy", 3, "delete")])),
        Step("describe-after-list-ops", DESCRIBE_CONFIGS, 4,
             describe([config_resource(TOPIC, ct, ["cleanup.policy"])])),
        Step("alter-v1-append-non-list", INCREMENTAL_ALTER_CONFIGS, 1,
             alter_body(TOPIC, ct, [("retention.ms", 2, "5")])),
        Step("alter-v1-bad-operation", INCREMENTAL_ALTER_CONFIGS, 1,
             alter_body(TOPIC, ct, [("retention.ms", 9, "5")])),
        Step("alter-v1-duplicate-key", INCREMENTAL_ALTER_CONFIGS, 1,
             alter_body(TOPIC, ct, [("retention.ms", 0, "5000"), ("retention.ms", 0, "6000")])),
        Step("alter-v1-validate-only", INCREMENTAL_ALTER_CONFIGS, 1,
             alter_body(TOPIC, ct, [("retention.ms", 0, "1234")], validate_only=True)),
        Step("describe-after-validate-only", DESCRIBE_CONFIGS, 4,
             describe([config_resource(TOPIC, ct, ["retention.ms"])])),
        Step("alter-v0-unknown-topic", INCREMENTAL_ALTER_CONFIGS, 0,
             alter_body(TOPIC, f"{t}cfg-absent", [("retention.ms", 0, "1")])),
        Step("alter-v1-set-null-value", INCREMENTAL_ALTER_CONFIGS, 1,
             alter_body(TOPIC, ct, [("retention.ms", 0, None)])),
        Step("alter-v1-segment-bytes-too-small", INCREMENTAL_ALTER_CONFIGS, 1,
             alter_body(TOPIC, ct, [("segment.bytes", 0, "10")])),
        Step("alter-configs-v1-validate-only", ALTER_CONFIGS, 1, {
            "resources": [{"resource_type": TOPIC, "resource_name": ct,
                           "configs": [{"name": "retention.ms", "value": "1000"}]}],
            "validate_only": True}),
        Step("describe-after-legacy-validate-only", DESCRIBE_CONFIGS, 4,
             describe([config_resource(TOPIC, ct, ["retention.ms"])])),
        Step("alter-configs-v2-replaces", ALTER_CONFIGS, 2, {
            "resources": [{"resource_type": TOPIC, "resource_name": ct,
                           "configs": [{"name": "segment.jitter.ms", "value": "5"},
                                       {"name": "compression.type", "value": "lz4"}]}],
            "validate_only": False}),
        Step("describe-after-replace", DESCRIBE_CONFIGS, 4,
             describe([config_resource(TOPIC, ct, ["retention.ms", "segment.jitter.ms",
                                                   "compression.type", "min.insync.replicas"])])),
        Step("alter-configs-v0-bad-value", ALTER_CONFIGS, 0, {
            "resources": [{"resource_type": TOPIC, "resource_name": ct,
                           "configs": [{"name": "preallocate", "value": "maybe"}]}],
            "validate_only": False}),
        Step("alter-v1-broker-read-only-key", INCREMENTAL_ALTER_CONFIGS, 1,
             lambda ctx: alter_body(BROKER, str(ctx["node"]), [("num.partitions", 0, "3")],
                                    validate_only=True)),
    ]
    return Session("configs", steps)


def _config_names_only(kafka: Any, tidelog: Any) -> tuple[Any, Any]:
    """Which config names each broker lists (in every ``configs`` list of named entries): a
    name only one broker lists shows as ``configs/NAME``: "listed" against <absent>. Values
    are compared through the other exchanges (shared_configs)."""
    if isinstance(kafka, dict) and isinstance(tidelog, dict):
        kafka, tidelog = dict(kafka), dict(tidelog)
        for key in set(kafka) & set(tidelog):
            a, b = kafka[key], tidelog[key]
            if key == "configs" and _named(a) and _named(b):
                left, right = {c["name"] for c in a}, {c["name"] for c in b}
                kafka[key] = {n: "listed" for n in sorted(left - right)}
                tidelog[key] = {n: "listed" for n in sorted(right - left)}
            else:
                kafka[key], tidelog[key] = _config_names_only(a, b)
        return kafka, tidelog
    if isinstance(kafka, list) and isinstance(tidelog, list) and len(kafka) == len(tidelog):
        pairs = [_config_names_only(a, b) for a, b in zip(kafka, tidelog, strict=True)]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    return kafka, tidelog


_COORDINATOR_NOT_READY = (
    "COORDINATOR_LOAD_IN_PROGRESS(14)",
    "COORDINATOR_NOT_AVAILABLE(15)",
    "NOT_COORDINATOR(16)",
    None,
)


def _init_producer_id(t: str) -> Session:
    def body(version: int, txn: str | None, timeout: int = 60000, pid: int = -1,
             epoch: int = -1) -> dict[str, Any]:
        out: dict[str, Any] = {"transactional_id": txn, "transaction_timeout": timeout}
        if version >= 3:
            out["producer_id"] = pid
            out["producer_epoch"] = epoch
        return out

    return Session(
        "init_producer_id",
        [
            setup_producer_ids(),
            Step("v0-idempotent", INIT_PRODUCER_ID, 0, body(0, None)),
            Step("v4-idempotent", INIT_PRODUCER_ID, 4, body(4, None)),
            Step("v5-idempotent", INIT_PRODUCER_ID, 5, body(5, None)),
            Step("v4-idempotent-bump-unknown", INIT_PRODUCER_ID, 4,
                 body(4, None, pid=123456, epoch=0)),
            Step("v4-negative-timeout", INIT_PRODUCER_ID, 4, body(4, None, timeout=-5)),
            Step("v4-empty-transactional-id", INIT_PRODUCER_ID, 4, body(4, "")),
            *setup_coordinator(f"{t}txn", 1),
            # Kafka's transaction coordinator answers FindCoordinator before it has loaded
            # its partition of __transaction_state (one partition here: every id maps to it).
            Step(
                "setup-transaction-log-loaded",
                INIT_PRODUCER_ID,
                4,
                body(4, f"{t}txn-warmup"),
                compare=False,
                until=lambda r: _error_of(r, "error_code") not in _COORDINATOR_NOT_READY,
            ),
            Step("v4-transactional", INIT_PRODUCER_ID, 4, body(4, f"{t}txn")),
            Step("v4-transactional-timeout-too-large", INIT_PRODUCER_ID, 4,
                 body(4, f"{t}txn", timeout=3_600_000)),
        ],
    )


def _transactions(t: str) -> Session:
    """One transaction through its APIs, then the errors of a fenced producer. Only answers
    that do not race with the markers are compared: Kafka answers EndTxn after PrepareCommit
    and writes markers afterwards (CONCURRENT_TRANSACTIONS meanwhile); the waits are setup."""
    data, txn, group = f"{t}txn-data", f"{t}tx", f"{t}txn-group"

    def capture(response: Any, ctx: Ctx) -> None:
        ctx["pid"] = response["producer_id"]
        ctx["epoch"] = response["producer_epoch"]

    def init_body(ctx: Ctx) -> dict[str, Any]:
        return {"transactional_id": txn, "transaction_timeout": 60000, "producer_id": -1,
                "producer_epoch": -1}

    def add(name: str, partitions: list[int], pid_delta: int = 0, epoch_delta: int = 0,
            version: int = 3):
        def body(ctx: Ctx) -> dict[str, Any]:
            return {
                "v3_and_below_transactional_id": txn,
                "v3_and_below_producer_id": ctx["pid"] + pid_delta,
                "v3_and_below_producer_epoch": ctx["epoch"] + epoch_delta,
                "v3_and_below_topics": [{"name": name, "partitions": partitions}],
            }
        return body

    def produce(seq: int, partition: int = 0):
        def body(ctx: Ctx) -> dict[str, Any]:
            data_batch = batch(records(1, seq), producer_id=ctx["pid"],
                               producer_epoch=ctx["epoch"], base_sequence=seq, attributes=0x10)
            return produce_body(data, {partition: data_batch}, txn=txn)
        return body

    def end(commit: bool, epoch_delta: int = 0, pid_delta: int = 0):
        def body(ctx: Ctx) -> dict[str, Any]:
            return {"transactional_id": txn, "producer_id": ctx["pid"] + pid_delta,
                    "producer_epoch": ctx["epoch"] + epoch_delta, "committed": commit}
        return body

    def offsets(ctx: Ctx) -> dict[str, Any]:
        return {"transactional_id": txn, "producer_id": ctx["pid"],
                "producer_epoch": ctx["epoch"], "group_id": group}

    def txn_commit(ctx: Ctx) -> dict[str, Any]:
        return {"transactional_id": txn, "group_id": group, "producer_id": ctx["pid"],
                "producer_epoch": ctx["epoch"], "generation_id": -1, "member_id": "",
                "group_instance_id": None, "topics": [{"name": data, "partitions": [
                    {"partition_index": 0, "committed_offset": 1,
                     "committed_leader_epoch": -1, "committed_metadata": ""}]}]}

    not_concurrent = lambda r: _error_of(r, "error_code") not in (  # noqa: E731
        *_COORDINATOR_NOT_READY, "CONCURRENT_TRANSACTIONS(51)")
    return Session(
        "transactions",
        [
            *setup_topic(data, 2),
            *setup_coordinator(txn, 1),
            *setup_coordinator(group, 0),
            Step("setup-init", INIT_PRODUCER_ID, 4, init_body, compare=False,
                 until=not_concurrent),
            Step("init-v4", INIT_PRODUCER_ID, 4, init_body, capture=capture),
            Step("add-partitions-v3-wrong-producer-id", ADD_PARTITIONS_TO_TXN, 3,
                 add(data, [0], pid_delta=1)),
            Step("add-partitions-v3-unknown-topic", ADD_PARTITIONS_TO_TXN, 3,
                 add(f"{t}txn-nope", [0])),
            # Kafka never authorizes an internal topic here: TOPIC_AUTHORIZATION_FAILED.
            Step("add-partitions-v3-internal-topic", ADD_PARTITIONS_TO_TXN, 3,
                 add("__consumer_offsets", [0])),
            Step("end-txn-v3-nothing-to-commit", END_TXN, 3, end(True)),
            Step("add-partitions-v3", ADD_PARTITIONS_TO_TXN, 3, add(data, [0])),
            Step("add-partitions-v3-again", ADD_PARTITIONS_TO_TXN, 3, add(data, [0])),
            Step("produce-v9-transactional", PRODUCE, 9, produce(0)),
            Step("add-offsets-v3", ADD_OFFSETS_TO_TXN, 3, offsets),
            Step("txn-offset-commit-v3", TXN_OFFSET_COMMIT, 3, txn_commit),
            Step("list-offsets-v4-read-committed", LIST_OFFSETS, 4,
                 list_offsets_body(4, data, {0: -1}, isolation=1)),
            Step("fetch-v11-read-committed-open", FETCH, 11,
                 fetch_body(11, data, 0, isolation=1)),
            Step("end-txn-v3-wrong-producer-id", END_TXN, 3, end(True, pid_delta=1)),
            Step("end-txn-v3-fenced-epoch", END_TXN, 3, end(True, epoch_delta=-1)),
            Step("end-txn-v3-abort", END_TXN, 3, end(False)),
            Step("setup-wait-complete", INIT_PRODUCER_ID, 4, init_body, compare=False,
                 until=not_concurrent),
            Step("fetch-v11-read-committed-aborted", FETCH, 11,
                 fetch_body(11, data, 0, isolation=1)),
            Step("list-offsets-v4-read-committed-after", LIST_OFFSETS, 4,
                 list_offsets_body(4, data, {0: -1}, isolation=1)),
            Step("end-txn-v1-old-epoch", END_TXN, 1, end(True)),
            Step("end-txn-v3-old-epoch", END_TXN, 3, end(True)),
            Step("add-partitions-v3-old-epoch", ADD_PARTITIONS_TO_TXN, 3, add(data, [0])),
            Step("add-offsets-v1-old-epoch", ADD_OFFSETS_TO_TXN, 1, offsets),
            # Only an unknown id: the known one's start time (-1 once complete, on both
            # brokers) is a negative timestamp the harness's decoder refuses.
            Step("describe-transactions-v0", DESCRIBE_TRANSACTIONS, 0,
                 {"transactional_ids": [f"{t}tx-missing"]}),
            Step("list-transactions-v1", LIST_TRANSACTIONS, 1, lambda ctx: {
                "state_filters": ["CompleteAbort", "Bogus"],
                "producer_id_filters": [ctx["pid"]], "duration_filter": -1}),
            Step("describe-producers-v0", DESCRIBE_PRODUCERS, 0, {
                "topics": [{"name": data, "partition_indexes": [0, 9]}]}),
            # An admin's abort of a (here unknown) producer's transaction on partition 1.
            Step("write-txn-markers-v1-abort", WRITE_TXN_MARKERS, 1, {"markers": [{
                "producer_id": 4242, "producer_epoch": 0, "transaction_result": False,
                "coordinator_epoch": 0,
                "topics": [{"name": data, "partition_indexes": [1]},
                           {"name": f"{t}txn-nope", "partition_indexes": [0]}]}]}),
            Step("fetch-v11-after-admin-abort", FETCH, 11,
                 fetch_body(11, data, 0, partition=1, isolation=1)),
        ],
    )



def _describe_cluster(t: str) -> Session:
    return Session(
        "describe_cluster",
        [
            Step("v0", DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False}),
            Step("v1-brokers", DESCRIBE_CLUSTER, 1,
                 {"include_cluster_authorized_operations": True, "endpoint_type": 1}),
            Step("v1-controllers", DESCRIBE_CLUSTER, 1,
                 {"include_cluster_authorized_operations": False, "endpoint_type": 2}),
            Step("v1-bad-endpoint-type", DESCRIBE_CLUSTER, 1,
                 {"include_cluster_authorized_operations": False, "endpoint_type": 9}),
            Step("v2-fenced-too", DESCRIBE_CLUSTER, 2,
                 {"include_cluster_authorized_operations": False, "endpoint_type": 1,
                  "include_fenced_brokers": True}),
        ],
    )


def _by_topic(kafka: Any, tidelog: Any) -> tuple[Any, Any]:
    """ElectLeaders of every partition: Kafka lists the topics in hash order; compare sorted."""

    def ordered(answer: Any) -> Any:
        if not isinstance(answer, dict) or "replica_election_results" not in answer:
            return answer
        results = sorted(answer["replica_election_results"], key=lambda r: str(r["topic"]))
        return {**answer, "replica_election_results": results}

    return ordered(kafka), ordered(tidelog)


def _describe_topic_partitions(t: str) -> Session:
    """KIP-966 pages: partition limits, cursors, unknown topics, bad cursors."""
    a, b = f"{t}dtp-a", f"{t}dtp-b"

    def body(names: list[str], limit: int = 2000,
             cursor: tuple[str, int] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "topics": [{"name": name} for name in names], "response_partition_limit": limit,
        }
        if cursor is not None:
            out["cursor"] = {"topic_name": cursor[0], "partition_index": cursor[1]}
        return out

    steps = setup_topic(a, 3) + setup_topic(b, 2)
    steps += [
        Step(name, DESCRIBE_TOPIC_PARTITIONS, 0, request)
        for name, request in [
            ("v0-named", body([b, a])),
            ("v0-limit-2", body([a, b], 2)),
            ("v0-cursor-mid-topic", body([a, b], 2, (a, 2))),
            ("v0-limit-3-ends-a-topic", body([a, b], 3)),
            ("v0-limit-0", body([a, b], 0)),
            ("v0-unknown-topic", body([a, f"{t}dtp-absent"])),
            ("v0-cursor-not-listed", body([b], 10, (a, 0))),
            ("v0-negative-cursor-partition", body([a], 10, (a, -1))),
            ("v0-cursor-past-partitions", body([a, b], 10, (a, 7))),
        ]
    ]
    # ElectLeaders: one broker (Kafka: one KRaft node) has nothing to elect.
    steps += [
        Step(name, ELECT_LEADERS, version, {
            **({"election_type": election_type} if version >= 1 else {}),
            "topic_partitions": partitions, "timeout": 10000,
        }, transform=_by_topic)
        for name, version, election_type, partitions in [
            ("elect-v2-preferred", 2, 0, [{"topic": a, "partitions": [0, 2, 9]}]),
            ("elect-v1-unclean", 1, 1, [{"topic": b, "partitions": [1]}]),
            ("elect-v0-unknown-topic", 0, 0, [{"topic": f"{t}dtp-absent", "partitions": [0]}]),
            ("elect-v2-all", 2, 0, None),
        ]
    ]
    # Partition reassignments on one broker: a move to itself is done at once, a broker that
    # is not there is refused, nothing is ever in flight to cancel or list.
    def reassign(replicas: Callable[[Ctx], list[int] | None], partition: int = 0,
                 topic: str = a, **extra: Any) -> Callable[[Ctx], dict[str, Any]]:
        return lambda ctx: {"timeout": 10000, **extra, "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "replicas": replicas(ctx)}]}]}

    steps += [
        Step(name, ALTER_PARTITION_REASSIGNMENTS, version, body)
        for name, version, body in [
            ("reassign-v0-to-itself", 0, reassign(lambda ctx: [ctx["node"]])),
            ("reassign-v1-absent-broker", 1, reassign(lambda ctx: [ctx["node"], 9999])),
            ("reassign-v0-empty", 0, reassign(lambda ctx: [])),
            ("reassign-v0-duplicate", 0, reassign(lambda ctx: [ctx["node"], ctx["node"]])),
            ("reassign-v0-cancel-none", 0, reassign(lambda ctx: None)),
            ("reassign-v0-unknown-partition", 0, reassign(lambda ctx: [ctx["node"]], 9)),
            ("reassign-v1-no-rf-change", 1, reassign(
                lambda ctx: [ctx["node"], 9999], allow_replication_factor_change=False)),
        ]
    ] + [
        Step("list-reassignments-all", LIST_PARTITION_REASSIGNMENTS, 0,
             {"timeout": 10000, "topics": None}),
        Step("list-reassignments-named", LIST_PARTITION_REASSIGNMENTS, 0,
             {"timeout": 10000, "topics": [{"name": a, "partition_indexes": [0, 1]}]}),
    ]
    return Session("describe_topic_partitions", steps)


def _acls(t: str) -> Session:
    """Neither broker has an authorizer configured: every ACL API answers SECURITY_DISABLED."""
    any_filter = {"resource_type_filter": 1, "resource_name_filter": None,
                  "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
                  "operation": 1, "permission_type": 1}
    creation = {"resource_type": 2, "resource_name": f"acl-{t}", "resource_pattern_type": 3,
                "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}
    steps = []
    for version in (1, 3):
        steps += [
            Step(f"describe-v{version}", DESCRIBE_ACLS, version, any_filter),
            Step(f"create-v{version}", CREATE_ACLS, version, {"creations": [creation]}),
            Step(f"delete-v{version}", DELETE_ACLS, version, {"filters": [any_filter]}),
        ]
    return Session("acls", steps)


def _internal_topics(t: str) -> Session:
    """Last: by now both brokers have created __consumer_offsets (Kafka does on the first
    FindCoordinator; Tidelog at start-up), and a broker that deletes it harms no later session."""
    return Session(
        "internal_topics",
        [
            Step("metadata-v12", METADATA, 12, md(12, ["__consumer_offsets"])),
            Step("describe-configs-v4", DESCRIBE_CONFIGS, 4, {
                "resources": [config_resource(TOPIC, "__consumer_offsets", ["cleanup.policy"])],
                "include_synonyms": False, "include_documentation": False}),
            Step("create-topics-v7", CREATE_TOPICS, 7, create_body("__consumer_offsets")),
            Step("create-partitions-v3-validate-only", CREATE_PARTITIONS, 3, {
                "topics": [{"name": "__consumer_offsets", "count": 99, "assignments": None}],
                "timeout": 30000, "validate_only": True}),
            Step("delete-records-v2", DELETE_RECORDS, 2, {"topics": [{
                "name": "__consumer_offsets", "partitions": [{"partition_index": 0,
                                                              "offset": 0}]}],
                "timeout": 30000}),
            Step("produce-v9", PRODUCE, 9,
                 produce_body("__consumer_offsets", {0: batch(records(1))})),
            Step("delete-topics-v6", DELETE_TOPICS, 6, {
                "topics": [{"name": "__consumer_offsets", "topic_id": None}],
                "timeout": 30000}),
        ],
    )
