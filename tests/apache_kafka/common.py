"""Helpers shared by the Apache Kafka compatibility tests: the Java programs in java/ (compiled
once per content hash into the peer cache), their JSON-lines output, Tidelog's segment files."""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import kafka_peer
from conftest import BrokerFactory, BrokerProcess

JAVA_DIR = Path(__file__).resolve().parent / "java"
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


@cache
def classes() -> Path:
    return kafka_peer.compile_java(JAVA_DIR)


def run_program(main: str, *args: str, timeout: float = 240, **kwargs: Any) -> list[dict[str, Any]]:
    """Run one of the Java programs; returns its JSON lines (stdout), failing on a non-zero exit."""
    result = kafka_peer.run_java(classes(), main, *args, timeout=timeout, **kwargs)
    lines = []
    for line in result.stdout.splitlines():
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def of_kind(lines: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [line for line in lines if line["kind"] == kind]


def b64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def segment_batches(path: Path) -> list[tuple[int, int, int]]:
    """(base offset, record count, codec) of every record batch (v2) in a segment .log file."""
    data = path.read_bytes()
    batches = []
    pos = 0
    while pos + 61 <= len(data):
        base_offset, length = struct.unpack_from(">qi", data, pos)
        if length <= 0:
            break  # preallocated tail
        (attributes,) = struct.unpack_from(">h", data, pos + 21)
        (records,) = struct.unpack_from(">i", data, pos + 57)
        batches.append((base_offset, records, attributes & 0x7))
        pos += 12 + length
    return batches


def partition_dirs(data_dir: Path, topic: str) -> list[Path]:
    return sorted(
        (p for p in data_dir.glob(f"{topic}-*") if p.name.rpartition("-")[2].isdigit()),
        key=lambda p: int(p.name.rpartition("-")[2]),
    )


def tidelog_broker(tmp_dir: Path, settings: dict[str, str]) -> Iterator[BrokerProcess]:
    """A module's `tidelog serve` with settings (as tests/conftest.py's `broker` fixture:
    stopped by PID, a traceback in its log fails the module)."""
    factory = BrokerFactory(tmp_dir)
    try:
        yield factory(settings=settings)
    finally:
        bad = factory.stop_all()
    if bad:
        pytest.fail("broker logged a traceback:\n" + "\n".join(bad))


# As the Kafka peer (scripts/kafka, after Kafka's shipped server.properties): a group's first
# rebalance starts at once instead of after 3 s.
NO_REBALANCE_DELAY = {"group.initial.rebalance.delay.ms": "0"}
