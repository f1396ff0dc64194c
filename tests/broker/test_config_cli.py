"""`tidelog serve` options and Kafka-named settings; topic metadata and producer id files."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tidelog.broker.config import ConfigError, load_config
from tidelog.broker.metadata import TopicStore, load_or_create_cluster_id
from tidelog.broker.producer_ids import BLOCK_SIZE, ProducerIdAllocator
from tidelog.errors import ErrorCode, KafkaError

from .raw import RawClient, request_module

if TYPE_CHECKING:
    from conftest import BrokerFactory


def test_defaults_match_the_command_contract() -> None:
    config = load_config(None, {})
    assert (config.listen_host, config.listen_port) == ("127.0.0.1", 9092)
    assert (config.advertised_host, config.advertised_port) == ("127.0.0.1", 9092)
    assert config.data_dir == Path("tidelog-data")
    assert config.auto_create_topics and config.num_partitions == 1


def test_kafka_names_from_toml_and_set(tmp_path: Path) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text(
        'num.partitions = 3\nlog.segment.bytes = 1048576\n"log.durability" = "sync"\n'
        "[log.retention]\nhours = 2\n"
    )
    config = load_config(
        toml,
        {"num.partitions": "5", "auto.create.topics.enable": "false", "max.connections": "7"},
        listen="0.0.0.0:9999",
        node_id=4,
    )
    assert config.num_partitions == 5  # --set wins over the file
    assert not config.auto_create_topics and config.max_connections == 7
    assert config.log.segment_bytes == 1048576 and config.log.durability == "sync"
    assert config.log.retention_ms == 2 * 3_600_000
    assert (config.listen_host, config.listen_port, config.node_id) == ("0.0.0.0", 9999, 4)
    assert (config.advertised_host, config.advertised_port) == ("127.0.0.1", 9999)
    assert config.raw["num.partitions"] == "5"


@pytest.mark.parametrize(
    "overrides",
    [{"no.such.setting": "1"}, {"num.partitions": "many"}, {"log.durability": "maybe"}],
)
def test_bad_settings_are_named(overrides: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match=next(iter(overrides)).split(".")[0]):
        load_config(None, overrides)


def test_unknown_setting_exits_two(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tidelog.cli.main", "serve", "--data-dir", str(tmp_path),
         "--set", "bogus.name=1"],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert b"bogus.name" in result.stderr
    assert result.stdout == b""


def test_serve_help_lists_the_options() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tidelog.cli.main", "serve", "--help"],
        capture_output=True, timeout=60, check=True,
    )  # fmt: skip
    for option in (b"--data-dir", b"--listen", b"--advertise", b"--node-id", b"--config", b"--set"):
        assert option in result.stdout


def test_advertised_listener_and_settings_reach_metadata(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(
        settings={"num.partitions": "3"},
        extra_args=["--advertise", "localhost:1234", "--node-id", "7"],
    )
    module = request_module(3, 12)
    with RawClient(broker.bootstrap) as client:
        response = client.call(
            3,
            12,
            module.MetadataRequest(
                topics=(module.MetadataRequestTopic(name="auto", topic_id=None),),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            ),
        )
        again = client.call(
            3,
            12,
            module.MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        )
    (node,) = response.brokers
    assert (node.node_id, node.host, node.port) == (7, "localhost", 1234)
    assert response.controller_id == 7 and response.cluster_id
    (topic,) = response.topics
    assert len(topic.partitions) == 3
    assert all(p.leader_id == 7 and p.leader_epoch == 0 for p in topic.partitions)
    # All-topics metadata also lists the internal __consumer_offsets, as Kafka does.
    (listed,) = [t for t in again.topics if t.name == topic.name]
    assert listed.topic_id == topic.topic_id != uuid.UUID(int=0)
    assert all(t.is_internal == t.name.startswith("__") for t in again.topics)
    assert again.cluster_id == response.cluster_id


def test_topic_store_persists_atomically(tmp_path: Path) -> None:
    store = TopicStore(tmp_path)
    created = store.create("orders", 2, {"retention.ms": "1000"})
    store.create("__consumer_offsets", 1, {}, internal=True)
    store.set_partitions("orders", 4)
    with pytest.raises(KafkaError) as exists:
        store.create("orders", 1, {})
    assert exists.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaError) as bad_name:
        store.create("no/slash", 1, {})
    assert bad_name.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    reloaded = TopicStore(tmp_path)
    orders = reloaded.get("orders")
    assert orders is not None and orders.partitions == 4 and orders.topic_id == created.topic_id
    assert reloaded.by_id(created.topic_id) == orders
    assert orders.configs == {"retention.ms": "1000"}
    reloaded.delete("orders")
    assert TopicStore(tmp_path).get("orders") is None
    assert not list(tmp_path.glob("*.tmp"))


def test_cluster_id_is_stable(tmp_path: Path) -> None:
    first = load_or_create_cluster_id(tmp_path, 0)
    assert len(first) == 22 and load_or_create_cluster_id(tmp_path, 0) == first


def test_producer_ids_never_repeat_across_restarts(tmp_path: Path) -> None:
    first = ProducerIdAllocator(tmp_path)
    seen = {first.allocate() for _ in range(BLOCK_SIZE + 5)}
    second = ProducerIdAllocator(tmp_path)  # as after a crash: the open block is skipped
    more = {second.allocate() for _ in range(10)}
    assert len(seen) == BLOCK_SIZE + 5 and not seen & more
