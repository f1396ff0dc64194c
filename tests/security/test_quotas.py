"""Client quotas with real clients (docs/security.md "Quotas"): a confluent-kafka producer and
consumer held to their client-id quota by throttle_time_ms and a muted connection while an
unquoted client runs free; a user quota on a SASL principal taking precedence over a client-id
quota; Kafka's kafka-configs setting and describing quotas; Kafka's errors for bad input;
quotas kept across a restart and guarded by the authorizer.

The brokers run `quota.window.num=2` (Kafka's default is 11): the rate is then averaged over
1-2 s, so a few seconds of traffic show the quota (a new client's first burst may use the
whole window's budget at once, as in Kafka: with 11 windows that is 10 s of quota)."""

from __future__ import annotations

import dataclasses
import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import kafka_peer

from .conftest import USERS, StartSecure
from .quota_clients import (
    ALTER_CLIENT_QUOTAS,
    DESCRIBE_CLIENT_QUOTAS,
    alter,
    consume_for,
    describe,
    fill,
    produce_for,
)

if TYPE_CHECKING:
    from conftest import BrokerFactory, BrokerProcess

QUOTA = 200 * 1024  # bytes/s
WINDOW = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
RUN_S = 5.0


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    from conftest import BrokerFactory

    factory = BrokerFactory(tmp_path_factory.mktemp("quotas"))
    try:
        yield factory(settings=WINDOW, extra_args=["--metrics", "127.0.0.1:0"])
    finally:
        bad = factory.stop_all()
    if bad:
        pytest.fail("broker logged a traceback:\n" + "\n".join(bad))


def metrics_text(broker: BrokerProcess) -> str:
    match = re.search(r"metrics on (http://\S+/metrics)", broker.log_text())
    assert match, broker.log_text()
    with urllib.request.urlopen(match[1], timeout=10) as response:
        return str(response.read().decode())


def test_producer_is_held_to_its_client_id_quota_and_others_are_not(
    quota_broker: BrokerProcess,
) -> None:
    bootstrap = quota_broker.bootstrap
    assert alter(bootstrap, [((("client-id", "slow-producer"),),
                              [("producer_byte_rate", QUOTA, False)])]) == [
        ("", None, (("client-id", "slow-producer"),))]
    flow, start = produce_for(bootstrap, "quota-produce", "slow-producer", RUN_S)
    rate = flow.rate(start, start + RUN_S)
    assert 0.8 * QUOTA <= rate <= 1.2 * QUOTA, f"{rate / 1024:.0f} KB/s"
    assert flow.throttle_ms_max > 0  # librdkafka saw throttle_time_ms

    free, free_start = produce_for(bootstrap, "quota-produce", "free-producer", 1.0)
    assert free.rate(free_start, free_start + 1.0) > 3 * QUOTA
    assert free.throttle_ms_max == 0

    text = metrics_text(quota_broker)
    throttled = re.search(
        r'tidelog_quota_throttle_time_ms_total\{client_id="slow-producer",type="Produce",'
        r'user=""\} (\S+)', text)
    assert throttled and float(throttled[1]) > 0, text[-2000:]
    # recorded (as Kafka records every client once a quota exists), never throttled
    assert re.search(r'tidelog_quota_throttled_responses_total\{client_id="free-producer",'
                     r'type="Produce",user=""\} 0\.0', text), text[-2000:]


def test_consumer_is_held_to_its_consumer_byte_rate(quota_broker: BrokerProcess) -> None:
    bootstrap = quota_broker.bootstrap
    fill(bootstrap, "quota-fetch", 3000)  # ~3 MB
    alter(bootstrap, [((("client-id", "slow-consumer"),), [("consumer_byte_rate", QUOTA, False)])])
    flow, start = consume_for(bootstrap, "quota-fetch", "slow-consumer", RUN_S, limit=3000)
    rate = flow.rate(start, start + RUN_S)
    assert 0.8 * QUOTA <= rate <= 1.2 * QUOTA, f"{rate / 1024:.0f} KB/s"
    assert flow.throttle_ms_max > 0

    free, _ = consume_for(bootstrap, "quota-fetch", "free-consumer", 3.0, limit=3000)
    assert len(free.events) == 3000
    assert free.throttle_ms_max == 0


