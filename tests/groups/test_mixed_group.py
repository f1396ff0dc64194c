"""A group migrated online (KIP-848) by rolling real members, under a producer's load.

Three confluent-kafka members start with `group.protocol=classic`; one at a time each is
restarted with `group.protocol=consumer` (the first one upgrades the group), then one at a time
back to classic (the last consumer member leaving downgrades it). Checked from the clients:
no partition is assigned to a member while another still holds it (rebalance callbacks),
committed offsets never go backwards (sampled by OffsetFetch throughout) and end at the log
end, every acknowledged message is processed; the group's type follows the roll.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .members import ConfluentMember, Ledger, SteadyProducer, wait_until

PARTITIONS = 6
# Round trips classic -> consumer -> classic per strategy; more for a soak run.
ROUNDS = int(os.environ.get("TIDELOG_MIXED_ROUNDS", "1"))
SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
}
CLASSIC = {"group.protocol": "classic", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
STRATEGIES = {
    "eager": {},  # librdkafka's default range,roundrobin
    "cooperative": {"partition.assignment.strategy": "cooperative-sticky"},
}
CONSUMER = {"group.protocol": "consumer"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from conftest import BrokerFactory

    factory = BrokerFactory(tmp_path_factory.mktemp("mixed"))
    try:
        yield factory(settings=SETTINGS)
    finally:
        bad = factory.stop_all()
    assert not bad, "\n".join(bad)


class CommitWatcher(threading.Thread):
    """Samples the group's committed offsets (OffsetFetch, outside the group) until stopped;
    records any partition whose committed offset went backwards."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        self.partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        self.latest: dict[int, int] = {}
        self.backwards: list[str] = []
        self.stop_event = threading.Event()

    def sample(self) -> None:
        for item in self.consumer.committed(self.partitions, timeout=10):
            if item.offset < 0:
                continue
            before = self.latest.get(item.partition, -1)
            if item.offset < before:
                self.backwards.append(f"p{item.partition}: {before} -> {item.offset}")
            self.latest[item.partition] = max(before, item.offset)

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.sample()
            time.sleep(0.1)


def group_type(admin: AdminClient, group: str) -> str:
    listed = admin.list_consumer_groups().result(10)
    for item in listed.valid:
        if item.group_id == group:
            return str(item.type.name).lower()
    return "absent"


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_roll_members_classic_to_consumer_and_back(broker: Any, strategy: str) -> None:
    topic, group = f"mixed-roll-{strategy}", f"mixed-group-{strategy}"
    classic = {**CLASSIC, **STRATEGIES[strategy]}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    ledger = Ledger()
    producer = SteadyProducer(broker.bootstrap, topic, PARTITIONS)
    watcher = CommitWatcher(broker.bootstrap, topic, group)
    members: list[ConfluentMember] = []

    def start(name: str, settings: dict[str, Any]) -> None:
        member = ConfluentMember(name, ledger, broker.bootstrap, topic, {"group.id": group,
                                                                         **settings})
        member.start()
        members.append(member)

    def balanced() -> Callable[[], bool]:
        expected = {m.name for m in members}

        def check() -> bool:
            owned = ledger.snapshot()
            union = set().union(*owned.values()) if owned else set()
            return (
                set(owned) == expected
                and union == set(range(PARTITIONS))
                and sum(len(p) for p in owned.values()) == PARTITIONS
            )

        return check

    def roll(index: int, name: str, settings: dict[str, Any]) -> None:
        leaving = members[index]
        leaving.leave()
        members.remove(leaving)
        start(name, settings)
        members.insert(index, members.pop())
        wait_until(balanced(), 40, f"balanced after {leaving.name} -> {name}")

    producer.start()
    watcher.start()
    try:
        for index in range(3):
            start(f"classic-{index}", classic)
            wait_until(balanced(), 40, f"{index + 1} classic members balanced")
        assert group_type(admin, group) == "classic"
        for trip in range(ROUNDS):
            roll(0, f"consumer-{trip}-0", CONSUMER)
            assert group_type(admin, group) == "consumer"  # upgraded, two classic members in
            described = admin.describe_consumer_groups([group])[group].result(10)
            assert {m.client_id for m in described.members} == {m.name for m in members}
            for index in (1, 2):
                roll(index, f"consumer-{trip}-{index}", CONSUMER)
            for index in range(3):
                roll(index, f"classic-{trip}-again-{index}", classic)
            wait_until(lambda: group_type(admin, group) == "classic", 20, "downgraded")
        producer.stop_event.set()
        producer.join(30)
        wait_until(lambda: producer.acked <= ledger.processed, 40, "every message processed")
        end = sum(1 for _ in producer.acked)

        def committed_to_end() -> bool:
            watcher.sample()
            return sum(watcher.latest.values()) >= end

        wait_until(committed_to_end, 40, "offsets committed to the log end")
    finally:
        producer.stop_event.set()
        watcher.stop_event.set()
        for member in members:
            member.leave()
        watcher.join(15)
        watcher.consumer.close()
    assert ledger.violations == []
    assert watcher.backwards == []
    assert len(producer.acked) > 100


