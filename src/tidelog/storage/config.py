"""Per-log configuration under Kafka's own topic-level names.

`LogConfig` is a frozen value; `from_properties` turns a `{"segment.bytes": "1024", ...}` mapping
(CreateTopics, AlterConfigs, IncrementalAlterConfigs) into one, raising
`KafkaError(INVALID_CONFIG)` for an unknown name or an out-of-range value, never a crash.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tidelog.errors import ErrorCode, KafkaError

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

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
}

# topic-level name -> dataclass field
_FIELDS: dict[str, str] = {name: name.replace(".", "_") for name in TOPIC_CONFIG_NAMES}

DURABILITY_MODES = ("pagecache", "sync")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("delete", "compact")
# The timing wheel covers 100 ms x 64^5 (about 3.4 years); a year leaves room.
MAX_DELIVERY_DELAY_MS = 365 * 24 * 3600 * 1000


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
}
