"""kcat (Debian package; librdkafka 2.0) against a real `tidelog serve`: produce and read back."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Producer

from .messages import COMPRESSIONS, make_messages
from .topics import create_topic

if TYPE_CHECKING:
    from conftest import BrokerProcess

KCAT = shutil.which("kcat") or "/usr/bin/kcat"


def _kcat(*args: str, stdin: bytes | None = None) -> bytes:
    result = subprocess.run(
        [KCAT, *args], input=stdin, capture_output=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    return result.stdout


def _read_json(bootstrap: str, topic: str) -> list[dict[str, object]]:
    out = _kcat("-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-J")
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_produce_and_consume_with_kcat(broker: BrokerProcess, compression: str, acks: str) -> None:
    topic = f"kcat-{compression}-{acks}"
    create_topic(broker.bootstrap, topic)
    lines = [(f"key{index}", f"value {index} {'x' * (index % 50)}") for index in range(300)]
    payload = "".join(f"{key}:{value}\n" for key, value in lines).encode()
    _kcat(
        "-P", "-b", broker.bootstrap, "-t", topic, "-p", "0", "-K", ":", "-z", compression,
        "-H", "origin=kcat", "-H", "codec=" + compression, "-X", f"acks={acks}",
        stdin=payload,
    )  # fmt: skip
    records = _read_json(broker.bootstrap, topic)
    # acks=0: kcat exits once the batches are written to its socket, possibly before the
    # broker has appended them all.
    deadline = time.monotonic() + 30
    while len(records) < len(lines) and time.monotonic() < deadline:
        time.sleep(0.2)
        records = _read_json(broker.bootstrap, topic)
    assert [(r["key"], r["payload"]) for r in records] == lines
    assert [r["offset"] for r in records] == list(range(len(lines)))
    assert all(r["headers"] == ["origin", "kcat", "codec", compression] for r in records)


def test_kcat_reads_what_librdkafka_wrote(broker: BrokerProcess) -> None:
    topic = "kcat-reads"
    create_topic(broker.bootstrap, topic)
    messages = [m for m in make_messages(100, seed=3) if m.key is not None]
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "zstd"})
    for message in messages:
        producer.produce(
            topic,
            value=message.value.hex().encode(),
            key=message.key,
            partition=0,
            timestamp=message.timestamp_ms,
        )
    assert producer.flush(30) == 0
    records = _read_json(broker.bootstrap, topic)
    got = [(r["key"], r["payload"], r["ts"]) for r in records]
    assert got == [(m.key.decode(), m.value.hex(), m.timestamp_ms) for m in messages if m.key]
