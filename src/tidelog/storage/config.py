"""Per-log configuration under Kafka's own topic-level names.

`LogConfig` is a frozen value; `from_properties` turns a `{"segment.bytes": "1024", ...}` mapping
(CreateTopics, AlterConfigs, IncrementalAlterConfigs) into one, raising
`KafkaError(INVALID_CONFIG)` for an unknown name or an out-of-range value, never a crash.

`STORED_TOPIC_CONFIGS` are the rest of Kafka 4's topic configs: accepted (checked as Kafka
types them), stored with the topic and described, but not acted on (docs/decisions.md says
why for each); `from_properties` checks and skips them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tidelog.errors import ErrorCode, KafkaError

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

# topic-level name -> broker-level name (DescribeConfigs synonyms, server defaults)
TOPIC_CONFIG_NAMES: dict[str, str] = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "durability": "log.durability",
    "cleanup.policy": "log.cleanup.policy",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    # Delayed delivery (docs/delivery.md): Tidelog's own names, the same at both levels.
    "tidelog.delivery.delay.enable": "tidelog.delivery.delay.enable",
    "tidelog.delivery.max.delay.ms": "tidelog.delivery.max.delay.ms",
    "compression.type": "compression.type",
}

# topic-level name -> dataclass field
_FIELDS: dict[str, str] = {name: name.replace(".", "_") for name in TOPIC_CONFIG_NAMES}

DURABILITY_MODES = ("pagecache", "sync")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("delete", "compact")
# The timing wheel covers 100 ms x 64^5 (about 3.4 years); a year leaves room.
MAX_DELIVERY_DELAY_MS = 365 * 24 * 3600 * 1000
# compression.type: `producer` keeps each batch as sent; a codec recompresses on append.
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000  # -1 = forever
    retention_bytes: int = -1  # -1 = unlimited
    flush_messages: int = INT64_MAX
    flush_ms: int = INT64_MAX
    durability: str = "pagecache"
    cleanup_policy: str = "delete"
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0
    min_cleanable_dirty_ratio: float = 0.5
    # Records of such topics are decoded on produce for their timer headers (D16).
    tidelog_delivery_delay_enable: bool = False
    tidelog_delivery_max_delay_ms: int = 7 * 24 * 3600 * 1000
    compression_type: str = "producer"

    def __post_init__(self) -> None:
        for name, field in _FIELDS.items():
            _VALIDATORS[name](name, getattr(self, field))

    @property
    def is_sync(self) -> bool:
        return self.durability == "sync"

    @property
    def deletes(self) -> bool:
        """cleanup.policy contains `delete`: retention applies."""
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compacts(self) -> bool:
        """cleanup.policy contains `compact`: the cleaner keeps the latest record per key."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], base: LogConfig | None = None
    ) -> LogConfig:
        """Topic-level Kafka names -> config; unknown or invalid -> KafkaError(INVALID_CONFIG)."""
        changes: dict[str, object] = {}
        for name, raw in props.items():
            stored = STORED_TOPIC_CONFIGS.get(name)
            if stored is not None:
                stored.check(name, str(raw).strip())
                continue
            field = _FIELDS.get(name)
            if field is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"unknown topic config {name!r}")
            changes[field] = _PARSERS[name](name, str(raw).strip())
        start = base if base is not None else cls()
        try:
            return dataclasses.replace(start, **changes)  # type: ignore[arg-type]
        except TypeError as exc:  # a parser bug would surface here, typed
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from exc

    def to_properties(self) -> dict[str, str]:
        """Every topic-level name -> its value as Kafka prints it."""
        out: dict[str, str] = {}
        for name, field in _FIELDS.items():
            value = getattr(self, field)
            out[name] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return out


def _invalid(name: str, value: object, why: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, f"invalid value {value!r} for {name}: {why}")


