"""Kafka 4 admin breadth with real clients: every topic config Kafka 4 accepts is accepted,
stored and described (confluent-kafka and kafka-python admin clients); `compression.type`
honoured per topic; AlterConfigs replaces the whole set as Kafka's does; KIP-467 record
errors; DescribeLogDirs."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, ElectionType, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from tidelog.records.batch import Codec, iter_batches
from tidelog.storage.config import STORED_TOPIC_CONFIGS

from .conftest import TIDELOG, error_name, make_admin

# A value other than Kafka's default for every config Tidelog stores without acting on it.
KAFKA_ONLY_VALUES = {
    "compression.gzip.level": "5",
    "compression.lz4.level": "10",
    "compression.zstd.level": "7",
    "file.delete.delay.ms": "30000",
    "follower.replication.throttled.replicas": "0:1",
    "leader.replication.throttled.replicas": "*",
    "local.retention.bytes": "1000000",
    "local.retention.ms": "60000",
    "max.compaction.lag.ms": "86400000",
    "message.timestamp.after.max.ms": "7200000",
    "message.timestamp.before.max.ms": "86400000",
    "min.insync.replicas": "2",
    "preallocate": "true",
    "remote.log.copy.disable": "true",
    "remote.log.delete.on.disable": "true",
    "remote.storage.enable": "false",
    "segment.jitter.ms": "1000",
    "unclean.leader.election.enable": "true",
}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(admin: AdminClient, name: str, config: dict[str, str]) -> str:
    futures = admin.create_topics([NewTopic(name, num_partitions=1, config=config)])
    return error_name(futures[name])


def described(admin: AdminClient, name: str) -> dict[str, Any]:
    resource = ConfigResource(ResourceType.TOPIC, name)
    result: dict[str, Any] = admin.describe_configs([resource])[resource].result(timeout=15)
    return result


def test_every_kafka_topic_config_is_accepted_stored_and_described(broker: Any) -> None:
    assert set(KAFKA_ONLY_VALUES) == set(STORED_TOPIC_CONFIGS)
    admin = make_admin(broker.bootstrap)
    name = unique("kafka4-configs")
    assert create(admin, name, KAFKA_ONLY_VALUES | {"compression.type": "zstd"}) == ""
    configs = described(admin, name)
    for key, value in KAFKA_ONLY_VALUES.items():
        assert configs[key].value == value, key
        assert configs[key].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, key
    assert configs["compression.type"].value == "zstd"
    # IncrementalAlterConfigs: set one, delete another back to Kafka's default.
    entries = [
        ConfigEntry("min.insync.replicas", "3", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("preallocate", None, incremental_operation=AlterConfigOpType.DELETE),
    ]
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
    assert error_name(admin.incremental_alter_configs([resource])[resource]) == ""
    configs = described(admin, name)
    assert configs["min.insync.replicas"].value == "3"
    assert configs["preallocate"].value == "false"
    assert configs["preallocate"].source == ConfigSource.DEFAULT_CONFIG.value
    # A value of the wrong type is still refused, as Kafka refuses it.
    assert create(admin, unique("bad"), {"preallocate": "maybe"}) == "INVALID_CONFIG"
    assert create(admin, unique("bad"), {"compression.type": "brotli"}) == "INVALID_CONFIG"


def test_alter_configs_replaces_the_whole_set(broker: Any) -> None:
    admin = make_admin(broker.bootstrap)
    name = unique("legacy-alter")
    assert create(admin, name, {"retention.ms": "5000", "min.insync.replicas": "2"}) == ""
    # librdkafka's alter_configs sends AlterConfigs (key 33) as given.
    resource = ConfigResource(ResourceType.TOPIC, name, set_config={"segment.jitter.ms": "9"})
    assert error_name(admin.alter_configs([resource])[resource]) == ""
    configs = described(admin, name)
    assert configs["segment.jitter.ms"].value == "9"
    # Everything the request did not name is back to its default (Kafka's AlterConfigs).
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["min.insync.replicas"].value == "1"
    # kafka-python's AlterConfigs (incremental=False) sends the other overrides along.
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        client.alter_configs(
            [KpConfigResource(ConfigResourceType.TOPIC, name, configs={"preallocate": "true"})],
            incremental=False,
        )
    finally:
        client.close()
    configs = described(admin, name)
    assert (configs["preallocate"].value, configs["segment.jitter.ms"].value) == ("true", "9")


def stored_codecs(data_dir: Path, name: str) -> list[Codec]:
    codecs = []
    for path in sorted((data_dir / f"{name}-0").glob("*.log")):
        codecs += [batch.codec for batch in iter_batches(path.read_bytes())]
    return codecs


def test_compression_type_recompresses_for_that_topic_only(broker: Any) -> None:
    admin = make_admin(broker.bootstrap)
    gzip_topic, kept_topic = unique("gzip-topic"), unique("producer-topic")
    assert create(admin, gzip_topic, {"compression.type": "gzip"}) == ""
    assert create(admin, kept_topic, {}) == ""  # compression.type=producer, the default
    values = [f"value-{index}".encode() * 20 for index in range(50)]
    for codec in ("none", "lz4"):
        producer = Producer({
            "bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 20,
        })
        for topic in (gzip_topic, kept_topic):
            for value in values:
                producer.produce(topic, value, key=b"k")
        assert producer.flush(30) == 0
    assert set(stored_codecs(broker.data_dir, gzip_topic)) == {Codec.GZIP}
    assert set(stored_codecs(broker.data_dir, kept_topic)) == {Codec.NONE, Codec.LZ4}
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": unique("g"),
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })
    consumer.subscribe([gzip_topic])
    received: list[bytes] = []
    try:
        for _ in range(60):
            for message in consumer.consume(200, timeout=0.5):
                assert message.error() is None, message.error()
                received.append(message.value())
            if len(received) >= 2 * len(values):
                break
    finally:
        consumer.close()
    assert received == values + values


def test_keyless_records_in_a_compacted_topic_are_named(broker: Any) -> None:
    """KIP-467: librdkafka fails exactly the keyless records with INVALID_RECORD (the broker
    names their indexes) and the batch's other records with its own error."""
    admin = make_admin(broker.bootstrap)
    name = unique("compact-keys")
    assert create(admin, name, {"cleanup.policy": "compact"}) == ""
    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "linger.ms": 200, "retries": 0,
        "enable.idempotence": False,
    })
    outcomes: dict[bytes, str] = {}

    def report(error: Any, message: Any) -> None:
        outcomes[message.value()] = error.name() if error else ""

    for index, key in enumerate([b"k", None, b"k", None]):
        producer.produce(name, f"v{index}".encode(), key=key, on_delivery=report)
    assert producer.flush(30) == 0
    assert outcomes[b"v1"] == outcomes[b"v3"] == "INVALID_RECORD"
    # librdkafka's "Message(s) failed due to other messages in the batch".
    assert outcomes[b"v0"] == outcomes[b"v2"] == "_INVALID_DIFFERENT_RECORD", outcomes


