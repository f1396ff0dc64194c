"""Client quotas as Kafka models them (KIP-13, KIP-55, KIP-546): entities, keys, precedence.

Pure: no I/O, no clock. An entity is a set of (entity type, name) parts, the name None for the
type's default (`<default>` in kafka-configs and ZooKeeper): `{user: alice}`,
`{user: None, client-id: app}`, `{ip: 10.0.0.1}`. `ClientQuotas` is an immutable map entity ->
{quota key: value}; `alter` validates and applies AlterClientQuotas entries with Kafka's
messages (its ClientQuotaControlManager), `describe` filters with Kafka's rules
(ClientQuotasImage.describe), and `quota_for` resolves what applies to a (user, client-id)
for one key, with Kafka's precedence (ClientQuotaManager's DefaultQuotaCallback), most
specific first:

    1 /config/users/<user>/clients/<client-id>     5 /config/users/<default>/clients/<default>
    2 /config/users/<user>/clients/<default>       6 /config/users/<default>
    3 /config/users/<user>                         7 /config/clients/<client-id>
    4 /config/users/<default>/clients/<client-id>  8 /config/clients/<default>

Each quota key is resolved on its own (Kafka keeps one quota manager per type), so a user's
producer_byte_rate does not hide a client-id's consumer_byte_rate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# Kafka's QuotaConfig: key -> whether the value must be integral (LONG/INT) or may be a DOUBLE.
USER_CLIENT_KEYS: Mapping[str, bool] = MappingProxyType({
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
})
IP_KEYS: Mapping[str, bool] = MappingProxyType({CONNECTION_CREATION_RATE: True})
_INT_MAX = 2**31 - 1
_LONG_MAX = 2.0**63 - 1

# DescribeClientQuotas match types (KIP-546).
MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2

MAX_ENTITY_NAME_CHARS = 1024  # Tidelog's bound on a stored name (Kafka's are not bounded)


class QuotaRequestError(ValueError):
    """Kafka answers INVALID_REQUEST with this message."""


class QuotaUnsupportedError(ValueError):
    """Kafka answers UNSUPPORTED_VERSION with this message (an unknown entity type in a
    DescribeClientQuotas filter)."""


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """Sorted (entity type, name or None for `<default>`) parts; at most one per type."""

    parts: tuple[tuple[str, str | None], ...]

    @classmethod
    def of(cls, **names: str | None) -> QuotaEntity:
        """`QuotaEntity.of(user="alice", client_id=None)`: keyword `client_id` is client-id."""
        return cls(tuple(sorted((key.replace("_", "-"), value) for key, value in names.items())))

    def as_dict(self) -> dict[str, str | None]:
        return dict(self.parts)

    def sort_key(self) -> tuple[tuple[str, bool, str], ...]:
        """Defaults (None) first, then names."""
        return tuple((kind, name is not None, name or "") for kind, name in self.parts)

    def __str__(self) -> str:
        return ", ".join(f"{kind}={'<default>' if name is None else name}"
                         for kind, name in self.parts)


@dataclass(frozen=True, slots=True)
class QuotaAlteration:
    """One AlterClientQuotas entry: the raw entity parts (as sent, maybe invalid) and ops,
    each (key, value, remove)."""

    entity: tuple[tuple[str, str | None], ...]
    ops: tuple[tuple[str, float, bool], ...]


@dataclass(frozen=True, slots=True)
class DescribeComponent:
    entity_type: str
    match_type: int
    match: str | None


class ClientQuotas:
    """Immutable: `alter` returns a new instance."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Mapping[QuotaEntity, Mapping[str, float]] | None = None) -> None:
        self._entries: Mapping[QuotaEntity, Mapping[str, float]] = MappingProxyType({
            entity: MappingProxyType(dict(values))
            for entity, values in (entries or {}).items()
            if values
        })

    @property
    def entries(self) -> Mapping[QuotaEntity, Mapping[str, float]]:
        return self._entries

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClientQuotas) and dict(self._entries) == dict(other._entries)

    def __hash__(self) -> int:
        return hash(frozenset(self._entries))

    # --- AlterClientQuotas -----------------------------------------------------------------
    def alter(
        self, alterations: Iterable[QuotaAlteration]
    ) -> tuple[ClientQuotas, dict[QuotaEntity, str | None]]:
        """(the quotas after every valid entry, entity -> None or the INVALID_REQUEST message),
        one result per distinct entity as Kafka answers (its results are a map). Entries are
        independent: a bad one does not stop the others. As in Kafka, an entity's parts are
        collected in a map (a type named twice: the last wins), and an entity altered twice,
        or naming a key twice, is answered "Ignoring duplicate entity" (the first alteration
        of a twice-named entity still applies)."""
        entries = {entity: dict(values) for entity, values in self._entries.items()}
        results: dict[QuotaEntity, str | None] = {}
        for alteration in alterations:
            raw = QuotaEntity(tuple(sorted(dict(alteration.entity).items(),
                                           key=lambda part: part[0])))
            duplicate_key = len({key for key, _, _ in alteration.ops}) != len(alteration.ops)
            if raw in results or duplicate_key:
                results[raw] = f"Ignoring duplicate entity {_entity_text(raw)}"
                continue
            try:
                entity = validate_entity(raw.parts)
                changes = _validated_ops(entity, alteration.ops)
            except QuotaRequestError as error:
                results[raw] = str(error)
                continue
            values = entries.setdefault(entity, {})
            for key, value in changes.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
            if not values:
                del entries[entity]
            results[raw] = None
        return ClientQuotas(entries), results

    # --- DescribeClientQuotas --------------------------------------------------------------
    def describe(
        self, components: Iterable[DescribeComponent], strict: bool
    ) -> list[tuple[QuotaEntity, Mapping[str, float]]]:
        """Entities matching the filter; raises QuotaRequestError / QuotaUnsupportedError."""
        exact: dict[str, str | None] = {}
        typed: set[str] = set()
        for component in components:
            kind = component.entity_type
            if not kind:
                raise QuotaRequestError("Invalid empty entity type.")
            if kind in exact or kind in typed:
                raise QuotaRequestError(
                    f"Entity type {kind} cannot appear more than once in the filter."
                )
            if kind not in ENTITY_TYPES:
                raise QuotaUnsupportedError(f"Unsupported entity type {kind}")
            if component.match_type == MATCH_EXACT:
                if component.match is None:
                    raise QuotaRequestError(
                        "Request specified MATCH_TYPE_EXACT, but set match string to null."
                    )
                exact[kind] = component.match
            elif component.match_type == MATCH_DEFAULT:
                if component.match is not None:
                    raise QuotaRequestError(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match "
                        "string."
                    )
                exact[kind] = None
            elif component.match_type == MATCH_SPECIFIED:
                if component.match is not None:
                    raise QuotaRequestError(
                        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match "
                        "string."
                    )
                typed.add(kind)
            else:
                raise QuotaRequestError(f"Unknown match type {component.match_type}")
        named = set(exact) | typed
        if IP in named and (USER in named or CLIENT_ID in named):
            raise QuotaRequestError(
                "Invalid entity filter component combination. IP filter component should not "
                "be used with user or clientId filter component."
            )
        found = []
        for entity, values in sorted(self._entries.items(), key=lambda e: e[0].sort_key()):
            parts = entity.as_dict()
            if strict and len(parts) != len(exact) + len(typed):
                continue
            if any(kind not in parts or parts[kind] != name for kind, name in exact.items()):
                continue
            if any(kind not in parts for kind in typed):
                continue
            found.append((entity, values))
        return found

    # --- enforcement -----------------------------------------------------------------------
    def quota_for(self, key: str, user: str, client_id: str) -> tuple[tuple[str, str], float
                                                                      | None]:
        """((user tag, client-id tag), limit or None) for `key`: the tags name the sensor that
        every client resolving to the same level shares (Kafka's quotaMetricTags), the limit
        is the most specific quota set at that level (quotaLimit)."""
        tags = self._metric_tags(key, user, client_id)
        return tags, self._limit(key, *tags)

    def _has(self, key: str, entity: QuotaEntity) -> bool:
        values = self._entries.get(entity)
        return values is not None and key in values

    def _value(self, key: str, entity: QuotaEntity) -> float | None:
        values = self._entries.get(entity)
        return None if values is None else values.get(key)

    def _metric_tags(self, key: str, user: str, client_id: str) -> tuple[str, str]:
        both = (user, client_id)
        if self._has(key, QuotaEntity.of(user=user, client_id=client_id)):
            return both
        if self._has(key, QuotaEntity.of(user=user, client_id=None)):
            return both
        if self._has(key, QuotaEntity.of(user=user)):
            return (user, "")
        if self._has(key, QuotaEntity.of(user=None, client_id=client_id)):
            return both
        if self._has(key, QuotaEntity.of(user=None, client_id=None)):
            return both
        if self._has(key, QuotaEntity.of(user=None)):
            return (user, "")
        return ("", client_id)

    def _limit(self, key: str, user: str, client_id: str) -> float | None:
        levels: tuple[QuotaEntity, ...]
        if user and client_id:
            levels = (
                QuotaEntity.of(user=user, client_id=client_id),
                QuotaEntity.of(user=user, client_id=None),
                QuotaEntity.of(user=None, client_id=client_id),
                QuotaEntity.of(user=None, client_id=None),
            )
        elif user:
            levels = (QuotaEntity.of(user=user), QuotaEntity.of(user=None))
        elif client_id:
            levels = (QuotaEntity.of(client_id=client_id), QuotaEntity.of(client_id=None))
        else:
            return None
        for entity in levels:
            value = self._value(key, entity)
            if value is not None:
                return value
        return None