def _int_range(low: int, high: int) -> Callable[[str, object], None]:
    def check(name: str, value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _invalid(name, value, "not an integer")
        if not low <= value <= high:
            raise _invalid(name, value, f"must be in [{low}, {high}]")

    return check


def _choice(options: tuple[str, ...]) -> Callable[[str, object], None]:
    def check(name: str, value: object) -> None:
        if value not in options:
            raise _invalid(name, value, f"must be one of {', '.join(options)}")

    return check


def _check_policy(name: str, value: object) -> None:
    if not isinstance(value, str):
        raise _invalid(name, value, "not a string")
    parts = [part.strip() for part in value.split(",")]
    if not parts or any(part not in CLEANUP_POLICIES for part in parts):
        raise _invalid(name, value, "must be delete, compact or compact,delete")


def _check_bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise _invalid(name, value, "must be true or false")


def _check_ratio(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise _invalid(name, value, "must be a number in [0, 1]")


_VALIDATORS: dict[str, Callable[[str, object], None]] = {
    # positions in a segment and its indexes are u32 / int32: Kafka's own limits
    "segment.bytes": _int_range(14, INT32_MAX),
    "segment.ms": _int_range(1, INT64_MAX),
    "segment.index.bytes": _int_range(12, INT32_MAX),
    "index.interval.bytes": _int_range(0, INT32_MAX),
    "retention.ms": _int_range(-1, INT64_MAX),
    "retention.bytes": _int_range(-1, INT64_MAX),
    "flush.messages": _int_range(1, INT64_MAX),
    "flush.ms": _int_range(0, INT64_MAX),
    "durability": _choice(DURABILITY_MODES),
    "cleanup.policy": _check_policy,
    "max.message.bytes": _int_range(0, INT32_MAX),
    "message.timestamp.type": _choice(TIMESTAMP_TYPES),
    "delete.retention.ms": _int_range(0, INT64_MAX),
    "min.compaction.lag.ms": _int_range(0, INT64_MAX),
    "min.cleanable.dirty.ratio": _check_ratio,
    "tidelog.delivery.delay.enable": _check_bool,
    "tidelog.delivery.max.delay.ms": _int_range(1, MAX_DELIVERY_DELAY_MS),
    "compression.type": _choice(COMPRESSION_TYPES),
}


def _parse_int(name: str, raw: str) -> object:
    try:
        return int(raw)
    except ValueError:
        raise _invalid(name, raw, "not an integer") from None


def _parse_float(name: str, raw: str) -> object:
    try:
        return float(raw)
    except ValueError:
        raise _invalid(name, raw, "not a number") from None


def _parse_str(name: str, raw: str) -> object:
    return raw


def _parse_bool(name: str, raw: str) -> object:
    lowered = raw.lower()
    if lowered not in ("true", "false"):
        raise _invalid(name, raw, "must be true or false")
    return lowered == "true"


def _parse_policy(name: str, raw: str) -> object:
    return ",".join(sorted({part.strip() for part in raw.split(",")}))


_INT_PARSERS: dict[str, Callable[[str, str], object]] = {
    name: _parse_int for name in TOPIC_CONFIG_NAMES
}
_PARSERS: dict[str, Callable[[str, str], object]] = _INT_PARSERS | {
    "durability": _parse_str,
    "cleanup.policy": _parse_policy,
    "message.timestamp.type": _parse_str,
    "min.cleanable.dirty.ratio": _parse_float,
    "tidelog.delivery.delay.enable": _parse_bool,
    "compression.type": _parse_str,
}


@dataclass(frozen=True, slots=True)
class StoredConfig:
    """A Kafka topic config Tidelog stores and describes without acting on it."""

    broker_name: str | None  # its broker-level synonym in Kafka, if any
    default: str  # Kafka 4.3's default, as DescribeConfigs prints it
    kind: str  # Kafka's type: boolean, int, long, list, string
    low: int = INT64_MIN  # bounds of an int or long
    choices: tuple[str, ...] = ()  # allowed values of a string

    def check(self, name: str, raw: str) -> None:
        if self.kind == "boolean":
            if raw.lower() not in ("true", "false"):
                raise _invalid(name, raw, "must be true or false")
        elif self.kind in ("int", "long"):
            value = _parse_int(name, raw)
            high = INT32_MAX if self.kind == "int" else INT64_MAX
            _int_range(self.low, high)(name, value)
        elif self.choices and raw not in self.choices:
            raise _invalid(name, raw, f"must be one of {', '.join(self.choices)}")


# Kafka 4.3's topic configs beyond LogConfig's: accepted and described, not acted on.
STORED_TOPIC_CONFIGS: dict[str, StoredConfig] = {
    "compression.gzip.level": StoredConfig("compression.gzip.level", "-1", "int", -1),
    "compression.lz4.level": StoredConfig("compression.lz4.level", "9", "int", 1),
    "compression.zstd.level": StoredConfig("compression.zstd.level", "3", "int", -131072),
    "file.delete.delay.ms": StoredConfig("log.segment.delete.delay.ms", "60000", "long", 0),
    "follower.replication.throttled.replicas": StoredConfig(None, "", "list"),
    "leader.replication.throttled.replicas": StoredConfig(None, "", "list"),
    "local.retention.bytes": StoredConfig("log.local.retention.bytes", "-2", "long", -2),
    "local.retention.ms": StoredConfig("log.local.retention.ms", "-2", "long", -2),
    "max.compaction.lag.ms": StoredConfig(
        "log.cleaner.max.compaction.lag.ms", str(INT64_MAX), "long", 1
    ),
    "message.timestamp.after.max.ms": StoredConfig(
        "log.message.timestamp.after.max.ms", "3600000", "long", 0
    ),
    "message.timestamp.before.max.ms": StoredConfig(
        "log.message.timestamp.before.max.ms", str(INT64_MAX), "long", 0
    ),
    "min.insync.replicas": StoredConfig("min.insync.replicas", "1", "int", 1),
    "preallocate": StoredConfig("log.preallocate", "false", "boolean"),
    "remote.log.copy.disable": StoredConfig(None, "false", "boolean"),
    "remote.log.delete.on.disable": StoredConfig(None, "false", "boolean"),
    "remote.storage.enable": StoredConfig(None, "false", "boolean"),
    "segment.jitter.ms": StoredConfig("log.roll.jitter.ms", "0", "long", 0),
    "unclean.leader.election.enable": StoredConfig(
        "unclean.leader.election.enable", "false", "boolean"
    ),
}