def test_a_mixed_group_survives_a_broker_sigkill(broker_factory: Any) -> None:
    """Two classic members and one consumer member in one (consumer) group; the broker is
    SIGKILLed and restarted on the same port: the replayed group keeps all three members
    (classic ones with their JoinGroup metadata and session timeouts) and goes on serving them
    without handing a partition to two members; nothing acknowledged is left unprocessed."""
    broker = broker_factory(settings=SETTINGS)
    topic, group = "mixed-restart", "mixed-restart-group"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    ledger = Ledger()
    producer = SteadyProducer(broker.bootstrap, topic, PARTITIONS)
    members = [
        ConfluentMember(name, ledger, broker.bootstrap, topic, {"group.id": group, **settings})
        for name, settings in (("classic-a", CLASSIC), ("classic-b", CLASSIC),
                               ("consumer-c", CONSUMER))
    ]

    def balanced() -> bool:
        owned = ledger.snapshot()
        return set(owned) == {m.name for m in members} and sorted(
            p for held in owned.values() for p in held
        ) == list(range(PARTITIONS))

    producer.start()
    try:
        for member in members:
            member.start()
            name = member.name
            wait_until(lambda: name in ledger.snapshot(), 40, f"{name} assigned")  # noqa: B023
        wait_until(balanced, 40, "mixed group balanced")
        assert group_type(admin, group) == "consumer"
        broker.kill()
        broker = broker_factory(broker.data_dir, settings=SETTINGS, listen=broker.bootstrap)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(15)
        assert {m.client_id for m in described.members} == {m.name for m in members}
        wait_until(balanced, 40, "balanced after the restart")
        producer.stop_event.set()
        producer.join(30)
        wait_until(lambda: producer.acked <= ledger.processed, 40, "every message processed")
    finally:
        producer.stop_event.set()
        for member in members:
            member.leave()
    assert ledger.violations == []
    assert len(producer.acked) > 50


def test_policy_disabled_refuses_a_consumer_member_into_a_classic_group(
    broker_factory: Any,
) -> None:
    """`group.consumer.migration.policy=disabled`: a ConsumerGroupHeartbeat into a live classic
    group answers GROUP_ID_NOT_FOUND (Kafka's answer) and the classic member is undisturbed."""
    from broker.raw import RawClient, request_module

    broker = broker_factory(settings={**SETTINGS, "group.consumer.migration.policy": "disabled"})
    topic, group = "mixed-disabled", "mixed-disabled-group"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    ledger = Ledger()
    member = ConfluentMember("classic-only", ledger, broker.bootstrap, topic,
                             {"group.id": group, **CLASSIC})
    member.start()
    try:
        wait_until(lambda: ledger.snapshot().get("classic-only") == {0, 1}, 40, "assigned")
        body = request_module(68, 1).ConsumerGroupHeartbeatRequest(
            group_id=group, member_id="Zm9vYmFyYmF6cXV4cXV1dw", member_epoch=0,
            instance_id=None, rack_id=None, rebalance_timeout=timedelta(seconds=30),
            subscribed_topic_names=(topic,), subscribed_topic_regex=None, server_assignor=None,
            topic_partitions=(),
        )
        with RawClient(broker.bootstrap) as client:
            answer = client.call(68, 1, body)
        assert answer.error_code == 69  # GROUP_ID_NOT_FOUND
        assert group_type(admin, group) == "classic"
        assert ledger.snapshot() == {"classic-only": {0, 1}}
    finally:
        member.leave()
    assert ledger.violations == []


