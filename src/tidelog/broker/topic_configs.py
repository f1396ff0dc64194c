"""Topic and broker configs as Kafka's admin API shows and changes them (pure; no I/O).

DescribeConfigs answers every topic-level config with its effective value and where that value
comes from, in Kafka's order of precedence:

    DYNAMIC_TOPIC_CONFIG (1)   a topic override (topics.json, set by CreateTopics/AlterConfigs)
    STATIC_BROKER_CONFIG (4)   the broker-level synonym (log.retention.ms, ...) given in the
                               config file or with --set
    DEFAULT_CONFIG (5)         the built-in default

Synonyms list the same chain, most specific first, as Kafka does. IncrementalAlterConfigs
operations (SET, DELETE, APPEND, SUBTRACT) are applied to a copy of the overrides and the result
is validated by `LogConfig.from_properties` before anything is written.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tidelog.broker.config import BrokerConfig
from tidelog.errors import ErrorCode, KafkaError
from tidelog.storage.config import STORED_TOPIC_CONFIGS, TOPIC_CONFIG_NAMES, LogConfig


class ConfigSource(enum.IntEnum):
    """DescribeConfigs `config_source` (v1+)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigType(enum.IntEnum):
    """DescribeConfigs `config_type` (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7


class AlterOp(enum.IntEnum):
    """IncrementalAlterConfigs `config_operation`."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ResourceType(enum.IntEnum):
    """Config resource types (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs)."""

    TOPIC = 2
    BROKER = 4


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    config_type: ConfigType
    documentation: str
    read_only: bool = False
    is_sensitive: bool = False
    synonyms: tuple[Synonym, ...] = ()


_TOPIC_TYPES: dict[str, ConfigType] = {
    "segment.bytes": ConfigType.INT,
    "segment.index.bytes": ConfigType.INT,
    "index.interval.bytes": ConfigType.INT,
    "max.message.bytes": ConfigType.INT,
    "durability": ConfigType.STRING,
    "message.timestamp.type": ConfigType.STRING,
    "cleanup.policy": ConfigType.LIST,
    "min.cleanable.dirty.ratio": ConfigType.DOUBLE,
    "tidelog.delivery.delay.enable": ConfigType.BOOLEAN,
    "compression.type": ConfigType.STRING,
}
_STORED_TYPES = {
    "boolean": ConfigType.BOOLEAN,
    "int": ConfigType.INT,
    "long": ConfigType.LONG,
    "list": ConfigType.LIST,
    "string": ConfigType.STRING,
}
_STORED_DOC = "Accepted, stored and described; Tidelog does not act on it (docs/decisions.md)."
_TOPIC_DOCS: dict[str, str] = {
    "segment.bytes": "Size of one log segment file in bytes; a full segment is rolled.",
    "segment.ms": "Roll a new segment after this long even if the active one is not full.",
    "segment.index.bytes": "Maximum size of a segment's offset and time index files.",
    "index.interval.bytes": "Bytes of log between two offset index entries.",
    "retention.ms": "Delete whole segments older than this; -1 keeps data forever.",
    "retention.bytes": "Delete old segments while the partition is larger; -1 = unlimited.",
    "flush.messages": "fsync the log after this many messages.",
    "flush.ms": "fsync the log after this many milliseconds.",
    "durability": "pagecache: ack after the write; sync: ack after fsync (group commit).",
    "cleanup.policy": "delete (time/size retention), compact, or compact,delete.",
    "max.message.bytes": "Largest record batch the topic accepts, in bytes.",
    "message.timestamp.type": "CreateTime (producer's) or LogAppendTime (broker's).",
    "delete.retention.ms": "How long compaction keeps tombstones.",
    "min.compaction.lag.ms": "Minimum age of a record before compaction may remove it.",
    "min.cleanable.dirty.ratio": "Dirty fraction of a log that triggers compaction.",
    "tidelog.delivery.delay.enable": (
        "Records with TIMER_DELIVER_MS, TIMER_DELAY_MS or DELAY headers are delivered when due."
    ),
    "tidelog.delivery.max.delay.ms": "Longest delivery delay accepted; longer: INVALID_RECORD.",
    "compression.type": "producer keeps each batch's codec; uncompressed, gzip, snappy, lz4 "
    "or zstd recompresses every batch appended to the topic.",
}
# Coarser broker spellings that also set a broker-level log setting.
_BROKER_ALIASES: dict[str, str] = {
    "log.retention.hours": "log.retention.ms",
    "log.retention.minutes": "log.retention.ms",
    "log.roll.hours": "log.roll.ms",
}
_DEFAULTS = LogConfig().to_properties()


