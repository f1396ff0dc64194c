"""Partition reassignment in a 4-broker cluster (real ZooKeeper, real `tidelog serve`).

A partition is moved from {1,2,3} to {2,3,4} while an idempotent acks=all producer and a
consumer run: the consumer sees every record once, in order; every new replica holds the
leader's records at the same offsets; broker 1's log is deleted; broker 2 leads.
`TIDELOG_REASSIGN_RECORDS` (default 100,000) sets the preloaded record count (1,000,000 for
the issue's full run; docs/benchmarks.md "Partition reassignment").
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient

from tidelog.cluster.zookeeper_server import ZooKeeperServer

from .harness import Cluster, replica_log

RECORDS = int(os.environ.get("TIDELOG_REASSIGN_RECORDS", "100000"))
VALUE_PAD = b"x" * 80


@pytest.fixture(scope="module")
def cluster4(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Cluster]:
    """Four brokers (ids 1-4) in a fresh chroot, shared by this module's tests."""
    chroot = f"/tidelog-reassign-{uuid.uuid4().hex[:12]}"
    cluster = Cluster(zookeeper.connect_string + chroot, tmp_path_factory.mktemp("reassign"))
    try:
        for node_id in (1, 2, 3, 4):
            cluster.add(node_id)
            cluster.start(node_id)
        yield cluster
    finally:
        cluster.stop_all()


def _admin(cluster: Cluster) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap(), request_timeout_ms=30000)


def _move(cluster: Cluster, admin: KafkaAdminClient, topic: str, target: list[int],
          timeout_s: float = 60.0) -> None:
    """Reassign partition 0 and wait for Metadata to show it done (target, leader in it)."""
    tp = TopicPartition(topic, 0)
    # The broker kafka-python asks (the controller) may not have seen a new topic yet
    # (UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers); the same request again is harmless.
    cluster.wait_value(lambda: admin.alter_partition_reassignments({tp: target}),
                       lambda r: r == {tp: None}, what=f"reassignment of {tp} accepted")
    cluster.wait_for_partition(
        topic, lambda v: v[1] == target and sorted(v[2]) == sorted(target),
        timeout_s=timeout_s, what=f"{topic} on {target}",
    )
    cluster.wait_value(lambda: admin.list_partition_reassignments([tp]), lambda r: r == {},
                       what="no reassignment listed")


def _value(i: int) -> bytes:
    return b"%d:" % i + VALUE_PAD


