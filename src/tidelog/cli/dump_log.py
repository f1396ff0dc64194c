"""`tidelog dump-log PATH`: read segment files from disk, like kafka-dump-log.

PATH is one `.log` segment or a partition directory (every `*.log` in base-offset order). For
each batch it prints position, offsets, count, timestamps, codec, producer fields, size and
whether the CRC32C matches; `--records` also decodes each record (offset, timestamp, key,
value, headers). Bytes after the last whole batch are reported as a torn tail.

Reads only; safe on a live broker's files (a batch being appended shows up as a torn tail).
Exit status 1 when any batch fails its CRC or decodes badly, so scripts can check a copy.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path

import click
from rich.console import Console

from tidelog.errors import CorruptRecordError
from tidelog.records.batch import HEADER_SIZE, RecordBatch, TimestampType, peek_batch_size
from tidelog.records.record import iter_records

out = Console(highlight=False, soft_wrap=True)


@dataclass(slots=True)
class SegmentSummary:
    path: Path
    batches: int = 0
    records: int = 0
    invalid: int = 0
    torn_tail_bytes: int = 0
    first_offset: int = -1
    last_offset: int = -1


def _show(data: bytes | None, limit: int) -> str:
    if data is None:
        return "null"
    text = data.decode("utf-8", errors="backslashreplace")
    return text if len(text) <= limit else text[:limit] + "..."


def _print_records(batch: RecordBatch, summary: SegmentSummary, limit: int) -> None:
    append_time = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    kind = "LogAppendTime" if append_time else "CreateTime"
    try:
        for record in iter_records(batch):
            headers = ", ".join(f"{k}={_show(v, limit)}" for k, v in record.headers)
            out.print(
                f"| offset: {record.offset} {kind}: {record.timestamp} "
                f"keySize: {-1 if record.key is None else len(record.key)} "
                f"valueSize: {-1 if record.value is None else len(record.value)} "
                f"key: {_show(record.key, limit)} value: {_show(record.value, limit)}"
                + (f" headers: [{headers}]" if headers else ""),
                markup=False,
            )
    except CorruptRecordError as exc:
        summary.invalid += 1
        out.print(f"| records undecodable: {exc}", markup=False)


def dump_segment(path: Path, *, records: bool, value_limit: int) -> SegmentSummary:
    summary = SegmentSummary(path)
    out.print(f"Dumping {path}", markup=False)
    size = path.stat().st_size
    if size == 0:
        return summary
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
        position = 0
        while size - position >= HEADER_SIZE:
            batch_size = peek_batch_size(memoryview(view)[position : position + 12], 0)
            if batch_size < HEADER_SIZE or position + batch_size > size:
                break
            # mmap slicing copies this one batch: no view outlives the mapping
            batch = RecordBatch(view[position : position + batch_size])
            valid = batch.is_valid()
            summary.batches += 1
            summary.records += batch.records_count
            summary.invalid += 0 if valid else 1
            if summary.first_offset < 0:
                summary.first_offset = batch.base_offset
            summary.last_offset = batch.last_offset
            out.print(
                f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} "
                f"count: {batch.records_count} baseSequence: {batch.base_sequence} "
                f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
                f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
                f"isTransactional: {str(batch.is_transactional).lower()} "
                f"isControl: {str(batch.is_control).lower()} position: {position} "
                f"baseTimestamp: {batch.base_timestamp} maxTimestamp: {batch.max_timestamp} "
                f"timestampType: {batch.timestamp_type.name} size: {batch_size} "
                f"magic: {batch.magic} compresscodec: {batch.codec.name} crc: {batch.crc} "
                f"isValid: {str(valid).lower()}",
                markup=False,
            )
            if records and valid:
                _print_records(batch, summary, value_limit)
            position += batch_size
        summary.torn_tail_bytes = size - position
    if summary.torn_tail_bytes:
        out.print(
            f"torn tail: {summary.torn_tail_bytes} bytes after position {position} "
            "do not form a whole batch",
            markup=False,
        )
    return summary


def _segments(path: Path) -> list[Path]:
    if path.is_dir():
        found = sorted(path.glob("*.log"), key=lambda p: (len(p.stem), p.stem))
        if not found:
            raise click.ClickException(f"{path} holds no .log segment files")
        return found
    if path.suffix != ".log":
        raise click.ClickException(f"{path} is not a .log segment file or a partition directory")
    return [path]


@click.command("dump-log")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--records", is_flag=True, help="Decode and print every record.")
@click.option(
    "--max-value-chars",
    default=100,
    show_default=True,
    help="Truncate printed keys, values and header values.",
)
def dump_log_command(path: Path, records: bool, max_value_chars: int) -> None:
    """Print the batches of a segment file or partition directory, with CRC status."""
    summaries = [
        dump_segment(p, records=records, value_limit=max_value_chars) for p in _segments(path)
    ]
    for s in summaries:
        offsets = f"offsets {s.first_offset}..{s.last_offset}" if s.batches else "no offsets"
        out.print(
            f"summary {s.path.name}: {s.batches} batches, {s.records} records, {offsets}, "
            f"{s.invalid} invalid, {s.torn_tail_bytes} torn tail bytes",
            markup=False,
        )
    invalid = sum(s.invalid for s in summaries)
    if invalid:
        raise click.ClickException(f"{invalid} corrupt batch(es) found")
