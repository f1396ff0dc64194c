"""Client metrics subscriptions and client instances (KIP-714), as a pure state machine.

Kafka's ClientMetricsManager, without threads or clocks (every call takes `now_ms`):

- A *subscription* is a CLIENT_METRICS config resource (IncrementalAlterConfigs resource type
  16) with three configs: `metrics` (metric name prefixes; `*` for all), `interval.ms` (push
  interval, 100 .. 3,600,000, default 300,000) and `match` (`param=regex` pairs over
  `client_instance_id`, `client_id`, `client_software_name`, `client_software_version`,
  `client_source_address`, `client_source_port`; every pair must match the whole value; no
  pairs matches every client).
- A *client instance* is what GetTelemetrySubscriptions creates for a client instance id: the
  union of the metrics of every matching subscription, the smallest of their intervals, and a
  subscription id derived from both (CRC32C, as Kafka). Any subscription change bumps a version;
  an instance older than it is re-evaluated on its next request (and its timers restart).
- Push interval enforcement (Kafka's `maybeUpdateGetRequestTimestamp` /
  `maybeUpdatePushRequestTimestamp`): a Get earlier than `interval` after the last Get or Push
  answers THROTTLING_QUOTA_EXCEEDED unless the last error was UNKNOWN_SUBSCRIPTION_ID or
  UNSUPPORTED_COMPRESSION_TYPE (the client must re-subscribe at once then); the first Push after
  a Get is always on time (clients jitter the interval by +-50%), later ones need `interval`.
- Instances are bounded (LRU, Kafka's 16,384) and expire `max(60 s, 3 * interval)` after their
  last request (Kafka also drops them when their connection closes).
"""

from __future__ import annotations

import re
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from tidelog.errors import ErrorCode, KafkaError
from tidelog.records.batch import crc32c

METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"
CONFIG_NAMES = (METRICS, INTERVAL_MS, MATCH)
ALL_METRICS = "*"
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3_600_000
MATCH_PARAMS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)
CACHE_MAX_SIZE = 16_384  # client instances per broker (Kafka's)
CACHE_EXPIRY_MS = 60_000
MAX_SUBSCRIPTIONS = 1_024  # CLIENT_METRICS resources (Tidelog's bound)
MAX_CONFIG_VALUE_CHARS = 32_768
# Codecs a PushTelemetry may use, in Kafka's order of preference (zstd, lz4, gzip, snappy).
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)
KNOWN_COMPRESSION_TYPES = (0, 1, 2, 3, 4)

# IncrementalAlterConfigs operations
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def parse_list(value: str | None) -> list[str]:
    """Kafka's ConfigDef LIST: comma separated, trimmed; "" is the empty list."""
    if value is None or not value.strip():
        return []
    return [item.strip() for item in value.split(",")]


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, attributes: Mapping[str, str | None]) -> bool:
        for param, pattern in self.match:
            value = attributes.get(param)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


def _match_patterns(patterns: list[str]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    parsed: dict[str, re.Pattern[str]] = {}
    for pattern in patterns:
        pair = pattern.split("=")
        param = pair[0].strip()
        if len(pair) != 2 or param not in MATCH_PARAMS:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}"
            )
        try:
            parsed[param] = re.compile(pair[1].strip())
        except re.error:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}"
            ) from None
    return tuple(sorted(parsed.items()))


