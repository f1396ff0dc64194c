"""Broker configuration: Kafka's own setting names, from a TOML file, `--set` and the CLI.

Precedence (later wins): built-in defaults < TOML file < `--set key=value` < explicit CLI options
(`--data-dir`, `--listen`, `--advertise`, `--node-id`). Every accepted name is a Kafka broker
setting name (`num.partitions`, `log.segment.bytes`, ...) plus Tidelog's `log.durability`.
An unknown name is a `ConfigError` naming it; the CLI turns that into exit status 2.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tidelog.broker.listener_config import (
    ListenerConfigError,
    ListenerSpec,
    SecurityProtocol,
    build_listeners,
    is_security_setting,
)
from tidelog.errors import KafkaError, TidelogError
from tidelog.security.principal import KafkaPrincipal, PrincipalError
from tidelog.security.scram_bootstrap import parse_bootstrap_users
from tidelog.security.scram_credentials import CredentialStoreError
from tidelog.storage.config import TOPIC_CONFIG_NAMES, LogConfig


class ConfigError(TidelogError):
    """A setting is unknown or its value is invalid; the message names the setting."""


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    node_id: int = 0
    listen_host: str = "127.0.0.1"
    listen_port: int = 9092
    advertised_host: str = "127.0.0.1"
    advertised_port: int = 9092
    data_dir: Path = Path("tidelog-data")
    num_partitions: int = 1  # num.partitions
    auto_create_topics: bool = True  # auto.create.topics.enable
    default_replication_factor: int = 1  # default.replication.factor
    socket_request_max_bytes: int = 100 * 1024 * 1024  # socket.request.max.bytes
    max_connections: int = 1000  # max.connections
    # Each partition holds ~3 open files (log, index, time index of its active segment) plus
    # one per sealed segment; 4000 partitions and 1000 connections fit the usual 20,000-file
    # limit. (The name is KIP-578's.)
    max_broker_partitions: int = 4000  # max.broker.partitions
    connections_max_idle_ms: int = 600_000  # connections.max.idle.ms
    max_in_flight_per_connection: int = 100  # queued.max.requests (per connection here)
    group_initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    group_min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    group_max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    offsets_retention_minutes: int = 10080  # offsets.retention.minutes
    offsets_topic_num_partitions: int = 1  # offsets.topic.num.partitions
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    group_consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    group_consumer_heartbeat_interval_ms: int = 5000  # group.consumer.heartbeat.interval.ms
    group_consumer_migration_policy: str = "bidirectional"  # group.consumer.migration.policy
    # Transactions (Kafka's names; Kafka's default of 50 partitions is kept at 1 here, as
    # for offsets.topic.num.partitions: a single node gains nothing from more).
    transaction_state_log_num_partitions: int = 1  # transaction.state.log.num.partitions
    transaction_max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    # Cluster mode: __transaction_state's replication factor (capped at the live brokers
    # when it is created) and its min.insync.replicas, Kafka's defaults.
    transaction_state_log_replication_factor: int = 3  # transaction.state.log.replication.factor
    transaction_state_log_min_isr: int = 2  # transaction.state.log.min.isr
    # Cluster mode: the share coordinator's __share_group_state (Kafka's names and defaults;
    # a single node keeps one partition).
    share_coordinator_state_topic_num_partitions: int = 50
    share_coordinator_state_topic_replication_factor: int = 3
    share_coordinator_state_topic_min_isr: int = 2
    # Cluster mode: delayed delivery's `__tidelog_timer` (docs/delivery.md), named after
    # Kafka's settings for its own internal topics; the factor is capped at the live brokers.
    tidelog_timer_log_num_partitions: int = 1  # tidelog.timer.log.num.partitions
    tidelog_timer_log_replication_factor: int = 3  # tidelog.timer.log.replication.factor
    tidelog_timer_log_min_isr: int = 2  # tidelog.timer.log.min.isr
    # transaction.abort.timed.out.transaction.cleanup.interval.ms
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transactional_id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    # transactions.remove.expired.transaction.cleanup.interval.ms
    transactions_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    # Share groups (KIP-932; Kafka's names and defaults).
    group_share_record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    group_share_min_record_lock_duration_ms: int = 15_000
    group_share_max_record_lock_duration_ms: int = 60_000
    group_share_delivery_count_limit: int = 5  # group.share.delivery.count.limit
    group_share_partition_max_record_locks: int = 2000  # group.share.partition.max.record.locks
    group_share_heartbeat_interval_ms: int = 5000  # group.share.heartbeat.interval.ms
    group_share_session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    # bounds of the group configs share.session.timeout.ms / share.heartbeat.interval.ms
    group_share_min_session_timeout_ms: int = 45_000
    group_share_max_session_timeout_ms: int = 60_000
    group_share_min_heartbeat_interval_ms: int = 5000
    group_share_max_heartbeat_interval_ms: int = 15_000
    # KIP-1191 dead-letter topics of share groups.
    errors_deadletterqueue_topic_name_prefix: str = "dlq."
    errors_deadletterqueue_auto_create_topics_enable: bool = False
    # Fetch sessions (KIP-227): slots in the cache (0: none), and the idle time after which
    # a session may be evicted (Kafka's constant; KIP-227's name, so a test can shorten it).
    max_incremental_fetch_session_cache_slots: int = 1000
    min_incremental_fetch_session_eviction_ms: int = 120_000
    log_tick_interval_ms: int = 1000  # how often LogManager.tick runs (flush.ms, cleaner)
    log_retention_check_interval_ms: int = 300_000  # log.retention.check.interval.ms
    # Idle producers forgotten from every partition's producer state (Kafka's names/defaults).
    producer_id_expiration_ms: int = 86_400_000  # producer.id.expiration.ms
    # producer.id.expiration.check.interval.ms
    producer_id_expiration_check_interval_ms: int = 600_000
    log_cleaner_backoff_ms: int = 15_000  # log.cleaner.backoff.ms: idle cleaner's next look
    log: LogConfig = field(default_factory=LogConfig)  # broker-level log.* defaults
    # authorizer.class.name: any non-empty value (Kafka's class names included) turns the ACL
    # authorizer on; Tidelog has one authorizer, so the class named is not loaded.
    authorizer_class_name: str = ""
    super_users: frozenset[str] = frozenset()  # super.users=User:admin;User:ops
    allow_everyone_if_no_acl_found: bool = False  # allow.everyone.if.no.acl.found
    # SCRAM users added at start when absent (KIP-900's --add-scram syntax; security/
    # scram_bootstrap.py)
    scram_bootstrap_users: str = ""
    quota_window_num: int = 11  # quota.window.num (samples of the client quota rates)
    quota_window_size_seconds: int = 1  # quota.window.size.seconds
    telemetry_max_bytes: int = 1_048_576  # telemetry.max.bytes (KIP-714 PushTelemetry)
    # Every listener, the first one first; listen_*/advertised_* above mirror the first one.
    # Security settings stay in `raw` (read per listener: listener_config.listener_setting).
    listeners: tuple[ListenerSpec, ...] = ()
    inter_broker_listener_name: str | None = None  # inter.broker.listener.name (kept)
    raw: Mapping[str, str] = field(default_factory=dict)  # every Kafka-named setting given

    @property
    def authorizer_enabled(self) -> bool:
        return bool(self.authorizer_class_name)


def _parse_bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ConfigError(f"{name}: expected true or false, got {value!r}")


def _parse_super_users(name: str, value: str) -> frozenset[str]:
    """`User:admin;User:ops` (Kafka separates with ';': a principal name may hold ',')."""
    users: set[str] = set()
    for item in value.split(";"):
        principal = item.strip()
        if not principal:
            continue
        try:
            users.add(str(KafkaPrincipal.parse(principal)))
        except PrincipalError as error:
            raise ConfigError(f"{name}: {error}") from None
    return frozenset(users)


def _parse_str(name: str, value: str) -> str:
    return value.strip()


def _parse_migration_policy(name: str, value: str) -> str:
    """Kafka's ConsumerGroupMigrationPolicy names, case-insensitive."""
    policy = value.strip().lower()
    if policy not in ("bidirectional", "upgrade", "downgrade", "disabled"):
        raise ConfigError(
            f"{name}: expected bidirectional, upgrade, downgrade or disabled, got {value!r}"
        )
    return policy


