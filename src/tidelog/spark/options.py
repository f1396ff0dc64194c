"""Options of the `tidelog` data source, parsed the way Spark's Kafka source parses them.

Pure code: strings in, frozen values out; every bad option raises `SourceOptionError` (a typed
`ValueError`) on the driver, before any Spark task starts.

Supported (same names and meaning as Spark's `kafka` format):
  kafka.bootstrap.servers           required
  subscribe | subscribePattern | assign   exactly one
  startingOffsets / endingOffsets   earliest | latest | JSON {"topic":{"0":23,"1":-2}} (-2 earliest,
                                    -1 latest)
  startingTimestamp / endingTimestamp           one timestamp (ms) for every partition
  startingOffsetsByTimestamp / endingOffsetsByTimestamp   JSON {"topic":{"0":1700000000000}}
  startingOffsetsByTimestampStrategy            error (default) | latest
  maxOffsetsPerTrigger, minPartitions, failOnDataLoss, includeHeaders
  kafkaConsumer.pollTimeoutMs       how long an executor waits for a fetch before failing
  kafka.*                           any other librdkafka setting, passed through unprefixed
Tidelog-only: `archive.path` (read archived offsets from Parquet, see `archive.py`),
`commitOffsetsToGroup` (streaming: after each batch, commit its end offsets to this consumer
group so group tools show the query's lag), `topic` (sink default topic) and `directFetch`
(default true: executors read ranges over a direct Fetch connection decoded natively into Arrow;
false, or any `kafka.security.protocol` other than plaintext, reads through librdkafka).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

EARLIEST = -2
LATEST = -1

# Spark's Kafka source refuses these client settings because the source manages them itself.
_UNSUPPORTED_KAFKA_KEYS = frozenset(
    {"group.id", "auto.offset.reset", "enable.auto.commit", "key.deserializer",
     "value.deserializer", "key.serializer", "value.serializer"}
)


class _Options(dict[str, str]):
    """Option names are case-insensitive in Spark (the data source sees them lower-cased)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__({str(k).lower(): str(v) for k, v in options.items()})

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(key.lower(), default)

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(key.lower())


class SourceOptionError(ValueError):
    """An option of the tidelog data source is missing, malformed or not allowed here."""


@dataclass(frozen=True, slots=True)
class Subscription:
    """Which partitions to read: `kind` is subscribe, subscribePattern or assign."""

    kind: str
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """One end of a range: `kind` is earliest, latest, offsets, timestamp or timestamps.

    `offsets` maps (topic, partition) to an offset (or -2/-1); `timestamps` maps (topic,
    partition) to a timestamp in ms; `timestamp_ms` applies to every partition."""

    kind: str
    offsets: Mapping[tuple[str, int], int] = field(default_factory=dict)
    timestamps: Mapping[tuple[str, int], int] = field(default_factory=dict)
    timestamp_ms: int = 0


@dataclass(frozen=True, slots=True)
class SourceOptions:
    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    timestamp_strategy_latest: bool
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    archive_path: str | None
    kafka_config: Mapping[str, str]
    commit_group: str | None = None
    direct_fetch: bool = True


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise SourceOptionError(f"option {name} must be true or false, got {raw!r}")


def _positive_int(options: Mapping[str, str], name: str) -> int | None:
    raw = options.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise SourceOptionError(f"option {name} must be an integer, got {raw!r}") from None
    if value <= 0:
        raise SourceOptionError(f"option {name} must be positive, got {value}")
    return value


