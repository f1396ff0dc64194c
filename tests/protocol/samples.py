"""Valid request entities and frames for any kio request schema, written by kio's own writer.

Values are drawn from a seeded Random so every call with the same seed gives the same frame;
`fill` chooses between None, empty and populated for nullable fields and arrays, and sets
tagged fields to non-default values half of the time so they reach the wire.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import random
import struct
import uuid
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
)

from tidelog.protocol.versions import SUPPORTED_VERSIONS

SUPPORTED_PAIRS: list[tuple[int, int]] = [
    (api_key, version)
    for api_key, (low, high) in sorted(SUPPORTED_VERSIONS.items())
    for version in range(low, high + 1)
]


def _nullable(field_type: Any) -> bool:
    return get_origin(field_type) in (UnionType, Union) and NoneType in get_args(field_type)


def _primitive(kafka_type: str, rnd: random.Random) -> Any:
    match kafka_type:
        case "int8":
            return rnd.randint(-128, 127)
        case "int16":
            return rnd.randint(-(2**15), 2**15 - 1)
        case "int32":
            return rnd.randint(-(2**31), 2**31 - 1)
        case "int64":
            return rnd.randint(-(2**63), 2**63 - 1)
        case "uint8" | "uint16" | "uint32" | "uint64":
            return rnd.randint(0, 255)
        case "error_code":
            return rnd.choice([ErrorCode.none, ErrorCode.unsupported_version])
        case "float64":
            return rnd.random()
        case "bool":
            return rnd.random() < 0.5
        case "string":
            return rnd.choice(["", "a", "topic-ä", "x" * 40])
        case "bytes" | "records":
            return rnd.randbytes(rnd.choice([0, 1, 7, 100]))
        case "uuid":
            return uuid.UUID(int=rnd.getrandbits(128) | 1)
        case "timedelta_i32":
            return datetime.timedelta(milliseconds=rnd.randint(0, 2**31 - 1))
        case "timedelta_i64":
            return datetime.timedelta(milliseconds=rnd.randint(0, 2**40))
        case "datetime_i64":
            return datetime.datetime.fromtimestamp(rnd.randint(0, 2**31), datetime.UTC)
    raise AssertionError(f"no sample for kafka_type {kafka_type!r}")


def fill(entity_type: Any, rnd: random.Random, depth: int = 0) -> Any:
    """A valid instance of a kio entity class."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(entity_type):
        tagged = get_field_tag(field) is not None
        if tagged and rnd.random() < 0.5:
            continue  # leave the default: the tag is not written
        if not tagged and _nullable(field.type) and rnd.random() < 0.25:
            values[field.name] = None
            continue
        field_class = classify_field(field)
        kafka_type = field.metadata.get("kafka_type", "")
        if isinstance(field_class, EntityTupleField):
            count = rnd.choice([0, 1, 2]) if depth < 3 else 0
            values[field.name] = tuple(
                fill(field_class.type_, rnd, depth + 1) for _ in range(count)
            )
        elif isinstance(field_class, EntityField):
            values[field.name] = fill(field_class.type_, rnd, depth + 1)
        elif isinstance(field_class, PrimitiveTupleField):
            count = rnd.choice([0, 1, 3])
            values[field.name] = tuple(_primitive(kafka_type, rnd) for _ in range(count))
        else:
            values[field.name] = _primitive(kafka_type, rnd)
    return entity_type(**values)


def encode_body(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def request_frame(
    api_key: int,
    api_version: int,
    body: Any,
    *,
    correlation_id: int = 7,
    client_id: str | None = "tidelog-test",
) -> bytes:
    """A request frame without its size prefix: header v1/v2 then the body."""
    flexible = bool(type(body).__flexible__)
    header = struct.pack(">hhi", api_key, api_version, correlation_id)
    if client_id is None:
        header += struct.pack(">h", -1)
    else:
        raw = client_id.encode()
        header += struct.pack(">h", len(raw)) + raw
    if flexible:
        header += b"\0"  # no header tagged fields
    return header + encode_body(body)


def sample_frame(api_key: int, api_version: int, seed: int) -> tuple[Any, bytes]:
    """(entity, frame) of a random valid request of (api_key, api_version)."""
    schema = load_request_schema(api_key, api_version)
    entity = fill(schema, random.Random(seed * 1000 + api_key * 50 + api_version))
    return entity, request_frame(api_key, api_version, entity, correlation_id=seed)
