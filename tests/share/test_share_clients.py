"""Share groups with real share consumers (confluent-kafka's ShareConsumer, librdkafka 2.16),
each in its own process: spreading, exactly-once acceptance, redelivery after a SIGKILL,
release and reject, and hostile raw ShareFetch/ShareAcknowledge requests."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.metrics_probe import metrics_args
from broker.raw import RawClient, request_module
from conftest import BrokerFactory, BrokerProcess
from tidelog.errors import ErrorCode
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.codec import request_schema
from tidelog.protocol.versions import SUPPORTED_VERSIONS

from .helpers import (
    SHARE_SETTINGS,
    Child,
    create_topic,
    produce,
    pump_all,
    set_group_configs,
    wait_for,
)


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    factory = BrokerFactory(tmp_path_factory.mktemp("share"))
    arguments, port = metrics_args()
    try:
        broker = factory(settings=SHARE_SETTINGS, extra_args=arguments)
        broker.metrics_port = port  # type: ignore[attr-defined]
        yield broker
    finally:
        bad = factory.stop_all()
    if bad:
        pytest.fail("broker logged a traceback:\n" + "\n".join(bad))


@pytest.fixture
def children() -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        child.kill()


def test_consumers_share_partitions_and_accept_every_record_once(
    share_broker: BrokerProcess, children: list[Child]
) -> None:
    bootstrap = share_broker.bootstrap
    create_topic(bootstrap, "spread", 2)
    set_group_configs(bootstrap, "g-spread", share_auto_offset_reset="earliest")
    # Three members on two partitions: the simple assignor puts two on one partition.
    children += [Child(bootstrap, "g-spread", "spread", "accept", max_poll=5, delay_ms=100)
                 for _ in range(3)]
    wait_for(lambda: (pump_all(children), all(c.ready for c in children))[1], "children ready")
    produced: list[str] = []
    deadline = time.monotonic() + 40
    # Records arrive while the consumers work, until each consumer has some (and 200 exist).
    while len(produced) < 200 or not all(c.records for c in children):
        assert time.monotonic() < deadline, [len(c.records) for c in children]
        produced += produce(bootstrap, "spread", 10, 2)
        pump_all(children, 0.05)
    wait_for(lambda: (pump_all(children),
                      sum(len(c.records) for c in children) >= len(produced))[1],
             "every record received")
    for child in children:
        child.stop()
    received = [(r["p"], r["o"]) for c in children for r in c.records]
    assert len(received) == len(set(received)) == len(produced)  # each exactly once
    assert all(r["d"] == 1 and r["a"] for c in children for r in c.records)


def test_killed_consumer_records_are_redelivered_after_the_lock(
    share_broker: BrokerProcess, children: list[Child]
) -> None:
    bootstrap = share_broker.bootstrap
    create_topic(bootstrap, "kill", 1)
    set_group_configs(bootstrap, "g-kill", share_auto_offset_reset="earliest",
                      share_record_lock_duration_ms="1000")
    produce(bootstrap, "kill", 20, 1)
    holder = Child(bootstrap, "g-kill", "kill", "hold")
    children.append(holder)
    wait_for(lambda: bool(holder.pump()), "the holder's records")
    held = {r["o"] for r in holder.records}
    holder.kill()  # SIGKILL: its locks expire after 1 s, its membership after 6 s
    taker = Child(bootstrap, "g-kill", "kill", "accept")
    children.append(taker)
    wait_for(lambda: held <= {r["o"] for r in taker.pump()}, "redelivery to another member")
    redelivered = [r for r in taker.records if r["o"] in held]
    assert {r["d"] for r in redelivered} == {2}  # the delivery count went up
    assert all(r["a"] for r in taker.records)


def test_release_redelivers_until_the_limit_and_reject_archives(
    share_broker: BrokerProcess, children: list[Child]
) -> None:
    bootstrap = share_broker.bootstrap
    for mode in ("release", "reject"):
        topic, group = f"t-{mode}", f"g-{mode}"
        create_topic(bootstrap, topic, 1)
        set_group_configs(bootstrap, group, share_auto_offset_reset="earliest",
                          share_delivery_count_limit="3")
        produce(bootstrap, topic, 10, 1)
        worker = Child(bootstrap, group, topic, mode)
        children.append(worker)
        rounds = 3 if mode == "release" else 1  # released: delivered 1, 2, 3 times
        wait_for(lambda w=worker, n=rounds: len(w.pump()) >= 10 * n, f"{mode} deliveries")
        worker.stop()
        counts = sorted((r["o"], r["d"]) for r in worker.records)
        assert counts == sorted((o, d) for o in range(10) for d in range(1, rounds + 1))
        # Released past the limit or rejected: archived, never delivered again. Records are
        # acquired lowest offset first, so a new member's first record is the next one.
        produce(bootstrap, topic, 1, 1)
        after = Child(bootstrap, group, topic, "accept")
        children.append(after)
        wait_for(lambda a=after: bool(a.pump()), f"the record after the {mode}ed ones")
        after.stop()
        assert [(r["o"], r["d"]) for r in after.records] == [(10, 1)]
    # Share metrics at scrape time (the broker's /metrics).
    port = share_broker.metrics_port  # type: ignore[attr-defined]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    labels = '{group="g-release",partition="0",topic="t-release"}'
    assert f"tidelog_share_released_total{labels} 30.0" in text
    assert f"tidelog_share_redeliveries_total{labels} 20.0" in text
    assert f"tidelog_share_archived_total{labels} 10.0" in text
    assert f"tidelog_share_start_offset{labels} 11.0" in text
    labels = '{group="g-reject",partition="0",topic="t-reject"}'
    assert f"tidelog_share_rejected_total{labels} 10.0" in text


# ------------------------------------------------------------------ hostile raw requests
def _topic_id(client: RawClient, name: str) -> uuid.UUID:
    module = request_module(ApiKey.METADATA, 12)
    metadata = client.call(ApiKey.METADATA, 12, module.MetadataRequest(
        topics=(module.MetadataRequestTopic(name=name, topic_id=None),),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    return metadata.topics[0].topic_id  # type: ignore[no-any-return]


def _heartbeat(client: RawClient, group: str, member: str, topic: str) -> int:
    """Join; returns the member epoch."""
    module = request_module(ApiKey.SHARE_GROUP_HEARTBEAT, 1)
    answer = client.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, module.ShareGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, subscribed_topic_names=(topic,)))
    assert answer.error_code == 0
    return int(answer.member_epoch)


@contextlib.contextmanager
def _kept_alive(bootstrap: str, group: str, member: str, epoch: int) -> Iterator[None]:
    """Heartbeat the member every second (its own connection) while the body runs: on a
    loaded machine a CLI process may take longer to start than the session timeout."""
    stop = threading.Event()
    module = request_module(ApiKey.SHARE_GROUP_HEARTBEAT, 1)

    def beat() -> None:
        with RawClient(bootstrap) as client:
            while not stop.wait(1.0):
                client.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, module.ShareGroupHeartbeatRequest(
                    group_id=group, member_id=member, member_epoch=epoch))

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)


def _fetch(client: RawClient, group: str, member: str, epoch: int, topic_id: uuid.UUID,
           acks: tuple[tuple[int, int, tuple[int, ...]], ...] = (),
           max_wait_ms: int = 500) -> Any:
    module = request_module(ApiKey.SHARE_FETCH, 1)
    batches = tuple(module.AcknowledgementBatch(first_offset=f, last_offset=last,
                                                acknowledge_types=types)
                    for f, last, types in acks)
    return client.call(ApiKey.SHARE_FETCH, 1, module.ShareFetchRequest(
        group_id=group, member_id=member, share_session_epoch=epoch,
        max_wait=timedelta(milliseconds=max_wait_ms), min_bytes=1, max_records=100, batch_size=100,
        forgotten_topics_data=(),
        topics=(module.FetchTopic(topic_id=topic_id, partitions=(
            module.FetchPartition(partition_index=0, acknowledgement_batches=batches),)),)))


def _acknowledge(client: RawClient, group: str, member: str, epoch: int,
                 topic_id: uuid.UUID, acks: tuple[tuple[int, int, tuple[int, ...]], ...],
                 version: int = 1) -> int:
    module = request_module(ApiKey.SHARE_ACKNOWLEDGE, version)
    answer = client.call(ApiKey.SHARE_ACKNOWLEDGE, version, module.ShareAcknowledgeRequest(
        group_id=group, member_id=member, share_session_epoch=epoch,
        topics=(module.AcknowledgeTopic(topic_id=topic_id, partitions=(
            module.AcknowledgePartition(partition_index=0, acknowledgement_batches=tuple(
                module.AcknowledgementBatch(first_offset=f, last_offset=last,
                                            acknowledge_types=types)
                for f, last, types in acks)),)),)))
    if answer.error_code != 0:
        return int(answer.error_code)
    return int(answer.responses[0].partitions[0].error_code)


def test_hostile_share_requests_get_kafka_errors_and_change_nothing(
    share_broker: BrokerProcess,
) -> None:
    bootstrap = share_broker.bootstrap
    create_topic(bootstrap, "hostile", 1)
    set_group_configs(bootstrap, "g-hostile", share_auto_offset_reset="earliest")
    produce(bootstrap, "hostile", 10, 1)
    with RawClient(bootstrap) as client:
        topic_id = _topic_id(client, "hostile")
        _heartbeat(client, "g-hostile", "m1", "hostile")
        _heartbeat(client, "g-hostile", "m2", "hostile")
        first = _fetch(client, "g-hostile", "m1", 0, topic_id)
        acquired = first.responses[0].partitions[0].acquired_records
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in acquired] == [
            (0, 9, 1)]
        empty = _fetch(client, "g-hostile", "m2", 0, topic_id)  # m1 holds them all
        assert not empty.responses[0].partitions[0].acquired_records
        # Session errors are request-level.
        assert _fetch(client, "g-hostile", "m1", 7, topic_id).error_code == (
            ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        assert _fetch(client, "g-hostile", "nobody", 1, topic_id).error_code == (
            ErrorCode.SHARE_SESSION_NOT_FOUND)
        assert _fetch(client, "g-hostile", "m1", 0, topic_id,  # acks on an initial epoch
                      ((0, 0, (1,)),)).error_code == ErrorCode.INVALID_REQUEST
        assert _acknowledge(client, "g-hostile", "m1", 0, topic_id, ((0, 0, (1,)),)) == (
            ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        # m1's session epoch is 1 now (the epoch-0 fetch above with acks was refused).
        epoch = 1
        for acks, error in (
            (((50, 60, (1,)),), ErrorCode.INVALID_REQUEST),  # never acquired: not in flight
            (((0, 3, (1,)), (3, 5, (1,))), ErrorCode.INVALID_REQUEST),  # overlapping
            (((0, 10**12, (1,)),), ErrorCode.INVALID_REQUEST),  # huge range
            (((0, 3, (1, 1)),), ErrorCode.INVALID_REQUEST),  # types do not match the range
            (((0, 0, (9,)),), ErrorCode.INVALID_REQUEST),  # unknown type
            (((5, 12, (1,)),), ErrorCode.INVALID_REQUEST),  # runs past what was acquired
        ):
            assert _acknowledge(client, "g-hostile", "m1", epoch, topic_id, acks) == error
            epoch += 1
        # Another member acknowledging m1's records.
        assert _acknowledge(client, "g-hostile", "m2", 1, topic_id, ((0, 9, (1,)),)) == (
            ErrorCode.INVALID_RECORD_STATE)
        # Nothing changed: m1 still holds all ten and accepts them in one go.
        assert _acknowledge(client, "g-hostile", "m1", epoch, topic_id, ((0, 9, (1,)),)) == 0
        # Done already (below the share-partition start offset): skipped, as Kafka does.
        assert _acknowledge(client, "g-hostile", "m1", epoch + 1, topic_id, ((0, 9, (1,)),)) == 0


def test_a_groups_session_timeout_overrides_the_brokers(share_broker: BrokerProcess) -> None:
    """`share.session.timeout.ms` set on a group wins over the broker's
    `group.share.session.timeout.ms` (6 s here), as in Kafka: a silent member of a group with
    30 s is still there after 8 s, one of a group with 1 s is gone."""
    bootstrap = share_broker.bootstrap
    create_topic(bootstrap, "session-t", 1)
    set_group_configs(bootstrap, "g-long", share_session_timeout_ms="30000")
    set_group_configs(bootstrap, "g-short", share_session_timeout_ms="1000")
    for value, words in (("70000", "less than or equal to group.share.max.session.timeout.ms"),
                         ("999", "greater than or equal to group.share.min.session.timeout.ms")):
        with pytest.raises(KafkaException, match=words):  # Kafka's GroupConfig words
            set_group_configs(bootstrap, "g-long", share_session_timeout_ms=value)
    describe = request_module(ApiKey.SHARE_GROUP_DESCRIBE, 1)
    with RawClient(bootstrap) as client:
        _heartbeat(client, "g-long", "m-long", "session-t")
        _heartbeat(client, "g-short", "m-short", "session-t")
        silent_since = time.monotonic()

        def members() -> dict[str, list[str]]:
            groups = client.call(ApiKey.SHARE_GROUP_DESCRIBE, 1, describe.ShareGroupDescribeRequest(
                group_ids=("g-long", "g-short"), include_authorized_operations=False)).groups
            return {g.group_id: [m.member_id for m in g.members] for g in groups}

        wait_for(lambda: members()["g-short"] == [], "the 1 s group's member to expire")
        while time.monotonic() - silent_since < 8.0:  # past the broker's 6 s
            time.sleep(0.5)
        current = members()
        assert time.monotonic() - silent_since < 30.0, "too slow to tell"
        assert current["g-long"] == ["m-long"], current


def test_share_groups_in_admin_apis_and_group_configs(share_broker: BrokerProcess) -> None:
    bootstrap = share_broker.bootstrap
    create_topic(bootstrap, "admin-t", 1)
    with RawClient(bootstrap) as client:
        _heartbeat(client, "g-admin", "m1", "admin-t")
        describe = request_module(ApiKey.SHARE_GROUP_DESCRIBE, 1)
        described = client.call(ApiKey.SHARE_GROUP_DESCRIBE, 1, describe.ShareGroupDescribeRequest(
            group_ids=("g-admin", "nope"), include_authorized_operations=False)).groups
        assert described[0].group_state == "Stable" and described[0].assignor_name == "simple"
        member = described[0].members[0]
        assert member.member_id == "m1" and member.member_epoch == 1
        assert [(t.topic_name, t.partitions) for t in member.assignment.topic_partitions] == [
            ("admin-t", (0,))]
        assert described[1].error_code == ErrorCode.GROUP_ID_NOT_FOUND
        listing = request_module(ApiKey.LIST_GROUPS, 5)

        def listed(*types: str) -> dict[str, str]:
            answer = client.call(ApiKey.LIST_GROUPS, 5, listing.ListGroupsRequest(
                states_filter=(), types_filter=types))
            return {g.group_id: g.group_type for g in answer.groups}
        assert listed("share").get("g-admin") == "share"
        assert listed().get("g-admin") == "share"
        assert "g-admin" not in listed("classic")
        delete = request_module(ApiKey.DELETE_GROUPS, 2)

        def deleted() -> int:
            answer = client.call(ApiKey.DELETE_GROUPS, 2, delete.DeleteGroupsRequest(
                groups_names=("g-admin",)))
            return int(answer.results[0].error_code)
        assert deleted() == ErrorCode.NON_EMPTY_GROUP
        heartbeat = request_module(ApiKey.SHARE_GROUP_HEARTBEAT, 1)
        left = client.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, heartbeat.ShareGroupHeartbeatRequest(
            group_id="g-admin", member_id="m1", member_epoch=-1))
        assert left.error_code == 0 and left.member_epoch == -1
        assert deleted() == ErrorCode.NONE
        assert "g-admin" not in listed("share")
    # An id held by a classic group (offsets committed under it) is not a share group's.
    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-classic-id"})
    committer.commit(offsets=[TopicPartition("admin-t", 0, 0)], asynchronous=False)
    committer.close()
    with RawClient(bootstrap) as client:
        heartbeat = request_module(ApiKey.SHARE_GROUP_HEARTBEAT, 1)
        refused = client.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, heartbeat.ShareGroupHeartbeatRequest(
            group_id="g-classic-id", member_id="m1", member_epoch=0,
            subscribed_topic_names=("admin-t",)))
        assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    # Group configs: IncrementalAlterConfigs and DescribeConfigs on GROUP resources.
    set_group_configs(bootstrap, "g-admin", share_record_lock_duration_ms="5000")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("group", "g-admin")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["share.record.lock.duration.ms"].value == "5000"
    assert configs["share.delivery.count.limit"].value == "5"  # the broker default
    for name, value in (("share.record.lock.duration.ms", "100"),  # below the minimum
                        ("share.no.such.config", "1"),
                        ("share.auto.offset.reset", "sometimes")):
        with pytest.raises(KafkaException) as refused:
            set_group_configs(bootstrap, "g-admin", **{name.replace(".", "_"): value})
        assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_rejected_and_exhausted_records_land_in_the_dead_letter_topic_once(
    share_broker: BrokerProcess, children: list[Child]
) -> None:
    bootstrap = share_broker.bootstrap
    create_topic(bootstrap, "t-dlq", 1)
    values = produce(bootstrap, "t-dlq", 6, 1)
    for group, mode in (("g-dlq-reject", "reject"), ("g-dlq-limit", "release")):
        set_group_configs(bootstrap, group, share_auto_offset_reset="earliest",
                          share_delivery_count_limit="2",
                          errors_deadletterqueue_topic_name="dlq.t-dlq")
        worker = Child(bootstrap, group, "t-dlq", mode)
        children.append(worker)
        wanted = 6 if mode == "reject" else 12  # released records are delivered twice
        wait_for(lambda w=worker, n=wanted: len(w.pump()) >= n, f"{group} deliveries")
        worker.stop()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dlq-reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition("dlq.t-dlq", 0, 0)])
    copies: list[Any] = []
    deadline = time.monotonic() + 30
    while len(copies) < 12 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            copies.append(message)
    extra = consumer.poll(1.0)  # nothing beyond the twelve copies
    consumer.close()
    assert extra is None or extra.error() is not None
    seen = set()
    for copy in copies:
        headers = {key: value.decode() for key, value in copy.headers() or []}
        offset = int(headers["__dlq.errors.offset"])
        group = headers["__dlq.errors.group.id"]
        assert (group, offset) not in seen  # exactly once per group and record
        seen.add((group, offset))
        assert copy.value().decode() == values[offset]
        assert headers["__dlq.errors.topic"] == "t-dlq"
        assert headers["__dlq.errors.partition"] == "0"
        if group == "g-dlq-reject":
            assert headers["__dlq.errors.reason"] == "CLIENT_REJECTED"
            assert headers["__dlq.errors.delivery.count"] == "1"
        else:
            assert headers["__dlq.errors.reason"] == "MAX_DELIVERY_ATTEMPTS_REACHED"
            assert headers["__dlq.errors.delivery.count"] == "2"
    assert seen == {(g, o) for g in ("g-dlq-reject", "g-dlq-limit") for o in range(6)}
    # A name without the `dlq.` prefix is refused.
    with pytest.raises(KafkaException):
        set_group_configs(bootstrap, "g-dlq-reject", errors_deadletterqueue_topic_name="t-dlq")


def test_share_group_offsets_describe_alter_delete(share_broker: BrokerProcess) -> None:
    bootstrap = share_broker.bootstrap
    create_topic(bootstrap, "offs", 1)
    set_group_configs(bootstrap, "g-offs", share_auto_offset_reset="earliest")
    produce(bootstrap, "offs", 10, 1)
    describe = request_module(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1)
    alter = request_module(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0)
    delete = request_module(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0)
    with RawClient(bootstrap) as client:

        def described(group: str = "g-offs") -> Any:
            return client.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1,
                               describe.DescribeShareGroupOffsetsRequest(groups=(
                                   describe.DescribeShareGroupOffsetsRequestGroup(
                                       group_id=group, topics=None),))).groups[0]

        def altered(offset: int) -> Any:
            return client.call(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0,
                               alter.AlterShareGroupOffsetsRequest(group_id="g-offs", topics=(
                                   alter.AlterShareGroupOffsetsRequestTopic(
                                       topic_name="offs", partitions=(
                                           alter.AlterShareGroupOffsetsRequestPartition(
                                               partition_index=0, start_offset=offset),)),)))

        topic_id = _topic_id(client, "offs")
        _heartbeat(client, "g-offs", "m1", "offs")
        _fetch(client, "g-offs", "m1", 0, topic_id)  # acquires 0-9
        assert _acknowledge(client, "g-offs", "m1", 1, topic_id, ((0, 4, (1,)),)) == 0
        partition = described().topics[0].partitions[0]
        assert (partition.start_offset, partition.lag) == (5, 5)
        assert altered(8).error_code == ErrorCode.NON_EMPTY_GROUP  # m1 is still a member
        heartbeat = request_module(ApiKey.SHARE_GROUP_HEARTBEAT, 1)
        client.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, heartbeat.ShareGroupHeartbeatRequest(
            group_id="g-offs", member_id="m1", member_epoch=-1))
        _fetch(client, "g-offs", "m1", -1, topic_id)  # closes the session: locks released
        assert altered(8).responses[0].partitions[0].error_code == 0
        partition = described().topics[0].partitions[0]
        assert (partition.start_offset, partition.lag) == (8, 2)
        assert altered(99).responses[0].partitions[0].error_code == (
            ErrorCode.OFFSET_OUT_OF_RANGE)
        deleted = client.call(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0,
                              delete.DeleteShareGroupOffsetsRequest(group_id="g-offs", topics=(
                                  delete.DeleteShareGroupOffsetsRequestTopic(
                                      topic_name="offs"),)))
        assert deleted.error_code == 0 and deleted.responses[0].error_code == 0
        assert described().error_code == ErrorCode.NONE and described().topics == ()
        unknown = described("no-such-group")  # answered as a group without state, as Kafka
        assert unknown.error_code == ErrorCode.NONE and unknown.topics == ()


def _tidelog(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "tidelog.cli.main", *args],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_tidelog_groups_lists_describes_and_resets_share_groups(
    share_broker: BrokerProcess,
) -> None:
    bootstrap = share_broker.bootstrap
    create_topic(bootstrap, "cli-t", 1)
    set_group_configs(bootstrap, "g-cli", share_auto_offset_reset="earliest")
    produce(bootstrap, "cli-t", 5, 1)
    with RawClient(bootstrap) as client:
        topic_id = _topic_id(client, "cli-t")
        epoch = _heartbeat(client, "g-cli", "m1", "cli-t")
        _fetch(client, "g-cli", "m1", 0, topic_id)
        assert _acknowledge(client, "g-cli", "m1", 1, topic_id, ((0, 2, (1,)),)) == 0
        with _kept_alive(bootstrap, "g-cli", "m1", epoch):
            listed = json.loads(_tidelog("groups", "list-share", "-b", bootstrap, "--json"))
            described = json.loads(_tidelog("groups", "describe-share", "g-cli", "-b",
                                            bootstrap, "--json"))
        assert {"group": "g-cli", "state": "Stable", "type": "share"} in listed
        assert described["state"] == "Stable" and described["assignor"] == "simple"
        assert [m["member_id"] for m in described["members"]] == ["m1"]
        assert described["members"][0]["partitions"] == ["cli-t-0"]
        assert described["partitions"] == [
            {"topic": "cli-t", "partition": 0, "start_offset": 3, "lag": 2}]
        heartbeat = request_module(ApiKey.SHARE_GROUP_HEARTBEAT, 1)
        client.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, heartbeat.ShareGroupHeartbeatRequest(
            group_id="g-cli", member_id="m1", member_epoch=-1))
        _fetch(client, "g-cli", "m1", -1, topic_id)
    _tidelog("groups", "reset-share-offsets", "g-cli", "--topic", "cli-t", "--to-latest",
             "-b", bootstrap)
    described = json.loads(_tidelog("groups", "describe-share", "g-cli", "-b", bootstrap,
                                    "--json"))
    assert described["members"] == []
    assert described["partitions"] == [
        {"topic": "cli-t", "partition": 0, "start_offset": 5, "lag": 0}]


def test_read_committed_share_groups_skip_aborted_transactions(
    share_broker: BrokerProcess,
) -> None:
    bootstrap = share_broker.bootstrap
    create_topic(bootstrap, "t-txn", 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "share-txn"})
    producer.init_transactions(30)
    # Offsets: c0-c2 0-2, COMMIT 3, a0-a1 4-5, ABORT 6, c3 7, COMMIT 8.
    for values, commit in ((["c0", "c1", "c2"], True), (["a0", "a1"], False), (["c3"], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce("t-txn", value=value.encode(), partition=0)
        assert producer.flush(30) == 0  # written before the abort (it would purge them)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    with RawClient(bootstrap) as client:
        topic_id = _topic_id(client, "t-txn")
        for group, isolation, expected in (
            ("g-txn-committed", "read_committed", [(0, 2), (7, 7)]),
            ("g-txn-uncommitted", "read_uncommitted", [(0, 2), (4, 5), (7, 7)]),
        ):
            set_group_configs(bootstrap, group, share_auto_offset_reset="earliest",
                              share_isolation_level=isolation)
            _heartbeat(client, group, "m1", "t-txn")
            fetched = _fetch(client, group, "m1", 0, topic_id)
            acquired = fetched.responses[0].partitions[0].acquired_records
            # Control batches are never acquired; read_committed skips the aborted records.
            assert [(a.first_offset, a.last_offset) for a in acquired] == expected


SHARE_APIS = (ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.SHARE_FETCH,
              ApiKey.SHARE_ACKNOWLEDGE, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
              ApiKey.ALTER_SHARE_GROUP_OFFSETS, ApiKey.DELETE_SHARE_GROUP_OFFSETS)


def _draw(api_key: int, version: int) -> list[Any]:
    drawn: list[Any] = []

    @settings(max_examples=8, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.from_type(request_schema(api_key, version)))
    def collect(body: Any) -> None:
        drawn.append(body)

    collect()
    return drawn


def test_random_share_requests_never_crash_the_broker(share_broker: BrokerProcess) -> None:
    """Bodies Hypothesis draws from every share API's schema (every served version), sent to
    the broker: each is answered or the connection closed, and the broker keeps serving (its
    log must hold no traceback: the fixture checks)."""
    bodies: list[tuple[int, int, Any]] = []
    for api_key in SHARE_APIS:
        low, high = SUPPORTED_VERSIONS[api_key]
        for version in range(low, high + 1):
            drawn = _draw(api_key, version)
            bodies += [(api_key, version, body) for body in drawn]
    assert len(bodies) >= 50
    answered = 0
    for api_key, version, body in bodies:
        with RawClient(share_broker.bootstrap, timeout_s=10) as client:
            try:
                client.call(api_key, version, body)
                answered += 1
            except (AssertionError, OSError, ValueError):
                pass  # closed by the broker, or a body kio reads back differently
    assert answered > 0
    with RawClient(share_broker.bootstrap) as client:  # still serving
        versions = request_module(ApiKey.API_VERSIONS, 3)
        assert client.call(ApiKey.API_VERSIONS, 3, versions.ApiVersionsRequest(
            client_software_name="t", client_software_version="1")).error_code == 0


def _acquired(response: Any) -> list[tuple[int, int, int]]:
    """The acquired ranges of a one-partition ShareFetch answer (an incremental answer leaves
    out a partition with nothing to say)."""
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for topic in response.responses for p in topic.partitions
            for a in p.acquired_records]


def test_renew_extends_a_lock(share_broker: BrokerProcess) -> None:
    """ShareAcknowledge v2 RENEW (type 4, KIP-1222): records renewed well within their lock stay
    with their member past two lock durations; unrenewed, they expire and go to another member
    with delivery count 2. RENEW in v1 is INVALID_REQUEST."""
    bootstrap = share_broker.bootstrap
    create_topic(bootstrap, "t-renew", 1)
    set_group_configs(bootstrap, "g-renew", share_auto_offset_reset="earliest",
                      share_record_lock_duration_ms="2000")
    produce(bootstrap, "t-renew", 5, 1)
    def renew(client: RawClient, epoch: int, topic_id: uuid.UUID, version: int = 2) -> int:
        return _acknowledge(client, "g-renew", "m1", epoch, topic_id, ((0, 4, (4,)),),
                            version=version)

    with RawClient(bootstrap) as client:
        topic_id = _topic_id(client, "t-renew")
        _heartbeat(client, "g-renew", "m1", "t-renew")
        _heartbeat(client, "g-renew", "m2", "t-renew")
        first = _fetch(client, "g-renew", "m1", 0, topic_id)
        assert _acquired(first) == [(0, 4, 1)]
        assert renew(client, 1, topic_id, version=1) == ErrorCode.INVALID_REQUEST
        epoch = 2
        started = time.monotonic()
        empty = _fetch(client, "g-renew", "m2", 0, topic_id)
        m2_epoch = 1
        # 2.1 lock durations, renewed every 0.3 s (a stall up to 1.7 s stays harmless).
        while time.monotonic() - started < 4.2:
            assert renew(client, epoch, topic_id) == 0
            epoch += 1
            assert not _acquired(empty)
            time.sleep(0.3)
            empty = _fetch(client, "g-renew", "m2", m2_epoch, topic_id, max_wait_ms=0)
            m2_epoch += 1
        assert not _acquired(empty)
        # No more renewals: the lock expires and m2 gets the records, delivered twice now.
        deadline = time.monotonic() + 10
        while True:
            taken = _fetch(client, "g-renew", "m2", m2_epoch, topic_id)
            m2_epoch += 1
            acquired = _acquired(taken)
            if acquired:
                break
            assert time.monotonic() < deadline
        assert acquired == [(0, 4, 2)]
