"""The consumer embedded protocol: what classic members carry in JoinGroup/SyncGroup bytes.

A mixed group (KIP-848 online migration) reads classic members' subscriptions and writes their
assignments itself, so the coordinator speaks Kafka's ConsumerProtocol (non-flexible, every
version starts with an int16 version; a newer version than 3 is read as 3, later fields
ignored, as Kafka's ConsumerProtocol does)::

    ConsumerProtocolSubscription v0-3
        topics [string], user_data bytes?,
        owned_partitions [topic string, partitions [int32]] (v1+),
        generation_id int32 (v2+), rack_id string? (v3+)
    ConsumerProtocolAssignment v0-3
        assigned_partitions [topic string, partitions [int32]], user_data bytes?

Bad bytes raise `CorruptRecordError` (array counts and lengths are checked against the input).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tidelog.coordinator.schema import I16, Reader
from tidelog.errors import CorruptRecordError

_I32 = struct.Struct(">i")
MAX_VERSION = 3


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]] | None  # None before v1 (not reported)
    rack_id: str | None = None


def _array_count(reader: Reader) -> int:
    count = reader.unpack(_I32)
    if count < 0:
        return 0
    if count > len(reader.data) - reader.position:
        raise CorruptRecordError(f"consumer protocol: array of {count} exceeds the bytes")
    return count


def _partitions(reader: Reader) -> dict[str, frozenset[int]]:
    result: dict[str, frozenset[int]] = {}
    for _ in range(_array_count(reader)):
        topic = reader.required_string()
        items = frozenset(reader.unpack(_I32) for _ in range(_array_count(reader)))
        result[topic] = result.get(topic, frozenset()) | items
    return result


def _version(data: bytes) -> tuple[Reader, int]:
    reader = Reader(data, flexible=False)
    version = reader.unpack(I16)
    if version < 0:
        raise CorruptRecordError(f"consumer protocol: version {version}")
    return reader, min(version, MAX_VERSION)


def protocol_version(data: bytes) -> int:
    """The version a member's subscription was written with (its assignment answers in it)."""
    try:
        return _version(data)[1]
    except CorruptRecordError:
        return 0


def parse_subscription(data: bytes) -> Subscription:
    reader, version = _version(data)
    topics = tuple(reader.required_string() for _ in range(_array_count(reader)))
    user_data = reader.length(_I32)
    if user_data:
        reader.take(user_data)
    if version == 0:
        return Subscription(version, topics, None)
    owned = _partitions(reader) if reader.position < len(reader.data) else {}
    rack: str | None = None
    if version >= 2 and reader.position < len(reader.data):
        reader.unpack(_I32)  # generation_id
        if version >= 3 and reader.position < len(reader.data):
            rack = reader.string()
    return Subscription(version, topics, owned, rack)


def parse_assignment(data: bytes) -> dict[str, frozenset[int]]:
    if not data:
        return {}
    reader, _ = _version(data)
    return _partitions(reader)


def serialize_assignment(version: int, partitions: dict[str, frozenset[int]]) -> bytes:
    version = max(0, min(version, MAX_VERSION))
    out = bytearray(I16.pack(version))
    items = [(t, sorted(p)) for t, p in sorted(partitions.items()) if p]
    out += _I32.pack(len(items))
    for topic, indexes in items:
        name = topic.encode()
        out += I16.pack(len(name)) + name
        out += _I32.pack(len(indexes))
        for index in indexes:
            out += _I32.pack(index)
    out += _I32.pack(-1)  # user_data: null
    return bytes(out)