def _parse_int(name: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ConfigError(f"{name}: expected an integer, got {value!r}") from None


# Kafka broker name -> (BrokerConfig field, parser).
_BROKER_SETTINGS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "node.id": ("node_id", _parse_int),
    "broker.id": ("node_id", _parse_int),
    "num.partitions": ("num_partitions", _parse_int),
    "auto.create.topics.enable": ("auto_create_topics", _parse_bool),
    "default.replication.factor": ("default_replication_factor", _parse_int),
    "socket.request.max.bytes": ("socket_request_max_bytes", _parse_int),
    "max.connections": ("max_connections", _parse_int),
    "max.broker.partitions": ("max_broker_partitions", _parse_int),
    "connections.max.idle.ms": ("connections_max_idle_ms", _parse_int),
    "queued.max.requests": ("max_in_flight_per_connection", _parse_int),
    "group.initial.rebalance.delay.ms": ("group_initial_rebalance_delay_ms", _parse_int),
    "group.min.session.timeout.ms": ("group_min_session_timeout_ms", _parse_int),
    "group.max.session.timeout.ms": ("group_max_session_timeout_ms", _parse_int),
    "offsets.retention.minutes": ("offsets_retention_minutes", _parse_int),
    "offsets.topic.num.partitions": ("offsets_topic_num_partitions", _parse_int),
    "offsets.retention.check.interval.ms": ("offsets_retention_check_interval_ms", _parse_int),
    "group.consumer.session.timeout.ms": ("group_consumer_session_timeout_ms", _parse_int),
    "group.consumer.heartbeat.interval.ms": ("group_consumer_heartbeat_interval_ms", _parse_int),
    "group.consumer.migration.policy": ("group_consumer_migration_policy", _parse_migration_policy),
    "log.retention.check.interval.ms": ("log_retention_check_interval_ms", _parse_int),
    "max.incremental.fetch.session.cache.slots": (
        "max_incremental_fetch_session_cache_slots", _parse_int
    ),
    "min.incremental.fetch.session.eviction.ms": (
        "min_incremental_fetch_session_eviction_ms", _parse_int
    ),
    "authorizer.class.name": ("authorizer_class_name", _parse_str),
    "tidelog.scram.bootstrap.users": ("scram_bootstrap_users", _parse_str),
    "super.users": ("super_users", _parse_super_users),
    "allow.everyone.if.no.acl.found": ("allow_everyone_if_no_acl_found", _parse_bool),
    "group.share.record.lock.duration.ms": ("group_share_record_lock_duration_ms", _parse_int),
    "group.share.min.record.lock.duration.ms": (
        "group_share_min_record_lock_duration_ms", _parse_int
    ),
    "group.share.max.record.lock.duration.ms": (
        "group_share_max_record_lock_duration_ms", _parse_int
    ),
    "group.share.delivery.count.limit": ("group_share_delivery_count_limit", _parse_int),
    "group.share.partition.max.record.locks": (
        "group_share_partition_max_record_locks", _parse_int
    ),
    "group.share.heartbeat.interval.ms": ("group_share_heartbeat_interval_ms", _parse_int),
    "group.share.session.timeout.ms": ("group_share_session_timeout_ms", _parse_int),
    "group.share.min.session.timeout.ms": ("group_share_min_session_timeout_ms", _parse_int),
    "group.share.max.session.timeout.ms": ("group_share_max_session_timeout_ms", _parse_int),
    "group.share.min.heartbeat.interval.ms": (
        "group_share_min_heartbeat_interval_ms", _parse_int
    ),
    "group.share.max.heartbeat.interval.ms": (
        "group_share_max_heartbeat_interval_ms", _parse_int
    ),
    "errors.deadletterqueue.topic.name.prefix": (
        "errors_deadletterqueue_topic_name_prefix", _parse_str
    ),
    "errors.deadletterqueue.auto.create.topics.enable": (
        "errors_deadletterqueue_auto_create_topics_enable", _parse_bool
    ),
    "quota.window.num": ("quota_window_num", _parse_int),
    "quota.window.size.seconds": ("quota_window_size_seconds", _parse_int),
    "telemetry.max.bytes": ("telemetry_max_bytes", _parse_int),
    "transaction.state.log.num.partitions": (
        "transaction_state_log_num_partitions", _parse_int
    ),
    "transaction.max.timeout.ms": ("transaction_max_timeout_ms", _parse_int),
    "transaction.state.log.replication.factor": (
        "transaction_state_log_replication_factor", _parse_int
    ),
    "transaction.state.log.min.isr": ("transaction_state_log_min_isr", _parse_int),
    "share.coordinator.state.topic.num.partitions": (
        "share_coordinator_state_topic_num_partitions", _parse_int
    ),
    "share.coordinator.state.topic.replication.factor": (
        "share_coordinator_state_topic_replication_factor", _parse_int
    ),
    "share.coordinator.state.topic.min.isr": (
        "share_coordinator_state_topic_min_isr", _parse_int
    ),
    "tidelog.timer.log.num.partitions": ("tidelog_timer_log_num_partitions", _parse_int),
    "tidelog.timer.log.replication.factor": (
        "tidelog_timer_log_replication_factor", _parse_int
    ),
    "tidelog.timer.log.min.isr": ("tidelog_timer_log_min_isr", _parse_int),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (
        "transaction_abort_timed_out_transaction_cleanup_interval_ms", _parse_int
    ),
    "transactional.id.expiration.ms": ("transactional_id_expiration_ms", _parse_int),
    "producer.id.expiration.ms": ("producer_id_expiration_ms", _parse_int),
    "producer.id.expiration.check.interval.ms": (
        "producer_id_expiration_check_interval_ms", _parse_int
    ),
    "log.cleaner.backoff.ms": ("log_cleaner_backoff_ms", _parse_int),
    "transactions.remove.expired.transaction.cleanup.interval.ms": (
        "transactions_remove_expired_transaction_cleanup_interval_ms", _parse_int
    ),
}

