"""Bounds check of a request body before kio's native reader sees it.

Why: kio 0.6.5's native reader sizes each array's storage from the declared element count
(``Vec::with_capacity(count)`` of 8-byte pointers) before it reads a single element. A compact
array count is an unsigned varint of up to 5 bytes (values up to 2**35 - 1), so a 7-byte
request can make it ask for 16-274 GB; once that exceeds what the kernel will overcommit
(above ~24 GB on a 23 GiB machine), Rust's allocator aborts the whole process (SIGABRT),
which no ``except`` can catch. Legacy int32 counts reach 16 GB and abort on smaller machines.

The guard walks the same schema kio will read (the entity dataclasses and their
``kafka_type`` metadata) once, checking that every declared length fits in the bytes that
remain and that every array's count times its smallest possible element fits too. It reads
the wire formats below; it never builds values, and ``records`` stay opaque bytes, so a
Produce request costs one step per topic and partition, not per record.

Wire encodings walked (flexible = the API version uses compact types and tagged fields)::

    int8/bool/uint8 1, int16/uint16 2, int32/uint32/timedelta_i32 4,
    int64/uint64/float64/timedelta_i64/datetime_i64 8, uuid 16      fixed size
    string          legacy: int16 length (-1 = null); flexible: uvarint length+1 (0 = null)
    bytes, records  legacy: int32 length (-1 = null); flexible: uvarint length+1 (0 = null)
    array           legacy: int32 count (-1 = null);  flexible: uvarint count+1 (0 = null)
    nullable struct int8 marker: -1 = null, 1 = present (KIP-893; other values rejected)
    tagged fields   flexible structs end with: uvarint count, then per field:
                    uvarint tag, uvarint size, size bytes (a known tag's value must fill them)
    uvarint         7 bits per byte, low group first, at most 5 bytes

Nulls are accepted only where the schema allows them, as Kafka does. A field type the guard
has no rule for raises ``UnguardedFieldError`` when its schema is first compiled; the tests
compile every request schema kio ships, so a kio upgrade with new types fails there.
"""

from __future__ import annotations

import dataclasses
import struct
from functools import cache
from types import NoneType, UnionType
from typing import Any, TypeAlias, Union, get_args, get_origin

from kio.serial._introspect import EntityField, EntityTupleField, classify_field, get_field_tag

from tidelog.errors import ProtocolDecodeError

_FIXED_SIZES: dict[str, int] = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_LENGTH_PREFIXED = frozenset({"string", "bytes", "records"})

# Operation kinds of a compiled plan.
_FIXED = 0  # (kind, size)
_LEGACY_STRING = 1  # (kind, nullable)
_LEGACY_BYTES = 2  # (kind, nullable)
_COMPACT_BYTES = 3  # (kind, nullable)  compact string, bytes and records
_LEGACY_ARRAY = 4  # (kind, nullable, item operation, smallest item size)
_COMPACT_ARRAY = 5  # (kind, nullable, item operation, smallest item size)
_ENTITY = 6  # (kind, plan)
_NULLABLE_ENTITY = 7  # (kind, plan)