def test_a_static_classic_member_restarts_inside_a_mixed_group_without_a_rebalance(
    broker: Any,
) -> None:
    """A classic member with `group.instance.id` in a consumer group closes (no LeaveGroup)
    and comes back: it gets the same partitions, the consumer member sees no rebalance."""
    topic, group = "mixed-static", "mixed-static-group"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(15)
    ledger = Ledger()
    static = {"group.id": group, **CLASSIC, "group.instance.id": "static-1"}
    consumer = ConfluentMember("consumer", ledger, broker.bootstrap, topic,
                               {"group.id": group, **CONSUMER})
    consumer.start()
    first = ConfluentMember("static-a", ledger, broker.bootstrap, topic, dict(static))
    try:
        wait_until(lambda: ledger.snapshot().get("consumer") == {0, 1, 2, 3}, 40, "consumer")
        first.start()
        wait_until(lambda: len(ledger.snapshot().get("static-a", ())) == 2, 40, "a 2/2 split")
        kept = ledger.snapshot()["static-a"]
        first.leave()
        events_before = len(ledger.events)
        again = ConfluentMember("static-b", ledger, broker.bootstrap, topic, dict(static))
        again.start()
        wait_until(lambda: ledger.snapshot().get("static-b") == kept, 40, "same partitions back")
        later = ledger.events[events_before:]
        assert not [e for e in later if e[1] == "consumer"], "the consumer member rebalanced"
        again.leave()
    finally:
        consumer.leave()
    assert ledger.violations == []


def test_a_static_member_rolled_to_consumer_and_back_keeps_its_partitions(broker: Any) -> None:
    """Static members (`group.instance.id`) rolled without LeaveGroup: a classic static member
    restarted with `group.protocol=consumer` upgrades the group and takes its own place (same
    partitions); restarted classic again (after leaving with epoch -2) it replaces the last
    consumer-protocol member, so the group downgrades at once. The other (classic) member
    never rebalances."""
    topic, group = "mixed-static-roll", "mixed-static-roll-group"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(15)
    ledger = Ledger()
    classic = ConfluentMember("classic", ledger, broker.bootstrap, topic,
                              {"group.id": group, **CLASSIC, "group.instance.id": "s-classic"})
    rolled = {"group.id": group, "group.instance.id": "s-rolled"}
    current = ConfluentMember("rolled-0", ledger, broker.bootstrap, topic, {**rolled, **CLASSIC})
    classic.start()
    try:
        wait_until(lambda: ledger.snapshot().get("classic") == {0, 1, 2, 3}, 40, "classic")
        current.start()
        wait_until(lambda: len(ledger.snapshot().get("rolled-0", ())) == 2, 40, "a 2/2 split")
        kept = ledger.snapshot()["rolled-0"]
        for step, (settings, kind) in enumerate(((CONSUMER, "consumer"), (CLASSIC, "classic"))):
            current.leave()
            events_before = len(ledger.events)
            name = f"rolled-{step + 1}"
            current = ConfluentMember(name, ledger, broker.bootstrap, topic,
                                      {**rolled, **settings})
            current.start()
            wait_until(lambda: ledger.snapshot().get(name) == kept, 40,  # noqa: B023
                       f"{name}: same partitions")
            assert group_type(admin, group) == kind
            later = ledger.events[events_before:]
            assert not [e for e in later if e[1] == "classic"], "the classic member rebalanced"
        current.leave()
    finally:
        classic.leave()
    assert ledger.violations == []
