"""KIP-714 subscriptions and client instances (coordinator/client_metrics.py), with the time
passed in: Kafka's ClientMetricsManager rules, case by case."""

from __future__ import annotations

import uuid

import pytest

from tidelog.coordinator.client_metrics import (
    APPEND,
    DEFAULT_INTERVAL_MS,
    DELETE,
    SET,
    SUBTRACT,
    ClientMetricsManager,
    apply_incremental,
    parse_subscription,
)
from tidelog.errors import ErrorCode, KafkaError

ID = uuid.UUID("11111111-2222-3333-4444-555555555555")
T0 = 1_700_000_000_000


def attributes(client_id: str = "app", software: str = "librdkafka") -> dict[str, str | None]:
    return {
        "client_instance_id": str(ID), "client_id": client_id,
        "client_software_name": software, "client_software_version": "2.16.0",
        "client_source_address": "127.0.0.1", "client_source_port": "40000",
    }


def manager(**subscriptions: dict[str, str]) -> ClientMetricsManager:
    subject = ClientMetricsManager()
    subject.replace_subscriptions(subscriptions)
    return subject


def test_configs_are_validated_as_kafka_does() -> None:
    parsed = parse_subscription("s", {"metrics": "a., b.", "interval.ms": "1000",
                                      "match": "client_id=app.*"})
    assert parsed.metrics == {"a.", "b."} and parsed.interval_ms == 1000
    for configs, code in (
        ({"bogus": "1"}, ErrorCode.INVALID_REQUEST),
        ({"interval.ms": "99"}, ErrorCode.INVALID_REQUEST),
        ({"interval.ms": "3600001"}, ErrorCode.INVALID_REQUEST),
        ({"interval.ms": "soon"}, ErrorCode.INVALID_CONFIG),
        ({"match": "client_colour=red"}, ErrorCode.INVALID_CONFIG),
        ({"match": "client_id"}, ErrorCode.INVALID_CONFIG),
        ({"match": "client_id=("}, ErrorCode.INVALID_CONFIG),
    ):
        with pytest.raises(KafkaError) as caught:
            parse_subscription("s", configs)
        assert caught.value.code == code, configs
    with pytest.raises(KafkaError):
        parse_subscription("", {})


def test_incremental_operations() -> None:
    configs = apply_incremental({}, [("metrics", SET, "a"), ("interval.ms", SET, "500")])
    assert configs == {"metrics": "a", "interval.ms": "500"}
    assert apply_incremental(configs, [("metrics", DELETE, None)]) == {"interval.ms": "500"}
    # As Kafka 4.3.1: no APPEND / SUBTRACT on client-metrics configs (INVALID_CONFIG).
    for operation in (APPEND, SUBTRACT):
        for name in ("metrics", "interval.ms"):
            with pytest.raises(KafkaError) as caught:
                apply_incremental(configs, [(name, operation, "b")])
            assert caught.value.code == ErrorCode.INVALID_CONFIG


def test_matching_subscriptions_are_merged() -> None:
    subject = manager(
        a={"metrics": "org.apache.kafka.producer.", "interval.ms": "2000"},
        b={"metrics": "org.apache.kafka.consumer.", "interval.ms": "1000",
           "match": "client_software_name=librdkafka,client_id=ap+"},
        other={"metrics": "x.", "interval.ms": "100", "match": "client_id=nobody"},
    )
    result = subject.get_subscriptions(ID, attributes(), T0)
    assert result.error == ErrorCode.NONE and result.instance is not None
    assert result.instance.metrics == ("org.apache.kafka.consumer.", "org.apache.kafka.producer.")
    assert result.instance.interval_ms == 1000
    # The whole value must match: "ap+" does not match "app-2".
    other = manager(b={"metrics": "m.", "match": "client_id=ap+"})
    missed = other.get_subscriptions(ID, attributes("app-2"), T0)
    assert missed.instance is not None
    assert missed.instance.metrics == () and missed.instance.interval_ms == DEFAULT_INTERVAL_MS


def test_star_means_every_metric() -> None:
    subject = manager(a={"metrics": "*"}, b={"metrics": "x."})
    result = subject.get_subscriptions(ID, attributes(), T0)
    assert result.instance is not None and result.instance.metrics == ("",)


