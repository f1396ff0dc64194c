"""Three members on a 12-partition topic while a producer writes, joining and leaving one at a
time, with every client and protocol the issue names. Checked from the clients' callbacks."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from .members import (
    AiokafkaMember,
    ConfluentMember,
    KafkaPythonMember,
    Ledger,
    Member,
    SteadyProducer,
    wait_until,
)

PARTITIONS = 12
GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
    "offsets.topic.num.partitions": "3",  # groups spread over several coordinator shards
}
_topics = itertools.count()


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from conftest import BrokerFactory

    factory = BrokerFactory(tmp_path_factory.mktemp("groups"))
    try:
        yield factory(settings=GROUP_SETTINGS)
    finally:
        bad = factory.stop_all()
    assert not bad, "\n".join(bad)


def _confluent(settings: dict[str, Any]) -> Callable[[str, Ledger, str, str, str], Member]:
    def make(name: str, ledger: Ledger, bootstrap: str, topic: str, group: str) -> Member:
        return ConfluentMember(name, ledger, bootstrap, topic, {"group.id": group, **settings})

    return make


CLASSIC = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
VARIANTS: dict[str, tuple[Callable[[str, Ledger, str, str, str], Member], bool]] = {
    "confluent-range": (_confluent({**CLASSIC, "partition.assignment.strategy": "range"}), False),
    "confluent-roundrobin": (
        _confluent({**CLASSIC, "partition.assignment.strategy": "roundrobin"}),
        False,
    ),
    "confluent-cooperative-sticky": (
        _confluent({**CLASSIC, "partition.assignment.strategy": "cooperative-sticky"}),
        True,
    ),
    "confluent-consumer-protocol": (_confluent({"group.protocol": "consumer"}), True),
    "kafka-python-cooperative-sticky": (KafkaPythonMember, True),
    "aiokafka-range": (AiokafkaMember, False),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_members_join_and_leave_while_producing(group_broker: Any, variant: str) -> None:
    make, cooperative = VARIANTS[variant]
    topic = f"rebalance-{next(_topics)}"
    group = f"group-{variant}"
    admin = AdminClient({"bootstrap.servers": group_broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    ledger = Ledger()
    producer = SteadyProducer(group_broker.bootstrap, topic, PARTITIONS)
    producer.start()
    members: list[Member] = []

    def balanced(expected: set[str]) -> Callable[[], bool]:
        def check() -> bool:
            owned = ledger.snapshot()
            union = set().union(*owned.values()) if owned else set()
            return (
                set(owned) == expected
                and union == set(range(PARTITIONS))
                and sum(len(p) for p in owned.values()) == PARTITIONS
            )

        return check

    try:
        for index in range(3):
            member = make(f"{variant}-{index}", ledger, group_broker.bootstrap, topic, group)
            member.start()
            members.append(member)
            wait_until(balanced({m.name for m in members}), 40, f"{len(members)} members balanced")
        for leaving in list(members[:2]):
            leaving.leave()
            members.remove(leaving)
            wait_until(
                balanced({m.name for m in members}), 40, f"rebalance after {leaving.name} left"
            )
        producer.stop_event.set()
        producer.join(30)
        wait_until(lambda: producer.acked <= ledger.processed, 40, "every message processed")
    finally:
        producer.stop_event.set()
        for member in members:
            member.leave()
    assert ledger.violations == []
    assert len(producer.acked) > 100
    if cooperative:
        assert ledger.kept_partitions_revoked() == []