def _partition_json(raw: str, name: str) -> dict[tuple[str, int], int]:
    """Parse {"topic":{"0":23}} into {(topic, 0): 23}."""
    try:
        document = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SourceOptionError(f"option {name} is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise SourceOptionError(f"option {name} must be a JSON object of topics")
    result: dict[tuple[str, int], int] = {}
    for topic, partitions in document.items():
        if not isinstance(partitions, dict):
            raise SourceOptionError(f"option {name}: topic {topic!r} must map to an object")
        for partition, value in partitions.items():
            try:
                index = int(partition)
            except ValueError:
                raise SourceOptionError(f"option {name}: bad partition {partition!r}") from None
            if not isinstance(value, int) or isinstance(value, bool):
                raise SourceOptionError(f"option {name}: {topic}/{partition} must be an integer")
            result[(str(topic), index)] = value
    return result


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    options = _Options(options)
    given = [k for k in ("subscribe", "subscribePattern", "assign") if options.get(k)]
    if len(given) != 1:
        raise SourceOptionError(
            "exactly one of subscribe, subscribePattern, assign is required, got "
            + (", ".join(given) or "none")
        )
    kind = given[0]
    raw = options[kind]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise SourceOptionError("option subscribe names no topic")
        return Subscription(kind, topics=topics)
    if kind == "subscribePattern":
        try:
            re.compile(raw)
        except re.error as exc:
            raise SourceOptionError(f"option subscribePattern is not a regex: {exc}") from None
        return Subscription(kind, pattern=raw)
    try:
        document = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SourceOptionError(f"option assign is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise SourceOptionError('option assign must look like {"topic":[0,1]}')
    assigned: list[tuple[str, int]] = []
    for topic, partitions in document.items():
        if not isinstance(partitions, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) for p in partitions
        ):
            raise SourceOptionError(f"option assign: topic {topic!r} needs a list of partitions")
        assigned.extend((str(topic), p) for p in partitions)
    return Subscription(kind, assigned=tuple(sorted(assigned)))


def parse_offset_spec(options: Mapping[str, str], side: str, default: str) -> OffsetSpec:
    """`side` is "starting" or "ending". Spark's precedence: a global timestamp, then
    per-partition timestamps, then offsets."""
    raw_ts = options.get(f"{side}Timestamp")
    if raw_ts is not None:
        try:
            return OffsetSpec("timestamp", timestamp_ms=int(raw_ts))
        except ValueError:
            raise SourceOptionError(f"option {side}Timestamp must be ms, got {raw_ts!r}") from None
    raw_by_ts = options.get(f"{side}OffsetsByTimestamp")
    if raw_by_ts is not None:
        by_time = _partition_json(raw_by_ts, f"{side}OffsetsByTimestamp")
        return OffsetSpec("timestamps", timestamps=by_time)
    raw = options.get(f"{side}Offsets", default).strip()
    if raw.lower() in ("earliest", "latest"):
        return OffsetSpec(raw.lower())
    offsets = _partition_json(raw, f"{side}Offsets")
    for (topic, partition), value in offsets.items():
        if value < EARLIEST:
            raise SourceOptionError(f"option {side}Offsets: {topic}/{partition} = {value} < -2")
    return OffsetSpec("offsets", offsets=offsets)


def kafka_config(options: Mapping[str, str]) -> dict[str, str]:
    """Every `kafka.*` option, unprefixed, for confluent_kafka."""
    config: dict[str, str] = {}
    for key, value in options.items():
        if not key.lower().startswith("kafka."):
            continue
        # librdkafka names are lower case with dots, so lower-casing loses nothing.
        name = key[len("kafka."):].lower()
        if name in _UNSUPPORTED_KAFKA_KEYS:
            raise SourceOptionError(f"option kafka.{name} is not supported: the source manages it")
        config[name] = value
    if "bootstrap.servers" not in config:
        raise SourceOptionError("option kafka.bootstrap.servers is required")
    return config


def parse_source_options(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    """Validate options for a batch (`streaming=False`) or streaming read."""
    lowered = _Options(options)
    config = kafka_config(lowered)
    starting = parse_offset_spec(lowered, "starting", "latest" if streaming else "earliest")
    if streaming:
        if any(k in lowered for k in ("endingOffsets", "endingTimestamp",
                                       "endingOffsetsByTimestamp")):
            raise SourceOptionError("ending offsets are not allowed in a streaming query")
        ending = OffsetSpec("latest")
    else:
        ending = parse_offset_spec(lowered, "ending", "latest")
        if starting.kind == "latest":
            raise SourceOptionError("startingOffsets=latest is not allowed in a batch query")
        if ending.kind == "earliest":
            raise SourceOptionError("endingOffsets=earliest is not allowed in a batch query")
        if starting.kind == "offsets" and LATEST in starting.offsets.values():
            raise SourceOptionError("startingOffsets -1 (latest) is not allowed in a batch query")
        if ending.kind == "offsets" and EARLIEST in ending.offsets.values():
            raise SourceOptionError("endingOffsets -2 (earliest) is not allowed in a batch query")
    strategy = lowered.get("startingOffsetsByTimestampStrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise SourceOptionError("startingOffsetsByTimestampStrategy must be error or latest")
    poll_timeout = _positive_int(lowered, "kafkaConsumer.pollTimeoutMs") or 120_000
    return SourceOptions(
        bootstrap_servers=config["bootstrap.servers"],
        subscription=parse_subscription(lowered),
        starting=starting,
        ending=ending,
        timestamp_strategy_latest=strategy == "latest",
        max_offsets_per_trigger=_positive_int(lowered, "maxOffsetsPerTrigger"),
        min_partitions=_positive_int(lowered, "minPartitions"),
        fail_on_data_loss=_bool(lowered, "failOnDataLoss", True),
        include_headers=_bool(lowered, "includeHeaders", False),
        poll_timeout_ms=poll_timeout,
        archive_path=lowered.get("archive.path"),
        kafka_config=config,
        commit_group=lowered.get("commitOffsetsToGroup") or None,
        direct_fetch=_bool(lowered, "directFetch", True),
    )
