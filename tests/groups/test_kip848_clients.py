"""KIP-848 with confluent-kafka `group.protocol=consumer`: a regex subscription picking up a topic
created later, a static member restarting without a rebalance, `tidelog groups list` with group
types (ListGroups v5), client hosts in DescribeGroups, and session limits from the broker config.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .test_cli_groups import tidelog
from .test_rebalance_clients import GROUP_SETTINGS

SETTINGS = {
    **GROUP_SETTINGS,
    "group.min.session.timeout.ms": "7000",
    "group.max.session.timeout.ms": "60000",
}
Partitions = set[tuple[str, int]]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from conftest import BrokerFactory

    factory = BrokerFactory(tmp_path_factory.mktemp("kip848"))
    try:
        yield factory(settings=SETTINGS)
    finally:
        bad = factory.stop_all()
    assert not bad, "\n".join(bad)


def _create(bootstrap: str, *topics: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, count, 1) for name, count in topics])
    for future in futures.values():
        future.result(15)


class Tracked:
    """A consumer whose assignment is kept from its rebalance callbacks."""

    def __init__(self, bootstrap: str, group: str, **settings: Any) -> None:
        self.owned: Partitions = set()
        self.events: list[tuple[str, Partitions]] = []
        self.messages: list[tuple[str, int, bytes]] = []
        self.errors: list[KafkaError] = []
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "group.protocol": "consumer",
            **settings,
        }
        self.consumer = Consumer(config)

    def subscribe(self, topics: list[str]) -> None:
        def on_assign(_: Consumer, partitions: list[Any]) -> None:
            added = {(p.topic, p.partition) for p in partitions}
            self.owned |= added
            self.events.append(("assign", added))

        def on_revoke(_: Consumer, partitions: list[Any]) -> None:
            removed = {(p.topic, p.partition) for p in partitions}
            self.owned -= removed
            self.events.append(("revoke", removed))

        self.consumer.subscribe(topics, on_assign=on_assign, on_revoke=on_revoke)

    def poll(self) -> None:
        message = self.consumer.poll(0.05)
        if message is None:
            return
        if message.error() is not None:
            self.errors.append(message.error())
        else:
            self.messages.append((message.topic(), message.partition(), message.value()))


def spin_until(
    members: list[Tracked], condition: Callable[[], bool], timeout_s: float, what: str
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for member in members:
            member.poll()
        if condition():
            return
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def test_regex_subscription_picks_up_a_topic_created_later(broker: Any) -> None:
    _create(broker.bootstrap, ("orders-eu", 2), ("invoices", 1))
    member = Tracked(broker.bootstrap, "regex-group")
    member.subscribe(["^orders-.*"])  # librdkafka sends SubscribedTopicRegex "(^orders-.*)"
    first = {("orders-eu", 0), ("orders-eu", 1)}
    spin_until([member], lambda: member.owned == first, 20, "orders-eu assigned")

    _create(broker.bootstrap, ("orders-us", 1))
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("orders-us", b"late topic")
    assert producer.flush(15) == 0
    spin_until(
        [member],
        lambda: ("orders-us", 0, b"late topic") in member.messages,
        25,
        "a message from the topic created after subscribing",
    )
    assert member.owned == first | {("orders-us", 0)}
    assert not any(kind == "revoke" for kind, _ in member.events), "nothing was taken away"
    assert member.errors == []
    member.consumer.close()


def test_static_consumer_protocol_member_restarts_without_a_rebalance(broker: Any) -> None:
    _create(broker.bootstrap, ("static848", 4))
    dynamic = Tracked(broker.bootstrap, "static848-group")
    dynamic.subscribe(["static848"])
    spin_until([dynamic], lambda: len(dynamic.owned) == 4, 20, "the first member owns all")
    first = Tracked(broker.bootstrap, "static848-group", **{"group.instance.id": "i-1"})
    first.subscribe(["static848"])
    spin_until(
        [dynamic, first],
        lambda: len(first.owned) == 2 and len(dynamic.owned) == 2,
        20,
        "a 2/2 split",
    )
    kept = set(first.owned)
    dynamic_events = len(dynamic.events)
    first.consumer.close()  # a static member leaves with member epoch -2: no rebalance
    second = Tracked(broker.bootstrap, "static848-group", **{"group.instance.id": "i-1"})
    second.subscribe(["static848"])
    spin_until([dynamic, second], lambda: second.owned == kept, 20, "the same partitions back")
    for _ in range(20):  # a few more heartbeats: the other member must stay untouched
        dynamic.poll()
        second.poll()
    assert dynamic.events[dynamic_events:] == [], "the dynamic member saw a rebalance"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = admin.describe_consumer_groups(["static848-group"])["static848-group"].result(15)
    instances = {m.group_instance_id for m in described.members}
    assert instances == {None, "i-1"} and len(described.members) == 2
    second.consumer.close()
    dynamic.consumer.close()


def test_groups_list_shows_types_and_describe_shows_hosts(broker: Any) -> None:
    _create(broker.bootstrap, ("typed", 2))
    classic = Tracked(
        broker.bootstrap,
        "classic-typed",
        **{"group.protocol": "classic", "session.timeout.ms": 10_000},
    )
    modern = Tracked(broker.bootstrap, "consumer-typed")
    classic.subscribe(["typed"])
    modern.subscribe(["typed"])
    spin_until(
        [classic, modern],
        lambda: len(classic.owned) == 2 and len(modern.owned) == 2,
        20,
        "both groups assigned",
    )
    listed = {
        row["group"]: row for row in json.loads(tidelog(broker.bootstrap, "list", "--json").stdout)
    }
    assert listed["classic-typed"]["type"] == "CLASSIC"
    assert listed["consumer-typed"]["type"] == "CONSUMER"
    assert {listed["classic-typed"]["state"], listed["consumer-typed"]["state"]} == {"STABLE"}
    only_consumer = json.loads(
        tidelog(broker.bootstrap, "list", "--type", "consumer", "--json").stdout
    )
    assert "consumer-typed" in {row["group"] for row in only_consumer}
    assert {row["type"] for row in only_consumer} == {"CONSUMER"}
    only_classic = json.loads(
        tidelog(broker.bootstrap, "list", "--type", "classic", "--json").stdout
    )
    assert [row["group"] for row in only_classic] == ["classic-typed"]

    for group in ("classic-typed", "consumer-typed"):  # DescribeGroups / ConsumerGroupDescribe
        described = json.loads(tidelog(broker.bootstrap, "describe", group, "--json").stdout)
        assert [m["host"] for m in described["members"]] == ["/127.0.0.1"], group
    classic.consumer.close()
    modern.consumer.close()


@pytest.mark.parametrize("session_timeout_ms", [6000, 90_000])
def test_session_timeout_limits_come_from_the_broker_config(
    broker: Any, session_timeout_ms: int
) -> None:
    _create(broker.bootstrap, (f"limits-{session_timeout_ms}", 1))
    refused = Tracked(
        broker.bootstrap,
        f"limits-{session_timeout_ms}",
        **{"group.protocol": "classic", "session.timeout.ms": session_timeout_ms},
    )
    refused.subscribe([f"limits-{session_timeout_ms}"])
    spin_until([refused], lambda: bool(refused.errors), 15, "a JoinGroup error")
    assert refused.errors[0].code() == KafkaError.INVALID_SESSION_TIMEOUT
    assert refused.owned == set()
    refused.consumer.close()


def test_list_groups_every_version_and_describe_shows_the_regex(broker: Any) -> None:
    from broker.raw import RawClient, request_module

    _create(broker.bootstrap, ("raw-orders", 1))
    member = Tracked(broker.bootstrap, "raw-regex-group")
    member.subscribe(["^raw-ord.*"])
    spin_until([member], lambda: member.owned == {("raw-orders", 0)}, 20, "assignment")
    with RawClient(broker.bootstrap) as client:
        for version in range(0, 6):
            body = request_module(16, version).ListGroupsRequest()
            answer = client.call(16, version, body)
            assert answer.error_code == 0, version
            assert "raw-regex-group" in {g.group_id for g in answer.groups}, version
        typed = request_module(16, 5).ListGroupsRequest(types_filter=("Classic",))
        assert "raw-regex-group" not in {g.group_id for g in client.call(16, 5, typed).groups}
        typed = request_module(16, 5).ListGroupsRequest(
            states_filter=("stable",), types_filter=("consumer",)
        )
        listed = {g.group_id: g for g in client.call(16, 5, typed).groups}
        assert listed["raw-regex-group"].group_type == "consumer"
        assert listed["raw-regex-group"].protocol_type == "consumer"
        describe = request_module(69, 1).ConsumerGroupDescribeRequest(
            group_ids=("raw-regex-group",), include_authorized_operations=False
        )
        (group,) = client.call(69, 1, describe).groups
        (described,) = group.members
        assert described.subscribed_topic_regex is not None
        assert "^raw-ord.*" in described.subscribed_topic_regex  # librdkafka wraps it in (...)
        assert [t.topic_name for t in described.assignment.topic_partitions] == ["raw-orders"]
    member.consumer.close()