def _preload(cluster: Cluster, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                         "enable.idempotence": True, "linger.ms": 20})
    failures: list[object] = []

    def delivered(error: object, message: object) -> None:
        if error is not None:
            failures.append(error)

    for i in range(count):
        while True:
            try:
                producer.produce(topic, _value(i), partition=0, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    assert failures == []


class Load:
    """An idempotent acks=all producer continuing the sequence, and a consumer reading it
    all from offset 0, both on their own threads until `stop`."""

    def __init__(self, cluster: Cluster, topic: str, first: int) -> None:
        self.cluster, self.topic, self.next = cluster, topic, first
        self.failures: list[object] = []
        self.consumed: list[tuple[int, int]] = []  # (offset, sequence number)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._produce, daemon=True),
                         threading.Thread(target=self._consume, daemon=True)]
        for thread in self._threads:
            thread.start()

    def _produce(self) -> None:
        producer = Producer({"bootstrap.servers": self.cluster.bootstrap(), "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5})

        def delivered(error: object, message: object) -> None:
            if error is not None:
                self.failures.append(error)

        while not self._stop.is_set():
            for _ in range(100):
                producer.produce(self.topic, _value(self.next), partition=0,
                                 on_delivery=delivered)
                self.next += 1
            producer.poll(0.02)
        assert producer.flush(60) == 0

    def _consume(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.cluster.bootstrap(),
                             "group.id": f"reassign-{uuid.uuid4().hex[:8]}",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        consumer.assign([CTopicPartition(self.topic, 0, 0)])
        while not self._stop.is_set() or len(self.consumed) < self.next:
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            value = message.value() or b""
            self.consumed.append((message.offset(), int(value.split(b":", 1)[0])))
        consumer.close()

    def stop(self, timeout_s: float = 60.0) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout_s)
            assert not thread.is_alive()


def _same_replicas(cluster: Cluster, topic: str, replicas: list[int]) -> dict[int, bytes]:
    """The replicas' records once they all hold the same offsets and values."""
    def read() -> list[dict[int, bytes]]:
        return [replica_log(cluster.brokers[b].data_dir, topic) for b in replicas]

    logs = cluster.wait_value(read, lambda ls: all(log == ls[0] for log in ls[1:]),
                              timeout_s=60, what=f"identical logs on {replicas}")
    return logs[0]


def test_reassignment_under_load(cluster4: Cluster) -> None:
    topic = "moving"
    cluster4.create_topic(topic, configs={"min.insync.replicas": "2"})
    admin = _admin(cluster4)
    try:
        # Pin the replicas to {1,2,3} led by 1 (placement is random): through {1} alone.
        phases = [("start", time.monotonic())]
        _move(cluster4, admin, topic, [1])
        phases.append(("to {1}", time.monotonic()))
        _move(cluster4, admin, topic, [1, 2, 3])
        cluster4.wait_for_partition(topic, lambda v: v[0] == 1, what="leader 1")
        phases.append(("to {1,2,3}", time.monotonic()))
        _preload(cluster4, topic, RECORDS)
        phases.append(("preload", time.monotonic()))
        load = Load(cluster4, topic, RECORDS)
        started = time.monotonic()
        _move(cluster4, admin, topic, [2, 3, 4], timeout_s=120)
        moved_s = time.monotonic() - started
        phases.append(("move", time.monotonic()))
        load.stop()
        phases.append(("load stopped", time.monotonic()))
    finally:
        admin.close()
    assert load.failures == []
    sequence = [n for _, n in load.consumed]
    assert sequence == list(range(load.next)), "gap, duplicate or reordering seen by the consumer"
    assert [o for o, _ in load.consumed] == list(range(load.next))
    leader, replicas, isr = cluster4.partition_state(topic)
    assert (leader, replicas, sorted(isr)) == (2, [2, 3, 4], [2, 3, 4])
    phases.append(("consumer checked", time.monotonic()))
    records = _same_replicas(cluster4, topic, [2, 3, 4])
    phases.append(("replicas compared", time.monotonic()))
    assert len(records) == load.next and records[0] == _value(0)
    cluster4.wait_for(lambda: not replica_log(cluster4.brokers[1].data_dir, topic),
                      what="broker 1's log deleted")
    phases.append(("checks", time.monotonic()))
    print(f"\nmoved {RECORDS} preloaded + {load.next - RECORDS} live records in {moved_s:.1f} s; "
          + ", ".join(f"{name} {t - phases[i][1]:.1f} s" for i, (name, t) in enumerate(phases[1:])))


def test_cancel_and_errors(cluster4: Cluster) -> None:
    """Kafka's per-partition errors; a cancellation goes back to the original replicas."""
    from kafka.errors import (
        InvalidReplicationAssignmentError,
        NoReassignmentInProgressError,
        UnknownTopicOrPartitionError,
    )

    topic = "errors"
    cluster4.create_topic(topic, configs={})
    # DescribeCluster lists every live broker (Kafka's tool checks a plan's brokers with it).
    describer = cluster4.admin()  # must outlive its future
    described = describer.describe_cluster(request_timeout=15).result(timeout=20)
    assert sorted(node.id for node in described.nodes) == [1, 2, 3, 4]
    assert described.controller is not None and described.controller.id in (1, 2, 3, 4)
    admin = _admin(cluster4)
    try:
        tp = TopicPartition(topic, 0)
        _, replicas, _ = cluster4.wait_for_partition(topic, lambda v: len(v[2]) == 3)
        assert admin.alter_partition_reassignments({tp: None}) == {
            tp: NoReassignmentInProgressError}
        assert admin.alter_partition_reassignments({tp: [1, 1, 2]}) == {
            tp: InvalidReplicationAssignmentError}
        assert admin.alter_partition_reassignments({tp: [1, 9]}) == {
            tp: InvalidReplicationAssignmentError}
        unknown = TopicPartition(topic, 7)
        assert admin.alter_partition_reassignments({unknown: [1]}) == {
            unknown: UnknownTopicOrPartitionError}
        assert admin.list_partition_reassignments() == {}
        assert replicas == cluster4.partition_state(topic)[1]
    finally:
        admin.close()
    # Throttle configs: a rate is a long >= 0, a replica list `partition:broker` pairs or *.
    from confluent_kafka import KafkaException

    for apply in (lambda: _alter_broker_config(cluster4, 2, "leader.replication.throttled.rate",
                                               "-5"),
                  lambda: _alter_topic_config(cluster4, topic, {
                      "leader.replication.throttled.replicas": "0-1"})):
        with pytest.raises(KafkaException) as refused:
            apply()
        assert refused.value.args[0].name() == "INVALID_CONFIG"




THROTTLE_RATE = int(os.environ.get("TIDELOG_REASSIGN_THROTTLE_RATE", "1000000"))  # bytes/s
THROTTLED_RECORDS = int(os.environ.get("TIDELOG_REASSIGN_THROTTLED_RECORDS", "40000"))


def _log_bytes(cluster: Cluster, broker: int, topic: str) -> int:
    directory = cluster.brokers[broker].data_dir / f"{topic}-0"
    return sum(p.stat().st_size for p in directory.glob("*.log"))


def _alter_broker_config(cluster: Cluster, broker: int, name: str, value: str) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    admin = cluster.admin()
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker), incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=20)


