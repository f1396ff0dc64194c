"""Config description and IncrementalAlterConfigs operations, without a broker."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelog.broker.config import BrokerConfig, load_config
from tidelog.broker.topic_configs import (
    AlterOp,
    ConfigEntry,
    ConfigSource,
    ConfigType,
    apply_incremental,
    describe_broker_configs,
    describe_topic_configs,
    validate_overrides,
)
from tidelog.errors import ErrorCode, KafkaError
from tidelog.storage.config import STORED_TOPIC_CONFIGS, TOPIC_CONFIG_NAMES, LogConfig


@pytest.fixture
def config() -> BrokerConfig:
    return load_config(None, {"log.retention.hours": "1", "num.partitions": "3"})


def by_name(entries: list[ConfigEntry]) -> dict[str, ConfigEntry]:
    return {entry.name: entry for entry in entries}


def test_topic_describe_lists_every_topic_config_with_its_source(config: BrokerConfig) -> None:
    entries = by_name(describe_topic_configs(config, {"segment.bytes": "1048576"}))
    assert set(entries) == set(TOPIC_CONFIG_NAMES) | set(STORED_TOPIC_CONFIGS)
    segment = entries["segment.bytes"]
    assert (segment.value, segment.source) == ("1048576", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert [s.source for s in segment.synonyms] == [
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
        ConfigSource.DEFAULT_CONFIG,
    ]
    assert segment.synonyms[1].name == "log.segment.bytes"
    assert segment.synonyms[1].value == str(LogConfig().segment_bytes)
    retention = entries["retention.ms"]  # set on the broker as log.retention.hours=1
    assert (retention.value, retention.source) == ("3600000", ConfigSource.STATIC_BROKER_CONFIG)
    assert retention.synonyms[0].name == "log.retention.ms"
    flush = entries["flush.messages"]
    assert (flush.value, flush.source) == (str(2**63 - 1), ConfigSource.DEFAULT_CONFIG)
    assert entries["cleanup.policy"].config_type is ConfigType.LIST
    assert not any(entry.read_only or entry.is_sensitive for entry in entries.values())


def test_topic_describe_filters_keys(config: BrokerConfig) -> None:
    entries = describe_topic_configs(config, {}, ["retention.ms", "no.such.config"])
    assert [entry.name for entry in entries] == ["retention.ms"]


def test_broker_describe_marks_given_settings_static(config: BrokerConfig) -> None:
    entries = by_name(describe_broker_configs(config))
    assert entries["num.partitions"].value == "3"
    assert entries["num.partitions"].source is ConfigSource.STATIC_BROKER_CONFIG
    assert entries["auto.create.topics.enable"].source is ConfigSource.DEFAULT_CONFIG
    assert entries["log.retention.ms"].value == "3600000"
    assert entries["node.id"].value == "0"
    assert all(entry.read_only for entry in entries.values())


def test_incremental_set_delete_append_subtract(config: BrokerConfig) -> None:
    overrides = {"retention.ms": "1000", "segment.bytes": "4096"}
    result = apply_incremental(
        config,
        overrides,
        [
            ("retention.ms", AlterOp.SET, "2000"),
            ("segment.bytes", AlterOp.DELETE, None),
            ("cleanup.policy", AlterOp.APPEND, "compact"),
        ],
    )
    assert result == {"retention.ms": "2000", "cleanup.policy": "delete,compact"}
    assert overrides == {"retention.ms": "1000", "segment.bytes": "4096"}  # input untouched
    result = apply_incremental(config, result, [("cleanup.policy", AlterOp.SUBTRACT, "delete")])
    assert result["cleanup.policy"] == "compact"


@pytest.mark.parametrize(
    ("operations", "code"),
    [
        ([("retention.ms", AlterOp.APPEND, "5")], ErrorCode.INVALID_CONFIG),
        ([("no.such.config", AlterOp.SET, "5")], ErrorCode.INVALID_CONFIG),
        ([("retention.ms", AlterOp.SET, "soon")], ErrorCode.INVALID_CONFIG),
        ([("segment.bytes", AlterOp.SET, "1")], ErrorCode.INVALID_CONFIG),
        ([("cleanup.policy", AlterOp.SUBTRACT, "delete")], ErrorCode.INVALID_CONFIG),
        ([("retention.ms", 9, "5")], ErrorCode.INVALID_REQUEST),
        ([("retention.ms", AlterOp.SET, None)], ErrorCode.INVALID_REQUEST),
        (
            [("retention.ms", AlterOp.SET, "5"), ("retention.ms", AlterOp.DELETE, None)],
            ErrorCode.INVALID_REQUEST,
        ),
    ],
)
def test_incremental_errors_use_kafka_codes(
    config: BrokerConfig, operations: list[tuple[str, int, str | None]], code: ErrorCode
) -> None:
    with pytest.raises(KafkaError) as raised:
        apply_incremental(config, {}, operations)
    assert raised.value.code is code


def test_validate_overrides_rejects_nulls_and_unknown_names(config: BrokerConfig) -> None:
    assert validate_overrides(config, {"retention.ms": "5"}) == {"retention.ms": "5"}
    bad_sets: list[dict[str, str | None]] = [
        {"retention.ms": None},
        {"retention.hours": "5"},
        {"max.message.bytes": "-4"},
    ]
    for bad in bad_sets:
        with pytest.raises(KafkaError) as raised:
            validate_overrides(config, bad)
        assert raised.value.code is ErrorCode.INVALID_CONFIG


@given(
    st.lists(
        st.tuples(
            st.sampled_from([*TOPIC_CONFIG_NAMES, "bogus.name"]),
            st.integers(min_value=-1, max_value=5),
            st.one_of(st.none(), st.text(max_size=12), st.integers().map(str)),
        ),
        max_size=6,
    )
)
def test_incremental_never_crashes_and_results_are_valid(
    operations: list[tuple[str, int, str | None]],
) -> None:
    config = load_config(None, {})
    try:
        result = apply_incremental(config, {}, operations)
    except KafkaError as error:
        assert error.code in (ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_REQUEST)
    else:
        LogConfig.from_properties(result)  # whatever is accepted is a valid topic config
        assert set(result) <= set(TOPIC_CONFIG_NAMES)
