"""Tiered archive: archive old offsets to Parquet, then read archive + live as one DataFrame."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from tidelog.spark.archive import load_manifest
from tidelog.spark.archive_job import run_archive

from .helpers import by_partition, produce, reader


def test_archive_then_read_across_the_boundary(spark, bootstrap, new_topic, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(partitions=2)
    sent = by_partition(produce(bootstrap, topic, 100, partitions=2))  # offsets 0..49 each
    root = tmp_path / "archive"
    config = {"bootstrap.servers": bootstrap}
    results = run_archive(spark, config, str(root), topic, before_offset=20)
    assert [(r.partition, r.start_offset, r.end_offset) for r in results] == [(0, 0, 20),
                                                                              (1, 0, 20)]
    # A second run through the CLI continues where the manifest ends.
    subprocess.run(
        [str(Path(sys.executable).with_name("tidelog")), "archive", "-b", bootstrap,
         "--topic", topic, "--before", "30", "--to", str(root)],
        check=True, timeout=180, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    manifest = load_manifest(str(root))
    assert [(r.start_offset, r.end_offset) for r in manifest.ranges_of(topic, 0)] == [(0, 20),
                                                                                     (20, 30)]
    # Retention may now drop the archived offsets from the broker.
    admin = AdminClient(config)
    futures = admin.delete_records([TopicPartition(topic, p, 25) for p in (0, 1)])
    for future in futures.values():
        future.result(30)
    frame = reader(spark, bootstrap, subscribe=topic, includeHeaders="true",
                   **{"archive.path": str(root)})
    rows = sorted(frame.collect(), key=lambda r: (r.partition, r.offset))
    for partition, records in sent.items():
        own = [r for r in rows if r.partition == partition]
        assert [r.offset for r in own] == list(range(50))  # no gap, no overlap
        for row, record in zip(own, records, strict=True):
            assert (bytes(row.value) if row.value is not None else None) == record.value
            assert (bytes(row.key) if row.key is not None else None) == record.key
            assert len(row.headers or []) == len(record.headers)
    # Without the archive the deleted offsets are data loss; with it a range read starts
    # inside the archive and ends in the live log.
    window = reader(spark, bootstrap, subscribe=topic, **{"archive.path": str(root)},
                    startingOffsets=json.dumps({topic: {"0": 15, "1": 28}}),
                    endingOffsets=json.dumps({topic: {"0": 35, "1": -1}})).collect()
    assert sorted((r.partition, r.offset) for r in window) == \
        [(0, o) for o in range(15, 35)] + [(1, o) for o in range(28, 50)]
