"""The schema engine behind `coordinator.records`: Kafka message structs from field lists.

A record class lists its fields as `FieldSpec(name, kind, min_version, max_version)`; the
engine writes and reads them for one version, non-flexible (int16 string lengths, int32 array
counts and bytes lengths, -1 = null) or flexible (compact lengths as uvarint length+1, 0 = null,
and a tagged-field section after each struct: uvarint count, then per field uvarint tag, uvarint
size and the bytes). A field declared with `tag` is a nullable struct written there when not
None (Kafka's `taggedVersions`); unknown tags are skipped on read. Every declared length is
checked against the bytes that remain; bad input raises `CorruptRecordError`.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from tidelog.errors import CorruptRecordError

_I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

# Field kinds understood by the schema engine below.
INT8, INT16, INT32, INT64 = "int8", "int16", "int32", "int64"
STRING, NULLABLE_STRING, BYTES, UUID = "string", "string?", "bytes", "uuid"
STRING_ARRAY, INT32_ARRAY = "[string]", "[int32]"


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One schema field: attribute name, kind (or struct class for arrays), version range."""

    name: str
    kind: str | type
    min_version: int = 0
    max_version: int = 32767
    tag: int | None = None  # a tagged (flexible-only, nullable) struct field


class Writer:
    __slots__ = ("flexible", "out")

    def __init__(self, flexible: bool) -> None:
        self.out = bytearray()
        self.flexible = flexible

    def uvarint(self, value: int) -> None:
        while value >= 0x80:
            self.out.append((value & 0x7F) | 0x80)
            value >>= 7
        self.out.append(value)

    def length(self, value: int | None, legacy: struct.Struct) -> None:
        if self.flexible:
            self.uvarint(0 if value is None else value + 1)
        else:
            self.out += legacy.pack(-1 if value is None else value)

    def string(self, value: str | None) -> None:
        data = None if value is None else value.encode()
        self.length(None if data is None else len(data), I16)
        if data is not None:
            self.out += data


class Reader:
    __slots__ = ("data", "flexible", "position")

    def __init__(self, data: bytes | memoryview, flexible: bool, position: int = 0) -> None:
        self.data = data
        self.flexible = flexible
        self.position = position

    def take(self, size: int) -> bytes:
        end = self.position + size
        if size < 0 or end > len(self.data):
            raise CorruptRecordError(
                f"coordinator record truncated: need {size} bytes at {self.position}, "
                f"have {len(self.data) - self.position}"
            )
        chunk = bytes(self.data[self.position : end])
        self.position = end
        return chunk

    def unpack(self, spec: struct.Struct) -> int:
        value: int = spec.unpack(self.take(spec.size))[0]
        return value

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise CorruptRecordError("coordinator record: varint longer than 5 bytes")

    def length(self, legacy: struct.Struct) -> int | None:
        if self.flexible:
            raw = self.uvarint()
            return None if raw == 0 else raw - 1
        value = self.unpack(legacy)
        return None if value < 0 else value

    def string(self) -> str | None:
        size = self.length(I16)
        if size is None:
            return None
        try:
            return self.take(size).decode()
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"coordinator record: invalid UTF-8 string: {exc}") from None

    def required_string(self) -> str:
        text = self.string()
        if text is None:
            raise CorruptRecordError("coordinator record: null where a string is required")
        return text

    def skip_tagged_fields(self) -> None:
        self.tagged_fields()

    def tagged_fields(self) -> dict[int, bytes]:
        """The tagged-field section: tag -> its bytes (a repeated tag keeps the last)."""
        found: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            found[tag] = self.take(self.uvarint())
        return found


_FIXED: dict[str, struct.Struct] = {INT8: _I8, INT16: I16, INT32: _I32, INT64: _I64}


def write_struct(writer: Writer, value: Any, version: int) -> None:
    tagged: list[tuple[int, bytes]] = []
    for spec in value.SCHEMA:
        if not spec.min_version <= version <= spec.max_version:
            continue
        item = getattr(value, spec.name)
        kind = spec.kind
        if spec.tag is not None:
            if item is not None and writer.flexible:
                inner = Writer(flexible=True)
                write_struct(inner, item, version)
                tagged.append((spec.tag, bytes(inner.out)))
            continue
        if isinstance(kind, type):
            writer.length(len(item), _I32)
            for element in item:
                write_struct(writer, element, version)
        elif kind in _FIXED:
            writer.out += _FIXED[kind].pack(item)
        elif kind in (STRING, NULLABLE_STRING):
            writer.string(item)
        elif kind == BYTES:
            writer.length(len(item), _I32)
            writer.out += item
        elif kind == UUID:
            writer.out += item.bytes
        elif kind == STRING_ARRAY:
            writer.length(len(item), _I32)
            for text in item:
                writer.string(text)
        elif kind == INT32_ARRAY:
            writer.length(len(item), _I32)
            for number in item:
                writer.out += _I32.pack(number)
    if writer.flexible:
        writer.uvarint(len(tagged))
        for tag, data in sorted(tagged):
            writer.uvarint(tag)
            writer.uvarint(len(data))
            writer.out += data


def read_array(reader: Reader, read_one: Callable[[], Any]) -> tuple[Any, ...]:
    count = reader.length(_I32)
    if count is None:
        return ()
    if count > len(reader.data) - reader.position:  # every element takes at least one byte
        raise CorruptRecordError(f"coordinator record: array of {count} exceeds the record")
    return tuple(read_one() for _ in range(count))


def read_struct(reader: Reader, cls: type, version: int) -> Any:
    values: dict[str, Any] = {}
    tagged_specs: list[FieldSpec] = []
    for spec in cls.SCHEMA:  # type: ignore[attr-defined]
        if not spec.min_version <= version <= spec.max_version:
            continue
        kind = spec.kind
        if spec.tag is not None:
            tagged_specs.append(spec)
            continue
        if isinstance(kind, type):
            values[spec.name] = read_array(reader, partial(read_struct, reader, kind, version))
        elif kind in _FIXED:
            values[spec.name] = reader.unpack(_FIXED[kind])
        elif kind == STRING:
            values[spec.name] = reader.required_string()
        elif kind == NULLABLE_STRING:
            values[spec.name] = reader.string()
        elif kind == BYTES:
            size = reader.length(_I32)
            values[spec.name] = b"" if size is None else reader.take(size)
        elif kind == UUID:
            values[spec.name] = uuid.UUID(bytes=reader.take(16))
        elif kind == STRING_ARRAY:
            values[spec.name] = read_array(reader, reader.required_string)
        elif kind == INT32_ARRAY:
            values[spec.name] = read_array(reader, lambda: reader.unpack(_I32))
    if reader.flexible:
        found = reader.tagged_fields()
        for spec in tagged_specs:
            data = found.get(spec.tag)  # type: ignore[arg-type]
            if data is not None and isinstance(spec.kind, type):
                inner = Reader(data, flexible=True)
                values[spec.name] = read_struct(inner, spec.kind, version)
                if inner.position != len(data):
                    raise CorruptRecordError(f"coordinator record: tagged field {spec.tag} "
                                             "has trailing bytes")
    return cls(**values)
