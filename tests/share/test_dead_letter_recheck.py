"""The dead-letter copy after a restart: ARCHIVING records whose copy was appended just before
a crash are found in the dead-letter partition and not copied twice (broker objects, no
server: the copy path is synchronous)."""

from __future__ import annotations

from pathlib import Path

from tidelog.broker.config import BrokerConfig
from tidelog.broker.share.dead_letter import OFFSET_HEADER, copy_dead_letters
from tidelog.broker.state import Broker
from tidelog.coordinator.share_partition import (
    AcknowledgementBatch,
    LogBatch,
    SharePartition,
    ShareSettings,
)
from tidelog.records.batch import RecordBatch, iter_batches
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.record import iter_records

SETTINGS = ShareSettings(1000, 5, 100, dead_letter=True)


def dead_letter_offsets(broker: Broker) -> list[int]:
    partition_log = broker.partition_log("dlq.src", 0)
    read = partition_log.read(0, 1 << 20)
    data = b"".join(piece.read_bytes() for piece in read.slices)
    return [int(dict(record.headers)[OFFSET_HEADER] or b"-1")
            for batch in iter_batches(data) for record in iter_records(batch)]


def test_a_restart_copies_only_what_is_missing(tmp_path: Path) -> None:
    config = BrokerConfig(data_dir=tmp_path, errors_deadletterqueue_auto_create_topics_enable=True)
    broker = Broker(config)
    try:
        broker.create_topic("src", 1, {})
        values = [NewRecord(value=f"v{i}".encode(), key=None) for i in range(3)]
        broker.partition_log("src", 0).append(
            [RecordBatch(memoryview(build_batch(values, now_ms=0)))], now_ms=0)
        partition = SharePartition(0, SETTINGS)
        partition.acquire("m", [LogBatch(0, 2)], 10, now_ms=0)
        partition.acknowledge("m", [AcknowledgementBatch(0, 2, (3,))], 1)  # reject all three
        assert sorted(partition.dead_letters) == [0, 1, 2]
        # The copies of 0 and 1 were appended, then the broker crashed before writing ARCHIVED:
        first = SharePartition(0, SETTINGS)
        first.restore(0, partition.state_batches())
        first.dead_letters = {o: r for o, r in first.dead_letters.items() if o < 2}
        copy_dead_letters(broker, "g", "src", 0, first, "dlq.src", recheck=False)
        assert dead_letter_offsets(broker) == [0, 1]
        # After the restart all three are ARCHIVING again; only 2 is copied.
        restored = SharePartition(0, SETTINGS)
        restored.restore(0, partition.state_batches())
        assert sorted(restored.dead_letters) == [0, 1, 2]
        done = copy_dead_letters(broker, "g", "src", 0, restored, "dlq.src", recheck=True)
        assert sorted(done) == [0, 1, 2]
        assert dead_letter_offsets(broker) == [0, 1, 2]
        restored.dead_lettered(done)
        assert restored.start_offset == 3
    finally:
        broker.close()