# Kafka's coarser spellings of some log settings, converted to the millisecond name.
_UNIT_ALIASES: dict[str, tuple[str, int]] = {
    "log.retention.hours": ("log.retention.ms", 3_600_000),
    "log.retention.minutes": ("log.retention.ms", 60_000),
    "log.roll.hours": ("log.roll.ms", 3_600_000),
}
# The precise name wins over the coarse one, as in Kafka.
_ALIAS_PRIORITY = {"log.retention.hours": 0, "log.retention.minutes": 1}


def _broker_log_names() -> dict[str, str]:
    """Broker-level log setting name -> topic-level name."""
    return {broker: topic for topic, broker in TOPIC_CONFIG_NAMES.items()}


def known_settings() -> list[str]:
    """Every setting name `load_config` accepts (for `--help` and error messages)."""
    names = set(_BROKER_SETTINGS) | set(_broker_log_names()) | set(_UNIT_ALIASES)
    return sorted(names | {"log.dirs", "log.dir"})


def advertised_endpoint(config: BrokerConfig, listener_name: str) -> tuple[str, int]:
    """Where a client that came in on `listener_name` dials this broker (Kafka answers
    Metadata with the endpoints of the request's listener)."""
    for spec in config.listeners:
        if spec.name == listener_name:
            return spec.advertised_host, spec.advertised_port
    return config.advertised_host, config.advertised_port