def parse_subscription(name: str, configs: Mapping[str, str]) -> Subscription:
    """Validate a subscription's configs as Kafka's ClientMetricsConfigs.validate does."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key, value in configs.items():
        if key not in CONFIG_NAMES:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}"
            )
        if len(value) > MAX_CONFIG_VALUE_CHARS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{key}: value too long")
    interval_ms = DEFAULT_INTERVAL_MS
    if INTERVAL_MS in configs:
        try:
            interval_ms = int(configs[INTERVAL_MS].strip())
        except ValueError:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {configs[INTERVAL_MS]} for configuration {INTERVAL_MS}: "
                "Not a number of type INT",
            ) from None
        if not MIN_INTERVAL_MS <= interval_ms <= MAX_INTERVAL_MS:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Invalid value {interval_ms} for {INTERVAL_MS}, interval must be between 100 "
                "and 3600000 (1 hour)",
            )
    return Subscription(
        name,
        frozenset(parse_list(configs.get(METRICS))),
        interval_ms,
        _match_patterns(parse_list(configs.get(MATCH))),
    )


def apply_incremental(
    current: Mapping[str, str], operations: Iterable[tuple[str, int, str | None]]
) -> dict[str, str]:
    """IncrementalAlterConfigs on one subscription's configs (SET, DELETE; APPEND and
    SUBTRACT are refused as Kafka 4.3.1 refuses them)."""
    configs = dict(current)
    for name, operation, value in operations:
        if name not in CONFIG_NAMES:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {name}"
            )
        if operation == SET:
            if value is None:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for {name}")
            configs[name] = value
        elif operation == DELETE:
            configs.pop(name, None)
        elif operation in (APPEND, SUBTRACT):
            # Kafka 4.3.1 refuses both on every client-metrics config (its controller knows
            # no LIST type for them), though `metrics` and `match` are lists.
            verb = "APPEND" if operation == APPEND else "SUBTRACT"
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"Can't {verb} to key {name} because its type is not LIST.",
            )
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown operation {operation}")
    return configs


def subscription_id(metrics: Iterable[str], interval_ms: int, instance_id: uuid.UUID) -> int:
    """An int32 that changes when the client's metrics or interval do (Kafka hashes the same
    inputs; the value is opaque to clients)."""
    text = "[" + ", ".join(sorted(metrics)) + "]" + str(interval_ms)
    crc = crc32c(text.encode("utf-8"))
    value = (crc ^ (instance_id.int & 0xFFFFFFFF) ^ (instance_id.int >> 96)) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


@dataclass(slots=True)
class ClientInstance:
    """One client instance id's subscription and its push timing."""

    instance_id: uuid.UUID
    attributes: dict[str, str | None]
    subscription_id: int
    subscription_version: int
    metrics: tuple[str, ...]  # ("",) when every metric is wanted (the protocol's way)
    interval_ms: int
    last_get_ms: int = 0
    last_push_ms: int = 0
    last_used_ms: int = 0
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.NONE

    # Kafka decides "a Get came after the last accepted Push" by comparing the two
    # timestamps (lastGet > lastPush), which fails when both fall in one millisecond; a flag
    # says the same thing whatever the clock's resolution.
    get_since_push: bool = False

    def get_on_time(self, now_ms: int) -> bool:
        if now_ms - max(self.last_get_ms, self.last_push_ms) >= self.interval_ms:
            self.last_get_ms = now_ms
            return True
        return False

    def push_on_time(self, now_ms: int) -> bool:
        on_time = self.get_since_push or now_ms - self.last_push_ms >= self.interval_ms
        if on_time:
            self.last_push_ms = now_ms
            self.get_since_push = False
        return on_time

    def expires_at_ms(self) -> int:
        return self.last_used_ms + max(CACHE_EXPIRY_MS, 3 * self.interval_ms)


@dataclass(frozen=True, slots=True)
class GetResult:
    error: ErrorCode
    message: str | None
    instance: ClientInstance | None


