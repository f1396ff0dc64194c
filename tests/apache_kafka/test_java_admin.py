"""Kafka's Java AdminClient (4.3.1) against a real `tidelog serve`: cluster, topics (create,
describe, list, delete, create partitions), configs (describe, incremental alter), offsets
(earliest, latest, max timestamp, by timestamp), delete records, consumer groups (list,
describe, list/alter/delete offsets, delete). The expected values are what Apache Kafka 4.3.1
answers to the same program (checked by hand with scripts/kafka)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from .common import of_kind, run_program

if TYPE_CHECKING:
    from conftest import BrokerProcess

BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def steps(broker: BrokerProcess) -> dict[str, dict[str, Any]]:
    lines = run_program("AdminChecks", broker.bootstrap, "ad")
    assert of_kind(lines, "done"), "the program did not finish"
    return {line["step"]: line for line in of_kind(lines, "step")}


def ok(steps: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    step = steps[name]
    assert step["ok"], f"{name}: {step.get('error')}"
    return step


def test_cluster_and_topics(steps: dict[str, dict[str, Any]], broker: BrokerProcess) -> None:
    cluster = ok(steps, "describe_cluster")
    assert cluster["cluster_id"]
    [node] = cluster["nodes"]
    assert (node["host"], node["port"]) == ("127.0.0.1", broker.port)
    assert cluster["controller"] == node["id"]
    leader = node["id"]

    created = ok(steps, "create_topics")
    assert created["a_partitions"] == 3
    assert ok(steps, "create_existing_topic")["raised"].startswith(
        "org.apache.kafka.common.errors.TopicExistsException"
    )
    assert {"ad-a", "ad-b"} <= set(ok(steps, "list_topics")["names"])

    topics = ok(steps, "describe_topics")["topics"]
    assert topics["ad-a"]["topic_id"] == created["a_topic_id"]
    for name, count in (("ad-a", 3), ("ad-b", 1)):
        partitions = topics[name]["partitions"]
        assert [p["partition"] for p in partitions] == list(range(count))
        for p in partitions:
            assert (p["leader"], p["replicas"], p["isr"]) == (leader, [leader], [leader])
        assert topics[name]["internal"] is False

    grown = ok(steps, "create_partitions")["topics"]["ad-a"]
    assert [p["partition"] for p in grown["partitions"]] == [0, 1, 2, 3, 4]
    assert grown["topic_id"] == created["a_topic_id"]

    deleted = ok(steps, "delete_topics")
    assert (deleted["a_listed"], deleted["b_listed"]) == (False, False)
    assert ok(steps, "describe_deleted_topic")["raised"].startswith(
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"
    )


def test_configs(steps: dict[str, dict[str, Any]]) -> None:
    configs = ok(steps, "describe_configs")["configs"]
    a, b = configs["ad-a"], configs["ad-b"]
    assert a["retention.ms"] == {
        "value": "3600000",
        "source": "DYNAMIC_TOPIC_CONFIG",
        "default": False,
    }
    assert a["cleanup.policy"]["value"] == "delete"
    assert b["cleanup.policy"] == {
        "value": "compact",
        "source": "DYNAMIC_TOPIC_CONFIG",
        "default": False,
    }
    assert b["retention.ms"] == {"value": "604800000", "source": "DEFAULT_CONFIG", "default": True}
    assert a["max.message.bytes"] == {
        "value": "1048588",
        "source": "DEFAULT_CONFIG",
        "default": True,
    }

    altered = ok(steps, "alter_configs")["configs"]["ad-a"]
    assert altered["retention.ms"]["value"] == "7200000"
    assert altered["max.message.bytes"] == {
        "value": "2000000",
        "source": "DYNAMIC_TOPIC_CONFIG",
        "default": False,
    }
    assert altered["cleanup.policy"] == {
        "value": "delete",
        "source": "DEFAULT_CONFIG",
        "default": True,
    }
    assert ok(steps, "describe_broker_config")["num.partitions"] == "1"


def test_offsets_and_delete_records(steps: dict[str, dict[str, Any]]) -> None:
    ok(steps, "produce")  # 10 records to ad-a[0], timestamps BASE_TS + i * 1000
    offsets = ok(steps, "list_offsets")["offsets"]
    assert offsets["earliest"]["offset"] == 0
    assert offsets["latest"]["offset"] == 10
    assert offsets["max_timestamp"] == {"offset": 9, "timestamp": BASE_TS + 9000}
    assert offsets["for_timestamp"] == {"offset": 6, "timestamp": BASE_TS + 6000}
    assert offsets["for_future_timestamp"]["offset"] == -1

    deleted = ok(steps, "delete_records")
    assert deleted["low_watermark"] == 4
    assert deleted["offsets"]["earliest"]["offset"] == 4
    assert deleted["offsets"]["latest"]["offset"] == 10


def test_consumer_group_admin(steps: dict[str, dict[str, Any]]) -> None:
    committed = ok(steps, "commit_group_offsets")
    assert (committed["committed"], committed["metadata"]) == (7, "seven")
    listed = {g["group"]: g for g in ok(steps, "list_groups")["groups"]}
    assert listed["ad-group"]["type"] == "Classic"
    assert listed["ad-group"]["state"] == "Empty"
    described = ok(steps, "describe_group")
    assert (described["state"], described["members"], described["type"]) == ("Empty", 0, "Classic")
    assert described["coordinator"] == steps["describe_cluster"]["nodes"][0]["id"]
    assert ok(steps, "list_group_offsets")["offsets"] == {"ad-a-0": 7}
    assert ok(steps, "alter_group_offsets")["offsets"] == {"ad-a-0": 2}
    assert ok(steps, "delete_group_offsets")["offsets"] == {}
    assert "ad-group" not in ok(steps, "delete_group")["groups"]