Operation: TypeAlias = tuple[Any, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """The compiled shape of one entity: its fields in wire order, then its tagged fields."""

    name: str
    operations: tuple[Operation, ...]
    tagged: dict[int, Operation] | None  # None for non-flexible entities
    min_size: int


class UnguardedFieldError(TypeError):
    """A schema field has a type the guard has no rule for (a programming error)."""


class MalformedRequestError(ProtocolDecodeError):
    """A declared length or count does not fit the bytes of the frame."""


_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT8 = struct.Struct(">b")


@cache
def request_plan(entity_type: Any) -> Plan:
    """Compile (once) the plan of a kio entity class."""
    flexible = bool(entity_type.__flexible__)
    operations: list[Operation] = []
    tagged: dict[int, Operation] | None = {} if flexible else None
    for field in dataclasses.fields(entity_type):
        tag = get_field_tag(field)
        where = f"{entity_type.__qualname__}.{field.name}"
        if tag is not None:
            if tagged is None:
                raise UnguardedFieldError(f"{where}: tagged field on a non-flexible entity")
            # kio reads tagged values with their non-nullable reader (presence is the tag).
            tagged[int(tag)] = _field_operation(field, flexible, nullable=False, where=where)
            continue
        operation = _field_operation(
            field, flexible, nullable=_is_nullable(field.type), where=where
        )
        if operation[0] == _FIXED and operations and operations[-1][0] == _FIXED:
            operations[-1] = (_FIXED, operations[-1][1] + operation[1])
        else:
            operations.append(operation)
    min_size = sum(_min_size(operation) for operation in operations) + (1 if flexible else 0)
    return Plan(entity_type.__qualname__, tuple(operations), tagged, min_size)


def _is_nullable(field_type: Any) -> bool:
    return get_origin(field_type) in (UnionType, Union) and NoneType in get_args(field_type)


def _field_operation(
    field: dataclasses.Field[Any], flexible: bool, *, nullable: bool, where: str
) -> Operation:
    field_class = classify_field(field)
    if isinstance(field_class, EntityTupleField | EntityField):
        plan = request_plan(field_class.type_)
        if isinstance(field_class, EntityField):
            return (_NULLABLE_ENTITY if nullable else _ENTITY, plan)
        item: Operation = (_ENTITY, plan)
        return _array(flexible, nullable, item, plan.min_size)
    kafka_type = field.metadata.get("kafka_type")
    if not isinstance(kafka_type, str):
        raise UnguardedFieldError(f"{where}: no kafka_type metadata")
    if field_class.is_array:
        element = get_args(_strip_none(field.type))[0]
        if _is_nullable(element) and kafka_type not in _FIXED_SIZES:  # uuid: zero means null
            raise UnguardedFieldError(f"{where}: array of nullable {kafka_type}")
        item = _primitive(kafka_type, flexible, nullable=False, where=where)
        return _array(flexible, nullable, item, _min_size(item))
    return _primitive(kafka_type, flexible, nullable=nullable, where=where)


def _strip_none(field_type: Any) -> Any:
    if _is_nullable(field_type):
        (inner,) = (arg for arg in get_args(field_type) if arg is not NoneType)
        return inner
    return field_type


def _array(flexible: bool, nullable: bool, item: Operation, item_min_size: int) -> Operation:
    # A zero-size item would let a huge count pass the size check; count it as one byte.
    return (_COMPACT_ARRAY if flexible else _LEGACY_ARRAY, nullable, item, max(item_min_size, 1))


def _primitive(kafka_type: str, flexible: bool, *, nullable: bool, where: str) -> Operation:
    fixed_size = _FIXED_SIZES.get(kafka_type)
    if fixed_size is not None:
        return (_FIXED, fixed_size)
    if kafka_type not in _LENGTH_PREFIXED:
        raise UnguardedFieldError(f"{where}: no guard rule for kafka_type {kafka_type!r}")
    if flexible:
        return (_COMPACT_BYTES, nullable)
    return (_LEGACY_STRING if kafka_type == "string" else _LEGACY_BYTES, nullable)


def _min_size(operation: Operation) -> int:
    kind = operation[0]
    if kind == _FIXED:
        return int(operation[1])
    if kind in (_LEGACY_STRING,):
        return 2
    if kind in (_LEGACY_BYTES, _LEGACY_ARRAY):
        return 4
    if kind == _ENTITY:
        return int(operation[1].min_size)
    return 1  # compact lengths and the nullable-struct marker


def check_request(entity_type: Any, frame: bytes | memoryview, position: int) -> int:
    """Raise MalformedRequestError unless the body from ``position`` fits in ``frame``.

    Returns where the body ends. Bytes after it are allowed, as Kafka's own parser allows them:
    librdkafka 2.16 sends a Metadata v13 "all topics" request with 3 extra bytes.
    """
    plan = request_plan(entity_type)
    return _walk_entity(plan, frame, position, len(frame))


def _walk_entity(plan: Plan, frame: bytes | memoryview, position: int, end: int) -> int:
    position = _walk(plan.operations, frame, position, end, plan.name)
    tagged = plan.tagged
    if tagged is None:
        return position
    count, position = read_uvarint(frame, position, end)
    for _ in range(count):
        tag, position = read_uvarint(frame, position, end)
        size, position = read_uvarint(frame, position, end)
        value_end = position + size
        if value_end > end:
            raise MalformedRequestError(f"tagged field {tag} of {plan.name} overruns the frame")
        operation = tagged.get(tag)
        if operation is not None and _walk((operation,), frame, position, value_end, plan.name) != (
            value_end
        ):
            raise MalformedRequestError(f"tagged field {tag} of {plan.name} has a wrong size")
        position = value_end
    return position


def _walk(
    operations: tuple[Operation, ...],
    frame: bytes | memoryview,
    position: int,
    end: int,
    name: str,
) -> int:
    for operation in operations:
        kind = operation[0]
        if kind == _FIXED:
            position += operation[1]
        elif kind == _COMPACT_BYTES:
            length, position = read_uvarint(frame, position, end)
            if length == 0:
                _null(operation[1], name)
            else:
                position += length - 1
        elif kind == _LEGACY_STRING:
            position = _legacy_length(_INT16, frame, position, end, operation[1], name)
        elif kind == _LEGACY_BYTES:
            position = _legacy_length(_INT32, frame, position, end, operation[1], name)
        elif kind == _ENTITY:
            position = _walk_entity(operation[1], frame, position, end)
        elif kind in (_COMPACT_ARRAY, _LEGACY_ARRAY):
            if kind == _COMPACT_ARRAY:
                count, position = read_uvarint(frame, position, end)
                count -= 1
            else:
                count, position = _read_fixed(_INT32, frame, position, end)
            if count < 0:
                if count != -1:
                    raise MalformedRequestError(f"negative array count {count} in {name}")
                _null(operation[1], name)
                continue
            _, item, item_min_size = operation[1:]
            if count * item_min_size > end - position:
                raise MalformedRequestError(
                    f"array of {count} items in {name} cannot fit {end - position} bytes"
                )
            if item[0] == _FIXED:
                position += count * item[1]
            else:
                items = (item,)
                for _ in range(count):
                    position = _walk(items, frame, position, end, name)
        elif kind == _NULLABLE_ENTITY:
            marker, position = _read_fixed(_INT8, frame, position, end)
            if marker == 1:
                position = _walk_entity(operation[1], frame, position, end)
            elif marker != -1:
                raise MalformedRequestError(f"nullable struct marker {marker} in {name}")
        else:  # pragma: no cover - plans are built only from the kinds above
            raise AssertionError(f"unknown guard operation {operation!r}")
        if position > end:
            raise MalformedRequestError(f"{name} runs past the end of the frame")
    return position


def _null(nullable: bool, name: str) -> None:
    if not nullable:
        raise MalformedRequestError(f"null in a non-nullable field of {name}")


def _legacy_length(
    length_struct: struct.Struct,
    frame: bytes | memoryview,
    position: int,
    end: int,
    nullable: bool,
    name: str,
) -> int:
    length, position = _read_fixed(length_struct, frame, position, end)
    if length < 0:
        if length != -1:
            raise MalformedRequestError(f"negative length {length} in {name}")
        _null(nullable, name)
        return position
    return int(position + length)


def _read_fixed(
    fixed: struct.Struct, frame: bytes | memoryview, position: int, end: int
) -> tuple[int, int]:
    after = position + fixed.size
    if after > end:
        raise MalformedRequestError("length field runs past the end of the frame")
    return int(fixed.unpack_from(frame, position)[0]), after


def read_uvarint(frame: bytes | memoryview, position: int, end: int) -> tuple[int, int]:
    """An unsigned varint (at most 5 bytes) at `position`, not reading past `end`."""
    value = 0
    shift = 0
    while True:
        if position >= end:
            raise MalformedRequestError("varint runs past the end of the frame")
        byte = frame[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
        if shift > 28:
            raise MalformedRequestError("varint longer than 5 bytes")
