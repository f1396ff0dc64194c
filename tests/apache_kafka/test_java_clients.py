"""Kafka's own Java producer and consumer (kafka-clients 4.3.1) against a real `tidelog serve`:
every codec, acks 0/1/all, idempotence with acks=all, keys, null values, headers (repeated,
empty, null), explicit timestamps; checked record by record per partition."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

import pytest

from .common import CODEC_NAMES, of_kind, partition_dirs, run_program, segment_batches

if TYPE_CHECKING:
    from conftest import BrokerProcess

COUNT = 200
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
ACKS = ("all", "1", "0")


@pytest.fixture(scope="module")
def lines(broker: BrokerProcess) -> list[dict[str, Any]]:
    """One JVM: 15 producers (5 codecs x 3 acks), then 15 consumers."""
    return run_program("Clients", broker.bootstrap, "jc", str(COUNT))


def test_producer_consumer_every_codec_and_acks(lines: list[dict[str, Any]]) -> None:
    check_clients_output(lines)


def check_clients_output(lines: list[dict[str, Any]], prefix: str = "jc") -> None:
    """Record by record: what each partition holds is what was sent to it, in order."""
    assert of_kind(lines, "done"), "the program did not finish"
    assert of_kind(lines, "produce_error") == [], of_kind(lines, "produce_error")[:5]

    sent: dict[str, dict[int, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for line in of_kind(lines, "sent"):
        sent[line["topic"]][line["partition"]].append(line)
    received: dict[str, dict[int, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for line in of_kind(lines, "recv"):
        received[line["topic"]][line["partition"]].append(line)
    ends = {line["topic"]: line for line in of_kind(lines, "end_offsets")}

    topics = [f"{prefix}-{codec}-acks{acks}" for codec in CODECS for acks in ACKS]
    assert sorted(sent) == sorted(topics)
    for topic in topics:
        acks = topic.rpartition("acks")[2]
        assert sum(len(v) for v in sent[topic].values()) == COUNT
        for partition, want in sorted(sent[topic].items()):
            got = received[topic][partition]
            where = f"{topic}[{partition}]"
            assert ends[topic][str(partition)] == len(want), where
            assert len(got) == len(want), f"{where}: sent {len(want)}, read {len(got)}"
            for index, (w, g) in enumerate(zip(want, got, strict=True)):
                assert g["offset"] == index, f"{where}: record {index} at offset {g['offset']}"
                if acks != "0":  # acks=0 gets no offsets back
                    assert w["offset"] == g["offset"], f"{where}: acknowledged {w['offset']}"
                else:
                    assert w["offset"] == -1, w
                for field in ("key", "value", "headers", "timestamp"):
                    assert g[field] == w[field], (
                        f"{where} offset {index}: {field} sent {w[field]!r:.120}, "
                        f"read {g[field]!r:.120}"
                    )
                assert g["timestamp_type"] == "CreateTime"


def test_batches_are_stored_with_the_producers_codec(
    broker: BrokerProcess, lines: list[dict[str, Any]]
) -> None:
    """The batches in Tidelog's segments keep the codec the Java producer chose (the topics'
    compression.type is the default `producer`)."""
    for codec in CODECS:
        for acks in ACKS:
            topic = f"jc-{codec}-acks{acks}"
            dirs = partition_dirs(broker.data_dir, topic)
            assert len(dirs) == 3, (topic, dirs)
            total = 0
            for directory in dirs:
                for segment in sorted(directory.glob("*.log")):
                    for _base, records, codec_id in segment_batches(segment):
                        assert CODEC_NAMES[codec_id] == codec, (segment, codec_id)
                        total += records
            assert total == COUNT, topic