def _alter_topic_config(cluster: Cluster, topic: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    admin = cluster.admin()
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=20)


def _measure_move(cluster: Cluster, admin: KafkaAdminClient, topic: str, origin: list[int],
                  target: list[int], new: int, total: int) -> float:
    """Start the move and sample the new replica's log size until it holds `total` bytes;
    the rate between 10% and 90% of them (the first fetch is not paced)."""
    tp = TopicPartition(topic, 0)
    assert admin.alter_partition_reassignments({tp: target}) == {tp: None}
    removed = [b for b in origin if b not in target]
    listed = admin.list_partition_reassignments()
    assert listed == {tp: {"replicas": [*target, *removed], "adding_replicas": [new],
                           "removing_replicas": removed}}
    samples: list[tuple[float, int]] = []
    deadline = time.monotonic() + 4 * total / THROTTLE_RATE + 30
    while time.monotonic() < deadline:
        size = _log_bytes(cluster, new, topic)
        samples.append((time.monotonic(), size))
        if size >= total:
            break
        time.sleep(0.1)
    assert samples[-1][1] >= total, f"replica {new} did not catch up: {samples[-1]}"
    cluster.wait_for_partition(topic, lambda v: v[1] == target, timeout_s=30,
                               what=f"moved to {target}")
    low = next(s for s in samples if s[1] >= total * 0.1)
    high = next(s for s in samples if s[1] >= total * 0.9)
    return (high[1] - low[1]) / (high[0] - low[0])


@pytest.mark.parametrize("side", ["follower", "leader"])
def test_throttled_reassignment_holds_the_rate(cluster4: Cluster, side: str) -> None:
    """Kafka's recipe (kafka-reassign-partitions.sh --throttle): the moving replica is
    throttled on the broker it moves to (follower side) or on the leader it copies from."""
    topic = f"throttled-{side}"
    cluster4.create_topic(topic)
    leader, origin, _ = cluster4.wait_for_partition(topic, lambda v: len(v[2]) == 3,
                                                    what="ISR 3")
    new = next(b for b in cluster4.brokers if b not in origin)
    # The leader stays (it is kept when it is a target replica): its throttle holds throughout.
    target = [*[b for b in origin if b != origin[-1] or b == leader][:2], new]
    _preload(cluster4, topic, THROTTLED_RECORDS)
    total = cluster4.wait_value(lambda: _log_bytes(cluster4, leader, topic),
                                lambda n: n > 0, what="leader log size")
    throttled_broker = new if side == "follower" else leader
    _alter_broker_config(cluster4, throttled_broker, f"{side}.replication.throttled.rate",
                         str(THROTTLE_RATE))
    _alter_topic_config(cluster4, topic, {
        "follower.replication.throttled.replicas": f"0:{new}",
        "leader.replication.throttled.replicas": ",".join(f"0:{b}" for b in origin),
    })
    # Stored as Kafka's ZooKeeper mode stores dynamic broker configs.
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=cluster4.zookeeper)
    zk.start(timeout=15)
    try:
        data, _ = zk.get(f"/config/brokers/{throttled_broker}")
    finally:
        zk.stop()
        zk.close()
    stored = json.loads(data)
    assert stored["version"] == 1
    assert stored["config"][f"{side}.replication.throttled.rate"] == str(THROTTLE_RATE)
    admin = _admin(cluster4)
    try:
        rate = _measure_move(cluster4, admin, topic, origin, target, new, total)
    finally:
        admin.close()
        _alter_broker_config(cluster4, throttled_broker, f"{side}.replication.throttled.rate",
                             str(2**62))  # unthrottled again for the module's other tests
    print(f"\n{side}-throttled move: {total} bytes, {rate:,.0f} B/s at a setting of "
          f"{THROTTLE_RATE:,} B/s ({rate / THROTTLE_RATE - 1:+.1%})")
    assert abs(rate / THROTTLE_RATE - 1) <= 0.2, rate