@dataclass(slots=True)
class ClientMetricsManager:
    """Subscriptions and client instances of one broker. Not thread-safe: one caller (the
    event loop)."""

    subscriptions: dict[str, Subscription] = field(default_factory=dict)
    version: int = 0
    instances: OrderedDict[uuid.UUID, ClientInstance] = field(default_factory=OrderedDict)
    max_instances: int = CACHE_MAX_SIZE

    # --- subscriptions ----------------------------------------------------------------
    def replace_subscriptions(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        """Every stored CLIENT_METRICS resource (a reload from the config store); an entry
        that does not validate is skipped (it was validated when written)."""
        parsed: dict[str, Subscription] = {}
        for name, values in configs.items():
            if values:
                try:
                    parsed[name] = parse_subscription(name, values)
                except KafkaError:
                    continue
        if parsed != self.subscriptions:
            self.subscriptions = parsed
            self.version += 1

    # --- client instances -------------------------------------------------------------
    def _evaluate(
        self, instance_id: uuid.UUID, attributes: dict[str, str | None], now_ms: int
    ) -> ClientInstance:
        interval_ms = DEFAULT_INTERVAL_MS
        metrics: set[str] = set()
        for subscription in self.subscriptions.values():
            if subscription.matches(attributes):
                metrics |= subscription.metrics
                interval_ms = min(interval_ms, subscription.interval_ms)
        if ALL_METRICS in metrics:
            metrics = {ALL_METRICS}
        requested = ("",) if metrics == {ALL_METRICS} else tuple(sorted(metrics))
        return ClientInstance(
            instance_id, attributes, subscription_id(metrics, interval_ms, instance_id),
            self.version, requested, interval_ms, last_used_ms=now_ms,
        )

    def instance(
        self, instance_id: uuid.UUID, attributes: dict[str, str | None], now_ms: int
    ) -> ClientInstance:
        """The cached instance (re-evaluated when the subscriptions changed), or a new one."""
        self.expire(now_ms)
        found = self.instances.get(instance_id)
        if found is None or found.subscription_version < self.version:
            cached_attributes = attributes if found is None else found.attributes
            found = self._evaluate(instance_id, cached_attributes, now_ms)
            self.instances[instance_id] = found
            while len(self.instances) > self.max_instances:
                self.instances.popitem(last=False)
        self.instances.move_to_end(instance_id)
        found.last_used_ms = now_ms
        return found

    def expire(self, now_ms: int) -> list[uuid.UUID]:
        """Forget instances past their expiry, from the least recently used on, stopping at
        the first one still alive (O(expired); a later one with a shorter interval waits)."""
        gone: list[uuid.UUID] = []
        while self.instances:
            key, item = next(iter(self.instances.items()))
            if item.expires_at_ms() > now_ms:
                break
            del self.instances[key]
            gone.append(key)
        return gone

    def new_instance_id(self, random_id: Callable[[], uuid.UUID]) -> uuid.UUID:
        while True:
            candidate = random_id()
            if candidate.int != 0 and candidate not in self.instances:
                return candidate

    def get_subscriptions(
        self, instance_id: uuid.UUID, attributes: dict[str, str | None], now_ms: int
    ) -> GetResult:
        instance = self.instance(instance_id, attributes, now_ms)
        if not instance.get_on_time(now_ms) and instance.last_error not in (
            ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        ):
            return GetResult(
                ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                f"Request from the client [{instance_id}] arrived before the next push "
                "interval time",
                None,
            )
        instance.last_get_ms = now_ms
        instance.get_since_push = True
        instance.last_error = ErrorCode.NONE
        return GetResult(ErrorCode.NONE, None, instance)

    def push(
        self,
        instance_id: uuid.UUID,
        attributes: dict[str, str | None],
        subscription: int,
        terminating: bool,
        compression_type: int,
        payload_bytes: int,
        max_bytes: int,
        now_ms: int,
    ) -> tuple[ErrorCode, str | None, ClientInstance]:
        """Validate a PushTelemetry (Kafka's order of checks); NONE means export the payload
        (and call `failed` if it cannot be read)."""
        instance = self.instance(instance_id, attributes, now_ms)
        error, message = self._validate_push(
            instance, subscription, terminating, compression_type, payload_bytes, max_bytes,
            now_ms,
        )
        instance.last_error = error
        instance.terminating = terminating
        return error, message, instance

    @staticmethod
    def _validate_push(
        instance: ClientInstance, subscription: int, terminating: bool, compression_type: int,
        payload_bytes: int, max_bytes: int, now_ms: int,
    ) -> tuple[ErrorCode, str | None]:
        who = instance.instance_id
        if instance.terminating:
            return ErrorCode.INVALID_REQUEST, (
                f"Client [{who}] sent the previous request with state terminating to TRUE, "
                "can not accept any requests after that"
            )
        if not instance.push_on_time(now_ms) and not terminating:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED, (
                f"Request from the client [{who}] arrived before the next push interval time"
            )
        if subscription != instance.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID, (
                f"Unknown client subscription id for the client [{who}]"
            )
        if compression_type not in KNOWN_COMPRESSION_TYPES:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, (
                f"Unknown compression type [{compression_type}] is received in telemetry "
                f"request from [{who}]"
            )
        if payload_bytes > max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE, (
                f"Telemetry request from [{who}] is larger than the maximum allowed size "
                f"[{max_bytes}]"
            )
        return ErrorCode.NONE, None

    @staticmethod
    def failed(instance: ClientInstance, error: ErrorCode) -> None:
        instance.last_error = error
