"""Build kio response entities for any API version without knowing each version's fields.

`build(cls, **fields)` drops the fields `cls` lacks (so one handler serves every version) and
fills required fields that were not given with Kafka's zero values. Plain ints are converted
to kio's types where kio needs objects: error codes to `kio.schema.errors.ErrorCode`, millisecond
durations to `timedelta`.
"""

from __future__ import annotations

import datetime
import sys
from dataclasses import MISSING, fields
from functools import cache
from types import ModuleType
from typing import Any, get_args, get_origin

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as KioErrorCode


@cache
def response_class(api_key: int, api_version: int) -> type:
    cls: type = load_response_schema(api_key, api_version)
    return cls


def response_module(api_key: int, api_version: int) -> ModuleType:
    """The kio module of a response version, for its nested classes (e.g. MetadataResponseTopic)."""
    return sys.modules[response_class(api_key, api_version).__module__]


@cache
def _field_specs(cls: type) -> dict[str, tuple[str | None, bool, Any]]:
    """name -> (kafka_type or None for arrays/entities, required, type)."""
    specs: dict[str, tuple[str | None, bool, Any]] = {}
    for spec in fields(cls):
        required = spec.default is MISSING and spec.default_factory is MISSING
        specs[spec.name] = (spec.metadata.get("kafka_type"), required, spec.type)
    return specs


def _zero(kafka_type: str | None, type_: Any) -> Any:
    nullable = type(None) in get_args(type_)
    if nullable and kafka_type != "uuid":
        return None
    if kafka_type is None or get_origin(type_) is tuple:
        return ()
    if kafka_type == "error_code":
        return KioErrorCode.none
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kafka_type == "string":
        return ""
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "bool":
        return False
    if kafka_type == "uuid":
        return None
    return 0


def _convert(kafka_type: str | None, value: Any) -> Any:
    if kafka_type == "error_code" and not isinstance(value, KioErrorCode):
        return KioErrorCode(int(value))
    if kafka_type in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    return value


def build(cls: type, **values: Any) -> Any:
    """An instance of kio entity `cls` from the given values; unknown fields are dropped."""
    specs = _field_specs(cls)
    arguments: dict[str, Any] = {}
    for name, (kafka_type, required, type_) in specs.items():
        if name in values:
            arguments[name] = _convert(kafka_type, values[name])
        elif required:
            arguments[name] = _zero(kafka_type, type_)
    return cls(**arguments)


def has_field(cls: type, name: str) -> bool:
    return name in _field_specs(cls)