def test_push_interval_is_enforced() -> None:
    subject = manager(a={"metrics": "*", "interval.ms": "1000"})
    first = subject.get_subscriptions(ID, attributes(), T0).instance
    assert first is not None
    sid = first.subscription_id
    too_soon = subject.get_subscriptions(ID, attributes(), T0 + 10)
    assert too_soon.error == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    # The first push after a Get is on time whenever it comes (clients jitter the interval).
    push = subject.push(ID, attributes(), sid, False, 0, 10, 1000, T0 + 20)
    assert push[0] == ErrorCode.NONE
    assert subject.push(ID, attributes(), sid, False, 0, 10, 1000, T0 + 900)[0] == (
        ErrorCode.THROTTLING_QUOTA_EXCEEDED
    )
    assert subject.push(ID, attributes(), sid, False, 0, 10, 1000, T0 + 1020)[0] == ErrorCode.NONE
    # A terminating push is accepted early; nothing is accepted after it.
    assert subject.push(ID, attributes(), sid, True, 0, 10, 1000, T0 + 1030)[0] == ErrorCode.NONE
    assert subject.push(ID, attributes(), sid, False, 0, 10, 1000, T0 + 5000)[0] == (
        ErrorCode.INVALID_REQUEST
    )


def test_push_errors_in_kafkas_order() -> None:
    subject = manager(a={"metrics": "*", "interval.ms": "100"})
    instance = subject.get_subscriptions(ID, attributes(), T0).instance
    assert instance is not None
    sid = instance.subscription_id
    assert subject.push(ID, attributes(), sid + 1, False, 0, 1, 10, T0 + 1)[0] == (
        ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    )
    # After UNKNOWN_SUBSCRIPTION_ID the client may subscribe again at once.
    assert subject.get_subscriptions(ID, attributes(), T0 + 2).error == ErrorCode.NONE
    assert subject.push(ID, attributes(), sid, False, 9, 1, 10, T0 + 3)[0] == (
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    )
    assert subject.get_subscriptions(ID, attributes(), T0 + 4).error == ErrorCode.NONE
    assert subject.push(ID, attributes(), sid, False, 0, 11, 10, T0 + 5)[0] == (
        ErrorCode.TELEMETRY_TOO_LARGE
    )


def test_a_subscription_change_re_evaluates_the_instance() -> None:
    subject = manager(a={"metrics": "x.", "interval.ms": "60000"})
    before = subject.get_subscriptions(ID, attributes(), T0).instance
    assert before is not None
    subject.replace_subscriptions({"a": {"metrics": "y.", "interval.ms": "60000"}})
    # The old subscription id is now unknown; the new Get is answered at once.
    push = subject.push(ID, attributes(), before.subscription_id, False, 0, 1, 10, T0 + 1)
    assert push[0] == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    after = subject.get_subscriptions(ID, attributes(), T0 + 2)
    assert after.error == ErrorCode.NONE and after.instance is not None
    assert after.instance.metrics == ("y.",)
    assert after.instance.subscription_id != before.subscription_id


def test_instances_are_bounded_and_expire() -> None:
    subject = manager(a={"metrics": "*", "interval.ms": "100"})
    subject.max_instances = 3
    ids = [uuid.UUID(int=n + 1) for n in range(5)]
    for n, instance_id in enumerate(ids):
        subject.get_subscriptions(instance_id, attributes(), T0 + n)
    assert list(subject.instances) == ids[2:]
    # max(60 s, 3 x interval) after the last request.
    assert subject.expire(T0 + 60_003) == ids[2:4]
    assert list(subject.instances) == ids[4:]


def test_the_rules_do_not_depend_on_the_clock_resolution() -> None:
    """A Get, a Push and a Push again in one millisecond: the first Push follows the Get, the
    second is too early (Kafka's timestamp comparison would accept or refuse by chance)."""
    subject = manager(a={"metrics": "*", "interval.ms": "1000"})
    instance = subject.get_subscriptions(ID, attributes(), T0).instance
    assert instance is not None
    sid = instance.subscription_id
    assert subject.push(ID, attributes(), sid, False, 0, 1, 10, T0)[0] == ErrorCode.NONE
    assert subject.push(ID, attributes(), sid, False, 0, 1, 10, T0)[0] == (
        ErrorCode.THROTTLING_QUOTA_EXCEEDED
    )