def test_describe_log_dirs(broker: Any) -> None:
    admin = make_admin(broker.bootstrap)
    name = unique("log-dirs")
    assert admin.create_topics([NewTopic(name, num_partitions=2)])[name].result(30) is None
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(10):
        producer.produce(name, b"x" * 100, partition=1)
    assert producer.flush(30) == 0
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        everything = client.describe_log_dirs()
        only_one = client.describe_log_dirs({name: [1]})
    finally:
        client.close()
    [answer] = everything  # kafka-python asks v5 (its Kafka 4.3 marker)
    [log_dir] = answer["log_dirs"]
    assert log_dir["error_code"] == 0
    assert Path(log_dir["log_dir"]) == broker.data_dir.resolve()
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    sizes = {
        (topic["name"], partition["partition_index"]): partition["partition_size"]
        for topic in log_dir["topics"]
        for partition in topic["partitions"]
    }
    assert sizes[(name, 0)] == 0 and sizes[(name, 1)] > 1000
    assert "__consumer_offsets" in {topic for topic, _ in sizes}
    [narrowed] = only_one[0]["log_dirs"]
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]])
            for t in narrowed["topics"]] == [(name, [1])]


def test_cli_log_dirs_and_configs_spelling(broker: Any) -> None:
    admin = make_admin(broker.bootstrap)
    name = unique("cli-log-dirs")
    assert create(admin, name, {"min.insync.replicas": "2"}) == ""
    listed = subprocess.run(
        [TIDELOG, "log-dirs", "describe", "-b", broker.bootstrap, "--topic", name, "--json"],
        capture_output=True, text=True, timeout=60, check=True,
    )
    answer = json.loads(listed.stdout)
    assert [(p["topic"], p["partition"]) for p in answer["partitions"]] == [(name, 0)]
    assert Path(answer["log_dirs"][0]["log_dir"]) == broker.data_dir.resolve()
    # kafka-configs' spelling: `tidelog configs describe --broker N --all`.
    broker_configs = subprocess.run(
        [TIDELOG, "configs", "describe", "-b", broker.bootstrap, "--broker", "0", "--all"],
        capture_output=True, text=True, timeout=60, check=True,
    )
    assert "compression.type" in broker_configs.stdout
    assert "log.segment.bytes" in broker_configs.stdout
    topic_configs = subprocess.run(
        [TIDELOG, "configs", "describe", "-b", broker.bootstrap, "--topic", name],
        capture_output=True, text=True, timeout=60, check=True,
    )
    assert "min.insync.replicas" in topic_configs.stdout


def test_describe_topic_partitions_pages_with_a_cursor(broker: Any) -> None:
    """KIP-966 through kafka-python's describe_topic_partitions: 5 partitions in pages of 2."""
    admin = make_admin(broker.bootstrap)
    name = unique("pages")
    assert admin.create_topics([NewTopic(name, num_partitions=5)])[name].result(30) is None
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    seen: list[int] = []
    cursor = None
    try:
        for _ in range(5):
            page = client.describe_topic_partitions(
                [name], response_partition_limit=2, cursor=cursor
            )
            [topic] = page["topics"]
            assert topic["error_code"] == 0 and topic["name"] == name
            seen += [partition["partition_index"] for partition in topic["partitions"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
    finally:
        client.close()
    assert seen == [0, 1, 2, 3, 4]


def test_elect_leaders_on_one_broker_needs_no_election(broker: Any) -> None:
    admin = make_admin(broker.bootstrap)
    name = unique("elect")
    assert admin.create_topics([NewTopic(name, num_partitions=2)])[name].result(30) is None
    future = admin.elect_leaders(
        ElectionType.PREFERRED, [TopicPartition(name, 0), TopicPartition(name, 5)]
    )
    outcome = future.result(timeout=30)
    errors = {tp.partition: error.name() for tp, error in outcome.items()}
    assert errors == {0: "ELECTION_NOT_NEEDED", 5: "UNKNOWN_TOPIC_OR_PART"}
