"""Znode payloads: Kafka's own JSON decodes, ours round-trips, garbage gets ZkLayoutError."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelog.cluster import zk_layout as layout
from tidelog.cluster.zk_layout import (
    BrokerRegistration,
    ControllerRegistration,
    PartitionState,
    TopicAssignment,
    ZkLayoutError,
)
from tidelog.types import TopicPartition

# Payloads as a Kafka 3.x broker in ZooKeeper mode writes them.
KAFKA_BROKER = (
    b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
    b'"endpoints":["PLAINTEXT://kafka-1.example:9092"],"jmx_port":-1,"port":9092,'
    b'"host":"kafka-1.example","version":5,"timestamp":"1690000000123"}'
)
KAFKA_CONTROLLER = (
    b'{"version":2,"brokerid":2,"timestamp":"1690000000456","kraftControllerEpoch":-1}'
)
KAFKA_TOPIC = (
    b'{"partitions":{"0":[1,2,3],"1":[2,3,1]},"topic_id":"zpPjOxJpQrWqbxwO7y9Z9w",'
    b'"adding_replicas":{},"removing_replicas":{},"version":3}'
)
KAFKA_STATE = b'{"controller_epoch":4,"leader":2,"version":1,"leader_epoch":7,"isr":[2,3]}'
KAFKA_ISR_CHANGE = b'{"version":1,"partitions":[{"topic":"orders","partition":3}]}'

broker_ids = st.integers(min_value=0, max_value=2**31 - 1)


def test_kafka_payloads_decode() -> None:
    broker = BrokerRegistration.decode(1, KAFKA_BROKER)
    assert broker == BrokerRegistration(1, "kafka-1.example", 9092, 1690000000123, None)
    assert ControllerRegistration.decode(KAFKA_CONTROLLER) == ControllerRegistration(
        2, 1690000000456
    )
    topic = TopicAssignment.decode("orders", KAFKA_TOPIC)
    assert topic.partitions == {0: (1, 2, 3), 1: (2, 3, 1)}
    assert topic.topic_id == "zpPjOxJpQrWqbxwO7y9Z9w"
    assert PartitionState.decode(KAFKA_STATE) == PartitionState(2, 7, (2, 3), 4)
    assert layout.decode_isr_change(KAFKA_ISR_CHANGE) == [TopicPartition("orders", 3)]
    assert layout.decode_controller_epoch(b"12") == 12


def test_encodings_carry_kafkas_fields() -> None:
    broker = json.loads(BrokerRegistration(3, "127.0.0.1", 9093, 5, "r1").encode())
    assert broker["version"] == 5
    assert broker["endpoints"] == ["PLAINTEXT://127.0.0.1:9093"]
    assert (broker["rack"], broker["timestamp"], broker["jmx_port"]) == ("r1", "5", -1)
    controller = json.loads(ControllerRegistration(3, 5).encode())
    assert controller == {"version": 2, "brokerid": 3, "timestamp": "5", "kraftControllerEpoch": -1}
    topic = json.loads(TopicAssignment("t", "id", {1: (2, 1), 0: (1, 2)}).encode())
    assert topic["partitions"] == {"0": [1, 2], "1": [2, 1]}
    assert (topic["version"], topic["adding_replicas"], topic["removing_replicas"]) == (3, {}, {})
    state = json.loads(PartitionState(1, 2, (1, 3), 4).encode())
    assert state == {
        "controller_epoch": 4,
        "leader": 1,
        "version": 1,
        "leader_epoch": 2,
        "isr": [1, 3],
    }


def test_paths() -> None:
    tp = TopicPartition("orders", 3)
    assert layout.partition_state_path(tp) == "/brokers/topics/orders/partitions/3/state"
    assert layout.broker_path(7) == "/brokers/ids/7"
    assert layout.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert len(layout.new_topic_id()) == 22
    for bad in ("", ".", "..", "a/b", "x" * 250, "caf\u00e9"):
        with pytest.raises(ZkLayoutError):
            layout.topic_path(bad)
    with pytest.raises(ZkLayoutError):
        layout.broker_path(-1)


@pytest.mark.parametrize(
    ("decoder", "payload"),
    [
        (
            PartitionState.decode,
            b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[]}',
        ),
        (
            PartitionState.decode,
            b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,1]}',
        ),
        (
            PartitionState.decode,
            b'{"controller_epoch":1,"leader":true,"version":1,"leader_epoch":0,"isr":[1]}',
        ),
        (
            PartitionState.decode,
            b'{"controller_epoch":1,"leader":1,"version":9,"leader_epoch":0,"isr":[1]}',
        ),
        (PartitionState.decode, b"[1,2]"),
        (PartitionState.decode, b"\xff\xfe"),
        (ControllerRegistration.decode, b'{"version":2,"brokerid":-4,"timestamp":"1"}'),
        (ControllerRegistration.decode, b'{"version":2,"brokerid":1,"timestamp":"\xc2\xb2"}'),
        (lambda d: TopicAssignment.decode("t", d), b'{"version":3,"partitions":{"1":[1]}}'),
        (lambda d: TopicAssignment.decode("t", d), b'{"version":3,"partitions":{"x":[1]}}'),
        (lambda d: TopicAssignment.decode("t", d), b'{"version":3,"partitions":{}}'),
        (
            lambda d: BrokerRegistration.decode(1, d),
            b'{"version":5,"endpoints":["nope"],"timestamp":"1"}',
        ),
        (
            lambda d: BrokerRegistration.decode(1, d),
            b'{"version":5,"endpoints":[],"timestamp":"1"}',
        ),
        (layout.decode_controller_epoch, b"-1"),
        (layout.decode_controller_epoch, b"\xc2\xb2"),
        (layout.decode_isr_change, b'{"version":1,"partitions":[{"topic":"t","partition":-1}]}'),
        (layout.decode_cluster_id, b'{"version":"1"}'),
    ],
)
def test_invalid_payloads_are_rejected(decoder: object, payload: bytes) -> None:
    assert callable(decoder)
    with pytest.raises(ZkLayoutError):
        decoder(payload)


@given(
    leader=st.integers(min_value=-1, max_value=2**31 - 1),
    leader_epoch=st.integers(min_value=0, max_value=2**31 - 1),
    isr=st.lists(broker_ids, min_size=1, max_size=8, unique=True),
    controller_epoch=st.integers(min_value=0, max_value=2**31 - 1),
)
def test_partition_state_round_trips(
    leader: int, leader_epoch: int, isr: list[int], controller_epoch: int
) -> None:
    state = PartitionState(leader, leader_epoch, tuple(isr), controller_epoch)
    assert PartitionState.decode(state.encode()) == state


@given(
    replicas=st.lists(
        st.lists(broker_ids, min_size=1, max_size=5, unique=True), min_size=1, max_size=20
    ),
    topic=st.from_regex(r"[a-zA-Z0-9._-]{3,40}", fullmatch=True),
)
def test_topic_assignment_round_trips(replicas: list[list[int]], topic: str) -> None:
    assignment = TopicAssignment(
        topic, layout.new_topic_id(), dict(enumerate(map(tuple, replicas)))
    )
    assert TopicAssignment.decode(topic, assignment.encode()) == assignment


@given(
    broker_id=broker_ids,
    port=st.integers(min_value=1, max_value=65535),
    rack=st.none() | st.text(max_size=10),
    timestamp_ms=st.integers(min_value=0, max_value=2**53),
)
def test_broker_registration_round_trips(
    broker_id: int, port: int, rack: str | None, timestamp_ms: int
) -> None:
    registration = BrokerRegistration(broker_id, "127.0.0.1", port, timestamp_ms, rack)
    assert BrokerRegistration.decode(broker_id, registration.encode()) == registration
    controller = ControllerRegistration(broker_id, timestamp_ms)
    assert ControllerRegistration.decode(controller.encode()) == controller


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
fields = st.sampled_from(
    [
        "version",
        "leader",
        "leader_epoch",
        "isr",
        "controller_epoch",
        "brokerid",
        "timestamp",
        "partitions",
        "endpoints",
        "rack",
        "topic_id",
        "id",
        "topic",
        "partition",
    ]
)


@given(
    raw=st.binary(max_size=200)
    | st.dictionaries(fields, json_values, max_size=8).map(lambda d: json.dumps(d).encode())
)
def test_decoders_raise_only_zk_layout_error(raw: bytes) -> None:
    decoders: list[tuple[Callable[[bytes], object], type | tuple[type, ...]]] = [
        (PartitionState.decode, PartitionState),
        (ControllerRegistration.decode, ControllerRegistration),
        (lambda d: TopicAssignment.decode("t", d), TopicAssignment),
        (lambda d: BrokerRegistration.decode(1, d), BrokerRegistration),
        (layout.decode_controller_epoch, int),
        (layout.decode_isr_change, list),
        (layout.decode_cluster_id, str),
    ]
    for decode, expected in decoders:
        try:
            value = decode(raw)
        except ZkLayoutError:
            continue
        assert isinstance(value, expected)


def test_registration_with_several_listeners_round_trips() -> None:
    """Every advertised listener is registered (Kafka's v5 JSON: endpoints plus the protocol
    map); the first is the one peers replicate from."""
    from tidelog.cluster.zk_layout import BrokerEndpoint

    registration = BrokerRegistration(
        2, "10.0.0.2", 9095, 7, listener="REPLICATION", security_protocol="SASL_SSL",
        other_endpoints=(BrokerEndpoint("CLIENT", "SSL", "kafka-2.example", 9094),),
    )
    payload = json.loads(registration.encode())
    assert payload["endpoints"] == ["REPLICATION://10.0.0.2:9095", "CLIENT://kafka-2.example:9094"]
    assert payload["listener_security_protocol_map"] == {"REPLICATION": "SASL_SSL",
                                                         "CLIENT": "SSL"}
    decoded = BrokerRegistration.decode(2, registration.encode())
    assert decoded == registration
    assert decoded.endpoint("CLIENT") == BrokerEndpoint("CLIENT", "SSL", "kafka-2.example", 9094)
    assert decoded.endpoint("OTHER") is None
