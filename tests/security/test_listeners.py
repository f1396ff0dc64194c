"""Several listeners on one broker: Metadata, FindCoordinator and DescribeCluster answer each
client with the endpoints of the listener it came in on (a consumer group over SSL works on
a broker whose first listener is PLAINTEXT); advertised.listeners is what clients are told."""

from __future__ import annotations

import time

import confluent_kafka

from broker.raw import RawClient, request_module

from .conftest import Certs, StartSecure, tls_settings
from .tls_sasl_clients import Security, create_topic, values

METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER = 3, 10, 60


def _answers(bootstrap: str) -> tuple[list[int], int, list[int]]:
    with RawClient(bootstrap) as client:
        metadata = client.call(METADATA, 12, request_module(METADATA, 12).MetadataRequest(
            topics=(), allow_auto_topic_creation=False,
            include_topic_authorized_operations=False))
        coordinator = client.call(FIND_COORDINATOR, 3, request_module(
            FIND_COORDINATOR, 3).FindCoordinatorRequest(key="g", key_type=0))
        cluster = client.call(DESCRIBE_CLUSTER, 0, request_module(
            DESCRIBE_CLUSTER, 0).DescribeClusterRequest(
                include_cluster_authorized_operations=False))
    return ([b.port for b in metadata.brokers], coordinator.port,
            [b.port for b in cluster.brokers])


def test_each_listener_advertises_itself(secure_broker: StartSecure) -> None:
    broker = secure_broker(["PLAINTEXT", "CLIENT"], {
        "listener.security.protocol.map": "CLIENT:PLAINTEXT",
        "advertised.listeners": "CLIENT://localhost:19999",
    })
    plaintext = broker.ports["PLAINTEXT"]
    assert _answers(broker.bootstrap("PLAINTEXT")) == ([plaintext], plaintext, [plaintext])
    assert _answers(broker.bootstrap("CLIENT")) == ([19999], 19999, [19999])


def test_a_consumer_group_over_ssl_behind_a_plaintext_first_listener(
    secure_broker: StartSecure, certs: Certs
) -> None:
    broker = secure_broker(["PLAINTEXT", "SSL"], tls_settings(certs))
    create_topic(broker.bootstrap("PLAINTEXT"), "grouped")
    security = Security("SSL", ca=certs["ca.pem"])
    conf = {"bootstrap.servers": broker.bootstrap("SSL"), **security.librdkafka()}
    producer = confluent_kafka.Producer(conf)
    for value in values("grouped", 10):
        producer.produce("grouped", value)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({**conf, "group.id": "ssl-group",
                                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["grouped"])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
        consumer.commit(asynchronous=False)  # through the coordinator found over SSL
    finally:
        consumer.close()
    assert sorted(got) == sorted(values("grouped", 10))