def _toml_settings(path: Path) -> dict[str, str]:
    try:
        with path.open("rb") as stream:
            document = tomllib.load(stream)
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {path}: {error}") from None
    settings: dict[str, str] = {}

    def flatten(prefix: str, table: Mapping[str, Any]) -> None:
        for key, value in table.items():
            name = f"{prefix}{key}"
            if isinstance(value, dict):
                flatten(f"{name}.", value)
            elif isinstance(value, bool):
                settings[name] = "true" if value else "false"
            else:
                settings[name] = str(value)

    flatten("", document)
    return settings


def _split_host_port(option: str, value: str) -> tuple[str, int]:
    host, separator, port = value.rpartition(":")
    if not separator or not host:
        raise ConfigError(f"{option}: expected HOST:PORT, got {value!r}")
    port_number = _parse_int(option, port)
    if not 0 <= port_number <= 65535:
        raise ConfigError(f"{option}: port {port_number} out of range")
    return host.strip("[]"), port_number


def load_config(
    toml_path: Path | None,
    overrides: Mapping[str, str],
    *,
    data_dir: Path | None = None,
    listen: str | None = None,
    advertise: str | None = None,
    node_id: int | None = None,
) -> BrokerConfig:
    """Build the broker config; unknown or invalid settings raise ConfigError naming the key."""
    raw: dict[str, str] = {}
    if toml_path is not None:
        raw.update(_toml_settings(toml_path))
    raw.update(overrides)

    log_names = _broker_log_names()
    values: dict[str, Any] = {}
    topic_props: dict[str, str] = {}
    for name in sorted(raw, key=lambda key: _ALIAS_PRIORITY.get(key, 9)):
        value = raw[name]
        if name in _BROKER_SETTINGS:
            field_name, parse = _BROKER_SETTINGS[name]
            values[field_name] = parse(name, value)
        elif name in ("log.dirs", "log.dir"):
            values["data_dir"] = Path(value.split(",")[0])
        elif name in _UNIT_ALIASES:
            target, factor = _UNIT_ALIASES[name]
            if target not in raw:
                topic_props[log_names[target]] = str(_parse_int(name, value) * factor)
        elif name in log_names:
            topic_props[log_names[name]] = value
        elif is_security_setting(name):
            pass  # read per listener from `raw` (listener_config.listener_setting)
        else:
            raise ConfigError(f"unknown setting {name!r} (known: {', '.join(known_settings())})")
    try:
        values["log"] = LogConfig.from_properties(topic_props)
    except KafkaError as error:
        raise ConfigError(f"invalid log setting: {error.message or error}") from None

    config = BrokerConfig(raw=dict(raw), **values)
    if data_dir is not None:
        config = replace(config, data_dir=data_dir)
    if node_id is not None:
        config = replace(config, node_id=node_id)
    if listen is not None:
        if "listeners" in raw:
            raise ConfigError("give either --listen (a PLAINTEXT listener) or listeners, not both")
        host, port = _split_host_port("--listen", listen)
        config = replace(config, listen_host=host, listen_port=port)
    config = _with_listeners(config, raw, advertise)
    _check(config)
    return config


