"""The sink's marker index against a real broker: incremental reads, bounded memory."""

from __future__ import annotations

from confluent_kafka import Producer

from tidelog.spark.markers import KEEP_BATCHES, MarkerIndex


def _write(bootstrap: str, topic: str, *keys: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for key in keys:
        producer.produce(topic, b"{}", key.encode(), partition=0)
    assert producer.flush(30) == 0


def test_index_reads_new_markers_and_keeps_only_recent_batches(bootstrap, new_topic) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic()
    index = MarkerIndex({"bootstrap.servers": bootstrap}, topic)
    try:
        assert not index.contains("q/0", "q/0/1")  # empty topic
        _write(bootstrap, topic, "q/0/0", "q/0/1", "q/0", "other/7/0", "not a marker")
        assert index.contains("q/0/1")
        assert index.contains("q/0")
        assert not index.contains("q/1", "q/1/0")
        assert index.contains("other/7/0") and not index.contains("other/7")
        # A task retry's marker written after the last look is seen on the next look.
        _write(bootstrap, topic, "q/1/0")
        assert index.contains("q/1", "q/1/0")
        # Old batches of a query are forgotten once KEEP_BATCHES newer ones exist.
        _write(bootstrap, topic, *(f"q/{b}" for b in range(2, 2 + KEEP_BATCHES)))
        assert not index.contains("q/0")
        assert index.contains(f"q/{1 + KEEP_BATCHES}")
        assert index.contains("other/7/0")  # other queries keep theirs
    finally:
        index.close()
