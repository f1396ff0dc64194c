"""Group members of three real clients in threads, a steady producer, and an ownership ledger.

The ledger is fed only by the clients' own rebalance callbacks. It fails the test if a partition
is assigned to one member while another still holds it, and remembers each member's
revocations so cooperative protocols can be checked for never revoking a kept partition.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer


@dataclass
class Ledger:
    lock: threading.Lock = field(default_factory=threading.Lock)
    owned: dict[str, set[int]] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    events: list[tuple[str, str, frozenset[int]]] = field(default_factory=list)
    processed: set[bytes] = field(default_factory=set)

    def assign(self, member: str, partitions: set[int]) -> None:
        with self.lock:
            for other, held in self.owned.items():
                if other != member and held & partitions:
                    self.violations.append(
                        f"{member} got {sorted(held & partitions)} held by {other}"
                    )
            self.owned.setdefault(member, set()).update(partitions)
            self.events.append(("assign", member, frozenset(partitions)))

    def revoke(self, member: str, partitions: set[int]) -> None:
        with self.lock:
            self.owned.setdefault(member, set()).difference_update(partitions)
            self.events.append(("revoke", member, frozenset(partitions)))

    def release_all(self, member: str) -> None:
        """The member stopped consuming for good (some clients skip the callback on close)."""
        with self.lock:
            held = self.owned.pop(member, set())
            self.events.append(("revoke", member, frozenset(held)))

    def snapshot(self) -> dict[str, set[int]]:
        with self.lock:
            return {m: set(p) for m, p in self.owned.items() if p}

    def record(self, values: list[bytes]) -> None:
        with self.lock:
            self.processed.update(values)

    def kept_partitions_revoked(self) -> list[str]:
        """Cooperative rule: what a member revokes is not handed straight back to it."""
        problems = []
        for position, (kind, member, partitions) in enumerate(self.events):
            if kind != "revoke":
                continue
            for later_kind, later_member, later in self.events[position + 1 :]:
                if later_member == member and later_kind == "assign":
                    if later & partitions:
                        problems.append(
                            f"{member} revoked then got back {sorted(later & partitions)}"
                        )
                    break
        return problems


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


class SteadyProducer(threading.Thread):
    """Writes numbered messages round-robin over the partitions until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.partitions = topic, partitions
        self.acked: set[bytes] = set()
        self.stop_event = threading.Event()

    def _delivered(self, error: Any, message: Any) -> None:
        if error is None:
            self.acked.add(message.value())

    def run(self) -> None:
        number = 0
        while not self.stop_event.is_set():
            value = b"m-%d" % number
            self.producer.produce(
                self.topic, value, partition=number % self.partitions, on_delivery=self._delivered
            )
            number += 1
            self.producer.poll(0)
            time.sleep(0.002)
        self.producer.flush(15)


class Member(threading.Thread):
    """Base: a consumer thread that records what it processes and commits per poll batch."""

    def __init__(self, name: str, ledger: Ledger) -> None:
        super().__init__(daemon=True, name=name)
        self.ledger = ledger
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.consume()
        except BaseException as error:  # surfaced by the test via .error
            self.error = error

    def consume(self) -> None:
        raise AssertionError("subclasses consume")

    def leave(self, timeout_s: float = 30) -> None:
        self.stop_event.set()
        self.join(timeout_s)
        assert not self.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error


class ConfluentMember(Member):
    def __init__(
        self, name: str, ledger: Ledger, bootstrap: str, topic: str, settings: dict[str, Any]
    ) -> None:
        super().__init__(name, ledger)
        self.topic = topic
        self.config = {
            "bootstrap.servers": bootstrap,
            "group.id": settings.pop("group.id"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "client.id": name,
            **settings,
        }
        self.incremental = self.config.get("group.protocol") == "consumer" or (
            self.config.get("partition.assignment.strategy") == "cooperative-sticky"
        )

    def consume(self) -> None:
        consumer = Consumer(self.config)

        def on_assign(c: Any, partitions: list[Any]) -> None:
            self.ledger.assign(self.name, {p.partition for p in partitions})
            if self.incremental:
                c.incremental_assign(partitions)
            else:
                c.assign(partitions)

        def on_revoke(c: Any, partitions: list[Any]) -> None:
            self.ledger.revoke(self.name, {p.partition for p in partitions})
            if self.incremental:
                c.incremental_unassign(partitions)
            else:
                c.unassign()

        consumer.subscribe(
            [self.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke
        )
        try:
            while not self.stop_event.is_set():
                messages = consumer.consume(200, 0.1)
                values = [m.value() for m in messages if m.error() is None]
                if values:
                    self.ledger.record(values)
                    try:
                        consumer.commit(asynchronous=False)
                    except KafkaException:
                        pass  # fenced by a rebalance: the next owner re-reads these
        finally:
            self.ledger.release_all(self.name)
            consumer.close()


class KafkaPythonMember(Member):
    def __init__(self, name: str, ledger: Ledger, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(name, ledger)
        self.bootstrap, self.topic, self.group = bootstrap, topic, group

    def consume(self) -> None:
        from kafka import KafkaConsumer
        from kafka.consumer.subscription_state import ConsumerRebalanceListener
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.errors import KafkaError as KafkaPythonError

        ledger, name = self.ledger, self.name

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                ledger.revoke(name, {p.partition for p in revoked})

            def on_partitions_assigned(self, assigned: Any) -> None:
                ledger.assign(name, {p.partition for p in assigned})

        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=name,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            partition_assignment_strategy=[CooperativeStickyAssignor],
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
        consumer.subscribe([self.topic], listener=Listener())
        try:
            while not self.stop_event.is_set():
                batches = consumer.poll(timeout_ms=100)
                values = [r.value for records in batches.values() for r in records]
                if values:
                    self.ledger.record(values)
                    try:
                        consumer.commit()
                    except KafkaPythonError:  # CommitFailedError during a rebalance
                        pass
        finally:
            self.ledger.release_all(self.name)
            consumer.close()


class AiokafkaMember(Member):
    def __init__(self, name: str, ledger: Ledger, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(name, ledger)
        self.bootstrap, self.topic, self.group = bootstrap, topic, group

    def consume(self) -> None:
        asyncio.run(self._consume())

    async def _consume(self) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
        from aiokafka.errors import CommitFailedError, KafkaError

        ledger, name = self.ledger, self.name

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                ledger.revoke(name, {p.partition for p in revoked})

            async def on_partitions_assigned(self, assigned: Any) -> None:
                ledger.assign(name, {p.partition for p in assigned})

        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=name,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
        consumer.subscribe([self.topic], listener=Listener())
        await consumer.start()
        try:
            while not self.stop_event.is_set():
                batches = await consumer.getmany(timeout_ms=100)
                values = [r.value for records in batches.values() for r in records]
                if values:
                    self.ledger.record(values)
                    try:
                        await consumer.commit()
                    except (CommitFailedError, KafkaError):
                        pass
        finally:
            self.ledger.release_all(self.name)
            await consumer.stop()
