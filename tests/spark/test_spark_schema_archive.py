"""Arrow schema vs. what PySpark expects, batch building, and the archive manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Message
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from tidelog.spark.archive import (
    MANIFEST_NAME,
    ArchivedRange,
    ArchiveError,
    Manifest,
    load_manifest,
    read_archived,
    save_manifest,
)
from tidelog.spark.schema import arrow_schema, messages_to_batch, spark_ddl


@pytest.mark.parametrize("include_headers", [False, True])
def test_arrow_schema_is_exactly_what_pyspark_expects(
    spark: SparkSession, include_headers: bool
) -> None:
    expected = to_arrow_schema(StructType.fromDDL(spark_ddl(include_headers)), timezone="UTC")
    assert arrow_schema(include_headers).equals(expected)


def test_messages_to_batch_maps_every_field() -> None:
    messages = [
        Message(topic="t", partition=3, offset=7, key=b"k", value=b"v",
                headers=[("h", b"x"), ("h2", None)], timestamp=(1, 1_700_000_000_123)),
        Message(topic="t", partition=3, offset=8, key=None, value=None, headers=None,
                timestamp=(2, 5)),
    ]
    batch = messages_to_batch(messages, "t", 3, include_headers=True)
    assert batch.schema.equals(arrow_schema(True))
    rows = batch.to_pylist()
    assert rows[0]["key"] == b"k" and rows[0]["value"] == b"v"
    assert rows[0]["topic"] == "t" and rows[0]["partition"] == 3 and rows[0]["offset"] == 7
    assert rows[0]["timestamp"].timestamp() == pytest.approx(1_700_000_000.123)
    assert rows[0]["timestampType"] == 0 and rows[1]["timestampType"] == 1
    assert rows[0]["headers"] == [{"key": "h", "value": b"x"}, {"key": "h2", "value": None}]
    assert rows[1]["key"] is None and rows[1]["value"] is None and rows[1]["headers"] is None


@pytest.mark.parametrize("offsets", [[0], [5, 6, 7, 8], [5, 7, 8], [3, 4, 9, 10]])
def test_messages_to_batch_offsets_contiguous_or_compacted(offsets: list[int]) -> None:
    # Contiguous offsets are computed on Arrow arrays; gaps (compaction) read every offset.
    messages = [Message(topic="t", partition=0, offset=o, value=b"v", timestamp=(1, o))
                for o in offsets]
    batch = messages_to_batch(messages, "t", 0, include_headers=False)
    assert batch.column("offset").to_pylist() == offsets
    assert batch.column("offset").type == pa.int64()
    assert [t.timestamp() * 1000 for t in batch.column("timestamp").to_pylist()] == offsets


def test_messages_to_batch_empty() -> None:
    assert messages_to_batch([], "t", 0, include_headers=True).num_rows == 0


def _write_part(root: Path, name: str, offsets: range) -> str:
    relative = f"topic=t/partition=0/{name}.parquet"
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({
        "key": pa.array([None] * len(offsets), pa.binary()),
        "value": pa.array([str(o).encode() for o in offsets], pa.binary()),
        "offset": pa.array(list(offsets), pa.int64()),
        "timestamp": pa.array([o * 1000 for o in offsets], pa.timestamp("ns")),
        "timestampType": pa.array([0] * len(offsets), pa.int32()),
    })
    pq.write_table(table, root / relative)
    return relative


def test_manifest_round_trips_and_rejects_gaps(tmp_path: Path) -> None:
    first = ArchivedRange("t", 0, 0, 10, (_write_part(tmp_path, "a", range(0, 10)),))
    second = ArchivedRange("t", 0, 10, 25, (_write_part(tmp_path, "b", range(10, 25)),))
    manifest = Manifest().with_range(first).with_range(second)
    save_manifest(str(tmp_path), manifest)
    loaded = load_manifest(str(tmp_path))
    assert loaded == manifest
    assert loaded.archived_start("t", 0) == 0 and loaded.archived_end("t", 0) == 25
    assert loaded.archived_end("t", 1) is None
    with pytest.raises(ArchiveError, match="starts at 30"):
        manifest.with_range(ArchivedRange("t", 0, 30, 40, ()))
    document = json.loads((tmp_path / MANIFEST_NAME).read_text())
    document["ranges"][1]["start_offset"] = 11
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(document))
    with pytest.raises(ArchiveError):
        load_manifest(str(tmp_path))
    (tmp_path / MANIFEST_NAME).write_text("{broken")
    with pytest.raises(ArchiveError):
        load_manifest(str(tmp_path))


def test_read_archived_filters_orders_and_conforms(tmp_path: Path) -> None:
    archived = ArchivedRange("t", 0, 0, 20, (_write_part(tmp_path, "a", range(0, 20)),))
    batches = list(read_archived(str(tmp_path), archived, 5, 12, include_headers=True))
    assert all(b.schema.equals(arrow_schema(True)) for b in batches)
    rows = [r for b in batches for r in b.to_pylist()]
    assert [r["offset"] for r in rows] == list(range(5, 12))
    assert rows[0]["value"] == b"5" and rows[0]["topic"] == "t" and rows[0]["headers"] is None