def test_request_percentage_throttles_a_busy_client(quota_broker: BrokerProcess) -> None:
    """0.5% of a handler second per second: a producer sending as fast as it can spends more
    than that and is throttled (Kafka's request quota), while its byte rate is unlimited."""
    bootstrap = quota_broker.bootstrap
    alter(bootstrap, [((("client-id", "busy"),), [("request_percentage", 0.5, False)])])
    flow, _ = produce_for(bootstrap, "quota-request", "busy", 2.0, **{"linger.ms": 0})
    assert flow.throttle_ms_max > 0
    text = metrics_text(quota_broker)
    throttled = re.search(
        r'tidelog_quota_throttled_responses_total\{client_id="busy",type="Request",'
        r'user=""\} (\S+)', text)
    assert throttled and float(throttled[1]) > 0, text[-2000:]


def test_kafka_configs_alters_and_describes_quotas(quota_broker: BrokerProcess) -> None:
    bootstrap = quota_broker.bootstrap

    def configs(*args: str, check: bool = True) -> str:
        result = kafka_peer.run_tool("kafka-configs", "--bootstrap-server", bootstrap, *args,
                                     check=check)
        return result.stdout + result.stderr

    out = configs("--alter", "--add-config", "producer_byte_rate=1048576,request_percentage=50",
                  "--entity-type", "users", "--entity-name", "carol",
                  "--entity-type", "clients", "--entity-default")
    assert "Completed updating config for user carol." in out, out
    out = configs("--describe", "--entity-type", "users", "--entity-name", "carol",
                  "--entity-type", "clients", "--entity-default")
    assert ("Quota configs for user-principal 'carol', the default client-id are "
            "producer_byte_rate=1048576.0, request_percentage=50.0") in out, out
    out = configs("--alter", "--add-config", "consumer_byte_rate=1.5", "--entity-type", "clients",
                  "--entity-name", "x", check=False)
    assert "InvalidRequestException: consumer_byte_rate cannot be a fractional value." in out
    assert describe(bootstrap, [("user", 0, "carol")], strict=False)[2] == {
        (("client-id", None), ("user", "carol")): {
            "producer_byte_rate": 1048576.0, "request_percentage": 50.0}}


def test_bad_requests_get_kafkas_errors(quota_broker: BrokerProcess) -> None:
    bootstrap = quota_broker.bootstrap
    rate = [("producer_byte_rate", 1000.0, False)]
    answers = alter(bootstrap, [
        ((), rate),
        ((("group", "g"),), rate),
        ((("user", ""),), rate),
        ((("user", "a"), ("ip", "10.0.0.1")), rate),
        ((("user", "b"), ("client-id", "c")), [("foo", 1.0, False)]),
        ((("client-id", None),), [("producer_byte_rate", -1.0, False)]),
        ((("user", "b"),),
         [("producer_byte_rate", 1.0, False), ("producer_byte_rate", 2.0, False)]),
        ((("user", "valid"),), rate),
    ], validate_only=True)
    assert [(code, message) for code, message, _ in answers] == [
        ("INVALID_REQUEST", "Invalid empty client quota entity"),
        ("INVALID_REQUEST", "Unhandled client quota entity type: group"),
        ("INVALID_REQUEST", "Empty user not supported"),
        ("INVALID_REQUEST", "Invalid quota entity combination, IP entity shouldnot be combined "
                            "with User or ClientId"),
        ("INVALID_REQUEST", "Invalid configuration key foo"),
        ("INVALID_REQUEST", "Quota producer_byte_rate must be greater than 0"),
        ("INVALID_REQUEST", "Ignoring duplicate entity ClientQuotaEntity(entries={user=b})"),
        ("", None),
    ]
    # validate_only stored nothing
    assert describe(bootstrap, [("user", 0, "valid")])[2] == {}
    assert describe(bootstrap, [("group", 0, "g")])[:2] == (
        "UNSUPPORTED_VERSION", "Unsupported entity type group")
    assert describe(bootstrap, [("user", 0, None)])[:2] == (
        "INVALID_REQUEST", "Request specified MATCH_TYPE_EXACT, but set match string to null.")
    assert describe(bootstrap, [("user", 1, None), ("user", 2, None)])[:2] == (
        "INVALID_REQUEST", "Entity type user cannot appear more than once in the filter.")
    # v0 (not flexible) is served too
    assert describe(bootstrap, [("client-id", 0, "slow-producer")], version=0)[0] == ""


