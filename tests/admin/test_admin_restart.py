"""Topics, partition counts and config overrides survive a restart; internal topics stay put."""

from __future__ import annotations

import json
import uuid
from typing import Any

from confluent_kafka import TopicCollection
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from .conftest import error_name, make_admin


def describe(bootstrap: str, name: str) -> tuple[str, int, dict[str, Any]]:
    admin = make_admin(bootstrap)
    topic = admin.describe_topics(TopicCollection([name]))[name].result(timeout=10)
    resource = ConfigResource(ResourceType.TOPIC, name)
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    overrides = {
        key: entry.value
        for key, entry in configs.items()
        if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    }
    return str(topic.topic_id), len(topic.partitions), overrides


def test_topics_survive_restart(broker_factory: Any) -> None:
    broker = broker_factory()
    admin = make_admin(broker.bootstrap)
    name = "survivor"
    topic = NewTopic(name, num_partitions=2, config={"retention.ms": "86400000"})
    assert error_name(admin.create_topics([topic])[name]) == ""
    assert error_name(admin.create_partitions([NewPartitions(name, 4)])[name]) == ""
    entry = ConfigEntry("segment.bytes", "65536", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[entry])
    assert error_name(admin.incremental_alter_configs([resource])[resource]) == ""
    doomed = "doomed"
    assert error_name(admin.create_topics([NewTopic(doomed, num_partitions=1)])[doomed]) == ""
    assert error_name(admin.delete_topics([doomed])[doomed]) == ""
    before = describe(broker.bootstrap, name)
    assert before[1:] == (4, {"retention.ms": "86400000", "segment.bytes": "65536"})

    assert broker.stop() == 0
    restarted = broker_factory(broker.data_dir)
    assert describe(restarted.bootstrap, name) == before
    admin = make_admin(restarted.bootstrap)
    gone = admin.describe_topics(TopicCollection([doomed]))[doomed]
    assert error_name(gone) == "UNKNOWN_TOPIC_OR_PART"
    assert not list(broker.data_dir.glob(f"{doomed}-*"))


def test_internal_topics_cannot_be_deleted(broker_factory: Any, tmp_path: Any) -> None:
    data_dir = tmp_path / "internal"
    data_dir.mkdir()
    topics = {
        "version": 1,
        "topics": [
            {
                "name": "__consumer_offsets",
                "topic_id": str(uuid.uuid4()),
                "partitions": 1,
                "configs": {"cleanup.policy": "compact"},
                "internal": True,
            }
        ],
    }
    (data_dir / "topics.json").write_text(json.dumps(topics))
    broker = broker_factory(data_dir)
    admin = make_admin(broker.bootstrap)
    name = "__consumer_offsets"
    assert error_name(admin.delete_topics([name])[name]) == "TOPIC_AUTHORIZATION_FAILED"
    topic = admin.describe_topics(TopicCollection([name]))[name].result(timeout=10)
    assert topic.is_internal and len(topic.partitions) == 1
    created = admin.create_topics([NewTopic(name, num_partitions=1)])[name]
    assert error_name(created) == "TOPIC_ALREADY_EXISTS"