def test_cancelling_a_move_in_flight_restores_the_replicas(cluster4: Cluster) -> None:
    """A move crawling at 10 kB/s is still in flight when it is cancelled: the partition goes
    back to its replicas and the added one deletes what it had copied."""
    topic = "cancelled"
    cluster4.create_topic(topic)
    _, origin, _ = cluster4.wait_for_partition(topic, lambda v: len(v[2]) == 3, what="ISR 3")
    _preload(cluster4, topic, 5000)
    new = next(b for b in cluster4.brokers if b not in origin)
    _alter_broker_config(cluster4, new, "follower.replication.throttled.rate", "10000")
    _alter_topic_config(cluster4, topic, {"follower.replication.throttled.replicas": f"0:{new}"})
    admin = _admin(cluster4)
    tp = TopicPartition(topic, 0)
    try:
        target = [new, *origin[:2]]
        assert admin.alter_partition_reassignments({tp: target}) == {tp: None}
        assert admin.list_partition_reassignments([tp])[tp]["adding_replicas"] == [new]
        cluster4.wait_for(lambda: _log_bytes(cluster4, new, topic) > 0,
                          what=f"broker {new} copying")
        assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
        # Kafka's originReplicas: the full list without the added replicas, in its order.
        back = [b for b in [*target, *origin] if b != new]
        back = list(dict.fromkeys(back))
        cluster4.wait_for_partition(topic, lambda v: v[1] == back, what="cancelled")
        assert admin.list_partition_reassignments() == {}
        cluster4.wait_for(lambda: _log_bytes(cluster4, new, topic) == 0,
                          what=f"broker {new}'s partial copy deleted")
    finally:
        admin.close()
        _alter_broker_config(cluster4, new, "follower.replication.throttled.rate", str(2**62))


def test_cli_plans_executes_and_verifies(cluster4: Cluster, tmp_path: Path) -> None:
    """`tidelog topics reassign`, Kafka's JSON plan format, with a throttle cleared by
    --verify once the move is done."""
    from click.testing import CliRunner

    from tidelog.cli.main import main

    topic = "cli-moved"
    cluster4.create_topic(topic)
    cluster4.wait_for_partition(topic, lambda v: len(v[2]) == 3, what="ISR 3")
    runner = CliRunner()
    bootstrap = ["--bootstrap", cluster4.bootstrap()]
    planned = runner.invoke(main, ["topics", "reassign", "--plan", "--topics", topic,
                                   "--brokers", "2,3,4", *bootstrap])
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.stdout.strip().splitlines()[-1])
    assert plan == {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2, 3, 4], "log_dirs": ["any"] * 3}]}
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    executed = runner.invoke(main, ["topics", "reassign", "--execute", "--file", str(plan_file),
                                    "--throttle", "50000000", *bootstrap])
    assert executed.exit_code == 0, executed.output
    assert f"Successfully started partition reassignments for {topic}-0" in executed.output

    def verify() -> str:
        result = runner.invoke(main, ["topics", "reassign", "--verify", "--file",
                                      str(plan_file), *bootstrap])
        return result.output if result.exit_code == 0 else ""

    output = cluster4.wait_value(verify, bool, what="--verify reporting completion")
    assert f"Reassignment of partition {topic}-0 is completed." in output
    assert "Clearing broker-level and topic-level throttles." in output
    assert cluster4.partition_state(topic)[1] == [2, 3, 4]


def test_kafkas_reassign_partitions_tool(cluster4: Cluster, tmp_path: Path) -> None:
    """Kafka 4.3.1's kafka-reassign-partitions.sh --execute with --throttle, then --verify
    until it reports completion and clears the throttles."""
    import kafka_peer

    topic = "kafka-tool-moved"
    cluster4.create_topic(topic)
    _, origin, _ = cluster4.wait_for_partition(topic, lambda v: len(v[2]) == 3, what="ISR 3")
    target = [b for b in (4, 3, 2, 1) if b != origin[0]][:3]
    plan = tmp_path / "kafka-plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": target}]}))
    common = ["--bootstrap-server", cluster4.bootstrap(), "--reassignment-json-file", str(plan)]
    executed = kafka_peer.run_tool("kafka-reassign-partitions", *common, "--execute",
                                   "--throttle", "50000000").stdout
    assert "Successfully started partition reassignment" in executed, executed

    def verify() -> str:
        out = kafka_peer.run_tool("kafka-reassign-partitions", *common, "--verify").stdout
        return out if "is completed" in out else ""

    verified = cluster4.wait_value(verify, bool, timeout_s=60, what="--verify completion")
    assert f"Reassignment of partition {topic}-0 is completed." in verified, verified
    assert "Clearing broker-level throttles" in verified, verified
    assert cluster4.partition_state(topic)[1] == target