def test_random_quota_requests_are_answered(quota_broker: BrokerProcess) -> None:
    """Hypothesis-drawn DescribeClientQuotas and AlterClientQuotas bodies (v0 and v1; NaN,
    infinities, odd names, unknown types): each is answered on the same connection, the
    broker logs no traceback (checked at teardown) and stores nothing (validate_only)."""
    from broker.raw import RawClient
    from tidelog.protocol.codec import request_schema

    with RawClient(quota_broker.bootstrap) as client:
        for api_key in (DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS):
            for version in (0, 1):
                _exchange_drawn(client, api_key, version, request_schema(api_key, version))
    before = describe(quota_broker.bootstrap)
    assert before[0] == ""
    assert not any(value != value for values in before[2].values() for value in values.values())


def _exchange_drawn(client: Any, api_key: int, version: int, schema: type) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=40, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.from_type(schema))
    def exchange(body: Any) -> None:
        if api_key == ALTER_CLIENT_QUOTAS:
            body = dataclasses.replace(body, validate_only=True)
        assert client.call(api_key, version, body) is not None

    exchange()


def test_a_user_quota_applies_to_the_sasl_principal_before_its_client_id_quota(
    secure_broker: StartSecure,
) -> None:
    broker = secure_broker(["PLAINTEXT", "SASL_PLAINTEXT"], WINDOW,
                           users={"alice": USERS["alice"]})
    admin = broker.bootstrap("PLAINTEXT")
    alter(admin, [
        ((("user", "alice"),), [("producer_byte_rate", QUOTA, False)]),
        ((("client-id", "alice-app"),), [("producer_byte_rate", 100 * QUOTA, False)]),
    ])
    flow, start = produce_for(
        broker.bootstrap("SASL_PLAINTEXT"), "quota-user", "alice-app", 3.0,
        **{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
           "sasl.username": "alice", "sasl.password": USERS["alice"][1]},
    )
    rate = flow.rate(start, start + 3.0)
    assert 0.75 * QUOTA <= rate <= 1.25 * QUOTA, f"{rate / 1024:.0f} KB/s"
    assert flow.throttle_ms_max > 0
    # the same client-id unauthenticated is only held to its own (100x) quota
    free, free_start = produce_for(admin, "quota-user", "alice-app", 1.0)
    assert free.rate(free_start, free_start + 1.0) > 3 * QUOTA


def test_quotas_survive_a_restart_and_need_cluster_rights(
    tmp_path: Path, broker_factory: BrokerFactory
) -> None:
    data_dir = tmp_path / "data"
    first = broker_factory(data_dir)
    alter(first.bootstrap, [
        ((("user", None),), [("consumer_byte_rate", 4096.0, False)]),
        ((("user", "dave"), ("client-id", "etl")), [("request_percentage", 25.5, False)]),
    ])
    first.stop()
    # User:ANONYMOUS may describe the cluster's configs from 127.0.0.1 only, never alter them
    (data_dir / "acls.json").write_text(json.dumps({"version": 1, "acls": [{
        "resource_type": "CLUSTER", "pattern_type": "LITERAL", "name": "kafka-cluster",
        "principal": "User:ANONYMOUS", "host": "127.0.0.1", "operation": "DESCRIBE_CONFIGS",
        "permission_type": "ALLOW"}]}))
    second = broker_factory(data_dir, settings={"authorizer.class.name": "AclAuthorizer"})
    assert describe(second.bootstrap) == ("", None, {
        (("user", None),): {"consumer_byte_rate": 4096.0},
        (("client-id", "etl"), ("user", "dave")): {"request_percentage": 25.5},
    })
    assert alter(second.bootstrap, [((("user", "x"),), [("producer_byte_rate", 1.0, False)])]) == [
        ("CLUSTER_AUTHORIZATION_FAILED", "Cluster authorization failed.", (("user", "x"),))]
    assert describe(second.bootstrap, source_host="127.0.0.2") == (
        "CLUSTER_AUTHORIZATION_FAILED", "Cluster authorization failed.", {})