def _static_broker_names(config: BrokerConfig) -> set[str]:
    names = set(config.raw)
    names.update(_BROKER_ALIASES[name] for name in config.raw if name in _BROKER_ALIASES)
    return names


def topic_config_type(name: str) -> ConfigType:
    stored = STORED_TOPIC_CONFIGS.get(name)
    if stored is not None:
        return _STORED_TYPES[stored.kind]
    return _TOPIC_TYPES.get(name, ConfigType.LONG)


def _stored_entry(name: str, overrides: Mapping[str, str]) -> ConfigEntry:
    stored = STORED_TOPIC_CONFIGS[name]
    synonyms: list[Synonym] = []
    if name in overrides:
        synonyms.append(Synonym(name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
    if stored.broker_name is not None:
        synonyms.append(Synonym(stored.broker_name, stored.default, ConfigSource.DEFAULT_CONFIG))
    value = overrides.get(name, stored.default)
    source = ConfigSource.DYNAMIC_TOPIC_CONFIG if name in overrides else ConfigSource.DEFAULT_CONFIG
    return ConfigEntry(
        name=name,
        value=value,
        source=source,
        config_type=topic_config_type(name),
        documentation=_STORED_DOC,
        synonyms=tuple(synonyms),
    )


def describe_topic_configs(
    config: BrokerConfig, overrides: Mapping[str, str], keys: Iterable[str] | None = None
) -> list[ConfigEntry]:
    """Every topic-level config (or only `keys`) with value, source and synonyms, by name."""
    effective = LogConfig.from_properties(overrides, base=config.log).to_properties()
    broker_values = config.log.to_properties()
    static = _static_broker_names(config)
    wanted = set(keys) if keys is not None else None
    entries = []
    for name in sorted(set(TOPIC_CONFIG_NAMES) | set(STORED_TOPIC_CONFIGS)):
        if wanted is not None and name not in wanted:
            continue
        if name in STORED_TOPIC_CONFIGS:
            entries.append(_stored_entry(name, overrides))
            continue
        broker_name = TOPIC_CONFIG_NAMES[name]
        synonyms: list[Synonym] = []
        if name in overrides:
            synonyms.append(Synonym(name, effective[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        if broker_name in static:
            synonyms.append(
                Synonym(broker_name, broker_values[name], ConfigSource.STATIC_BROKER_CONFIG)
            )
        synonyms.append(Synonym(broker_name, _DEFAULTS[name], ConfigSource.DEFAULT_CONFIG))
        entries.append(
            ConfigEntry(
                name=name,
                value=effective[name],
                source=synonyms[0].source,
                config_type=topic_config_type(name),
                documentation=_TOPIC_DOCS.get(name, ""),
                synonyms=tuple(synonyms),
            )
        )
    return entries


def broker_settings(config: BrokerConfig) -> dict[str, tuple[str, ConfigType]]:
    """Broker-level name -> (value, type) for every setting the broker runs with."""
    listener = ",".join(f"{s.name}://{s.host}:{s.port}" for s in config.listeners) or (
        f"PLAINTEXT://{config.listen_host}:{config.listen_port}")
    advertised = ",".join(
        f"{s.name}://{s.advertised_host}:{s.advertised_port}" for s in config.listeners
    ) or f"PLAINTEXT://{config.advertised_host}:{config.advertised_port}"
    settings: dict[str, tuple[str, ConfigType]] = {
        "node.id": (str(config.node_id), ConfigType.INT),
        "broker.id": (str(config.node_id), ConfigType.INT),
        "listeners": (listener, ConfigType.LIST),
        "advertised.listeners": (advertised, ConfigType.LIST),
        "log.dirs": (str(config.data_dir), ConfigType.LIST),
        "num.partitions": (str(config.num_partitions), ConfigType.INT),
        "auto.create.topics.enable": (
            "true" if config.auto_create_topics else "false",
            ConfigType.BOOLEAN,
        ),
        "default.replication.factor": (str(config.default_replication_factor), ConfigType.INT),
        "socket.request.max.bytes": (str(config.socket_request_max_bytes), ConfigType.INT),
        "max.connections": (str(config.max_connections), ConfigType.INT),
        "queued.max.requests": (str(config.max_in_flight_per_connection), ConfigType.INT),
        "group.initial.rebalance.delay.ms": (
            str(config.group_initial_rebalance_delay_ms),
            ConfigType.INT,
        ),
        "group.min.session.timeout.ms": (str(config.group_min_session_timeout_ms), ConfigType.INT),
        "group.max.session.timeout.ms": (str(config.group_max_session_timeout_ms), ConfigType.INT),
        "offsets.retention.minutes": (str(config.offsets_retention_minutes), ConfigType.INT),
        "offsets.topic.num.partitions": (str(config.offsets_topic_num_partitions), ConfigType.INT),
        "log.retention.check.interval.ms": (
            str(config.log_retention_check_interval_ms),
            ConfigType.LONG,
        ),
    }
    for topic_name, value in config.log.to_properties().items():
        settings[TOPIC_CONFIG_NAMES[topic_name]] = (value, topic_config_type(topic_name))
    return settings


# Set at start-up whether or not a file names them, as Kafka's server.properties does.
_ALWAYS_STATIC = frozenset(
    {"node.id", "broker.id", "listeners", "advertised.listeners", "log.dirs"}
)


def describe_broker_configs(
    config: BrokerConfig, keys: Iterable[str] | None = None
) -> list[ConfigEntry]:
    """The broker's settings; all read-only (Tidelog has no dynamic broker configs)."""
    static = _static_broker_names(config) | _ALWAYS_STATIC
    wanted = set(keys) if keys is not None else None
    entries = []
    for name, (value, config_type) in sorted(broker_settings(config).items()):
        if wanted is not None and name not in wanted:
            continue
        source = (
            ConfigSource.STATIC_BROKER_CONFIG if name in static else ConfigSource.DEFAULT_CONFIG
        )
        entries.append(
            ConfigEntry(
                name=name,
                value=value,
                source=source,
                config_type=config_type,
                documentation="Broker setting; change it in the config file or with --set.",
                read_only=True,
                synonyms=(Synonym(name, value, source),),
            )
        )
    return entries


def _invalid_config(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, message)


def _check_known(name: str) -> None:
    if name not in TOPIC_CONFIG_NAMES and name not in STORED_TOPIC_CONFIGS:
        raise _invalid_config(f"unknown topic config {name!r}")


def validate_overrides(config: BrokerConfig, overrides: Mapping[str, str | None]) -> dict[str, str]:
    """Check a full set of topic overrides; null values and bad configs -> INVALID_CONFIG."""
    checked: dict[str, str] = {}
    for name, value in overrides.items():
        _check_known(name)
        if value is None:
            raise _invalid_config(f"null value not supported for topic config {name!r}")
        checked[name] = value
    LogConfig.from_properties(checked, base=config.log)
    return checked


def _list_value(config: BrokerConfig, overrides: Mapping[str, str], name: str) -> list[str]:
    stored = STORED_TOPIC_CONFIGS.get(name)
    default = stored.default if stored is not None else config.log.to_properties()[name]
    current = overrides.get(name, default)
    return [item.strip() for item in current.split(",") if item.strip()]


def apply_incremental(
    config: BrokerConfig,
    overrides: Mapping[str, str],
    operations: Iterable[tuple[str, int, str | None]],
) -> dict[str, str]:
    """New overrides after IncrementalAlterConfigs (name, op, value) operations, validated.

    Duplicate names -> INVALID_REQUEST; unknown op -> INVALID_REQUEST; unknown name, APPEND or
    SUBTRACT on a non-list config, or a value LogConfig rejects -> INVALID_CONFIG (Kafka's codes).
    """
    result = dict(overrides)
    seen: set[str] = set()
    for name, op_code, value in operations:
        if name in seen:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"duplicate config key {name!r}")
        seen.add(name)
        _check_known(name)
        try:
            op = AlterOp(op_code)
        except ValueError:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"unknown config operation {op_code}"
            ) from None
        if op is AlterOp.DELETE:
            result.pop(name, None)
            continue
        if value is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"null value not supported for {name!r}")
        if op is AlterOp.SET:
            result[name] = value
            continue
        if topic_config_type(name) is not ConfigType.LIST:
            raise _invalid_config(f"{op.name} is only allowed for list configs, not {name!r}")
        items = _list_value(config, result, name)
        change = [item.strip() for item in value.split(",") if item.strip()]
        if op is AlterOp.APPEND:
            items += [item for item in change if item not in items]
        else:
            items = [item for item in items if item not in change]
        result[name] = ",".join(items)
    LogConfig.from_properties(result, base=config.log)
    return result