def validate_entity(parts: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """Kafka's validateEntity + configKeysForEntityType (the combination), in its order."""
    seen: dict[str, str | None] = {}
    for kind, name in parts:
        if kind in seen:
            raise QuotaRequestError(f"Invalid client quota entity, duplicate entity entry {kind}")
        if kind not in ENTITY_TYPES:
            raise QuotaRequestError(f"Unhandled client quota entity type: {kind}")
        seen[kind] = name
        if name is not None and not name:
            raise QuotaRequestError(f"Empty {kind} not supported")
        if name is not None and len(name) > MAX_ENTITY_NAME_CHARS:
            raise QuotaRequestError(f"{kind} longer than {MAX_ENTITY_NAME_CHARS} characters")
    if not seen:
        raise QuotaRequestError("Invalid empty client quota entity")
    if IP in seen and (USER in seen or CLIENT_ID in seen):
        raise QuotaRequestError(
            "Invalid quota entity combination, IP entity shouldnot be combined with User or "
            "ClientId"
        )
    return QuotaEntity(tuple(sorted(seen.items(), key=lambda part: part[0])))


def _validated_ops(
    entity: QuotaEntity, ops: Iterable[tuple[str, float, bool]]
) -> dict[str, float | None]:
    changes = {key: None if remove else value for key, value, remove in ops}
    valid_keys = IP_KEYS if IP in entity.as_dict() else USER_CLIENT_KEYS
    for key, change in changes.items():
        if change is not None:
            validate_quota_value(valid_keys, key, change)
    return changes


def validate_quota_value(valid_keys: Mapping[str, bool], key: str, value: float) -> None:
    """Kafka's validateQuotaKeyValue."""
    integral = valid_keys.get(key)
    if integral is None:
        raise QuotaRequestError(f"Invalid configuration key {key}")
    if not value > 0.0:  # NaN too
        raise QuotaRequestError(f"Quota {key} must be greater than 0")
    if not integral:
        if math.isinf(value):
            raise QuotaRequestError(f"Quota {key} must be finite")
        return
    if key == CONNECTION_CREATION_RATE and value > _INT_MAX:
        raise QuotaRequestError(f"Proposed value for {key} is too large for an INT.")
    if value > _LONG_MAX:
        raise QuotaRequestError(f"Proposed value for {key} is too large for a LONG.")
    if abs(math.fmod(value, 1.0)) > 1e-6:
        raise QuotaRequestError(f"{key} cannot be a fractional value.")


def _entity_text(entity: QuotaEntity) -> str:
    """Kafka's ClientQuotaEntity.toString (a Java map: `{user=alice, client-id=null}`)."""
    inner = ", ".join(f"{kind}={name}" if name is not None else f"{kind}=null"
                      for kind, name in sorted(entity.parts, key=lambda part: part[0] != USER))
    return f"ClientQuotaEntity(entries={{{inner}}})"