def _with_listeners(config: BrokerConfig, raw: Mapping[str, str], advertise: str | None
                    ) -> BrokerConfig:
    """`listeners` (or the PLAINTEXT shorthand of --listen / the default) -> ListenerSpecs;
    listen_*/advertised_* take the first listener's addresses. --advertise overrides the first
    listener's advertised address."""
    try:
        if "listeners" in raw:
            specs = list(build_listeners(
                raw["listeners"], raw.get("advertised.listeners"),
                raw.get("listener.security.protocol.map"), _advertisable(""),
            ))
        else:
            specs = [ListenerSpec(
                "PLAINTEXT", SecurityProtocol.PLAINTEXT, config.listen_host, config.listen_port,
                _advertisable(config.listen_host), config.listen_port,
            )]
            if "advertised.listeners" in raw:
                specs = list(build_listeners(
                    f"PLAINTEXT://{config.listen_host}:{config.listen_port}",
                    raw["advertised.listeners"], raw.get("listener.security.protocol.map"),
                    _advertisable(config.listen_host),
                ))
    except ListenerConfigError as error:
        raise ConfigError(str(error)) from None
    if advertise is not None:
        host, port = _split_host_port("--advertise", advertise)
        specs[0] = replace(specs[0], advertised_host=host, advertised_port=port)
    inter_broker = raw.get("inter.broker.listener.name")
    protocol = raw.get("security.inter.broker.protocol")
    if inter_broker is not None and protocol is not None:
        raise ConfigError("set inter.broker.listener.name or security.inter.broker.protocol,"
                          " not both (Kafka refuses both too)")
    setting = "inter.broker.listener.name" if inter_broker else "security.inter.broker.protocol"
    inter_broker = inter_broker or protocol  # a protocol names its listener (Kafka's rule)
    if inter_broker is not None and inter_broker.upper() not in {s.name for s in specs}:
        raise ConfigError(f"{setting}: {inter_broker} is not a listener")
    first = specs[0]
    return replace(
        config,
        listeners=tuple(specs),
        listen_host=first.host,
        listen_port=first.port,
        advertised_host=first.advertised_host,
        advertised_port=first.advertised_port,
        inter_broker_listener_name=inter_broker.upper() if inter_broker else None,
    )


def _advertisable(host: str) -> str:
    # A wildcard listener cannot be dialled; clients get loopback unless --advertise says more.
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


def _check(config: BrokerConfig) -> None:
    if config.num_partitions < 1:
        raise ConfigError("num.partitions must be at least 1")
    if config.socket_request_max_bytes < 1024:
        raise ConfigError("socket.request.max.bytes must be at least 1024")
    if config.max_connections < 1:
        raise ConfigError("max.connections must be at least 1")
    if not 1 <= config.telemetry_max_bytes <= 64 * 1024 * 1024:
        raise ConfigError("telemetry.max.bytes must be between 1 and 67108864")
    if config.max_incremental_fetch_session_cache_slots < 0:
        raise ConfigError("max.incremental.fetch.session.cache.slots must be at least 0")
    if config.max_in_flight_per_connection < 1:
        raise ConfigError("queued.max.requests must be at least 1")
    if config.node_id < 0:
        raise ConfigError("node.id must not be negative")
    try:
        parse_bootstrap_users(config.scram_bootstrap_users)
    except CredentialStoreError as error:
        raise ConfigError(str(error)) from None
    if config.quota_window_num < 1 or config.quota_window_size_seconds < 1:
        raise ConfigError("quota.window.num and quota.window.size.seconds must be at least 1")
