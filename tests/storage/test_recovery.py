"""Damage and recovery: recovery keeps exactly the valid prefix, never serves a bad CRC, and
rebuilt indexes equal the ones written by a log that only ever held that prefix."""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from tidelog.records.batch import RecordBatch
from tidelog.storage.config import LogConfig
from tidelog.storage.log import PartitionLog
from tidelog.types import TopicPartition

from .helpers import all_batches, flip_bit, index_files, linear_offset_lookup, make_batch, read_all

TP = TopicPartition("damaged", 3)
CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=100, segment_index_bytes=4096)


def build_log(directory: Path, seed: int = 7) -> list[bytes]:
    """A closed log of several segments; returns every batch's bytes in order."""
    rng = random.Random(seed)
    log = PartitionLog(TP, directory, CONFIG)
    for number in range(34):
        batch = make_batch(rng.randint(1, 4), value_size=rng.randint(10, 120),
                           timestamp_ms=rng.randint(0, 5000), tag=number)
        log.append([batch], now_ms=0)
    for number in range(2):  # two small batches at the end: cut at every byte of them
        log.append([make_batch(1, value_size=40, timestamp_ms=6000 + number, tag=99)], now_ms=0)
    log.close()
    return [bytes(b.buffer) for b in all_batches_of(directory)]


def all_batches_of(directory: Path) -> list[RecordBatch]:
    log = PartitionLog(TP, directory, CONFIG)
    try:
        return [RecordBatch(bytes(b.buffer)) for b in all_batches(log)]
    finally:
        log.close()


def reference_indexes(tmp: Path, prefix: Sequence[bytes]) -> dict[str, bytes]:
    """Index files of a log that was only ever given `prefix` (then closed)."""
    directory = tmp / "reference"
    shutil.rmtree(directory, ignore_errors=True)
    log = PartitionLog(TP, directory, CONFIG)
    for raw in prefix:
        log.append([RecordBatch(memoryview(bytearray(raw)))], now_ms=0)
    log.close()
    return index_files(directory)


def recover(directory: Path, recovery_point: int = 0) -> PartitionLog:
    return PartitionLog(TP, directory, CONFIG, clean=False, recovery_point=recovery_point)


def assert_serves_exactly(log: PartitionLog, prefix: Sequence[bytes]) -> None:
    served = read_all(log)
    assert [bytes(b.buffer) for b in served] == list(prefix)
    assert all(b.is_valid() for b in served)
    expected_end = RecordBatch(prefix[-1]).next_offset if prefix else 0
    assert log.log_end_offset == expected_end
    stored = [RecordBatch(raw) for raw in prefix]
    for offset in range(0, log.log_end_offset, 3):
        header = log.read(offset, 1).slices[0].read_bytes()
        assert RecordBatch(header).base_offset == linear_offset_lookup(stored, offset)


def check_indexes(directory: Path, tmp: Path, prefix: Sequence[bytes]) -> None:
    rebuilt = index_files(directory)
    reference = reference_indexes(tmp, prefix)
    for name, content in rebuilt.items():
        assert content == reference.get(name, b""), name


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[bytes]]:
    directory = tmp_path_factory.mktemp("original") / TP.dir_name
    return directory, build_log(directory)


def fresh_copy(original: Path, tmp: Path) -> Path:
    target = tmp / TP.dir_name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(original, target)
    return target


def segment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def test_clean_reopen_keeps_everything(
    original: tuple[Path, list[bytes]], tmp_path: Path
) -> None:
    source, batches = original
    directory = fresh_copy(source, tmp_path)
    log = PartitionLog(TP, directory, CONFIG, clean=True)
    assert log.recovered_segments == 0
    assert_serves_exactly(log, batches)
    log.close()
    log = recover(directory)
    assert log.recovered_segments == len(segment_files(directory))
    assert log.truncated_bytes == 0
    assert_serves_exactly(log, batches)
    log.close()
    check_indexes(directory, tmp_path, batches)


def test_truncate_last_segment_at_every_byte_of_last_two_batches(
    original: tuple[Path, list[bytes]], tmp_path: Path
) -> None:
    source, batches = original
    last = segment_files(source)[-1]
    size = last.stat().st_size
    tail = len(batches[-1]) + len(batches[-2])
    assert size >= tail
    for cut in range(size - tail, size):
        directory = fresh_copy(source, tmp_path)
        os.truncate(directory / last.name, cut)
        survivors = batches[:-1] if cut >= size - len(batches[-1]) else batches[:-2]
        log = recover(directory)
        assert_serves_exactly(log, survivors)
        log.close(flush=False)  # recovery already fsynced; skip the rest to keep this fast
        if cut in (size - tail, size - tail + 1, size - 1):
            check_indexes(directory, tmp_path, survivors)


def batch_spans(directory: Path) -> list[tuple[str, int, int]]:
    """(file name, start, end) of every batch, in log order."""
    spans = []
    for path in segment_files(directory):
        data = path.read_bytes()
        position = 0
        while position < len(data):
            size = RecordBatch(data[position:]).size
            spans.append((path.name, position, position + size))
            position += size
    return spans


def test_random_bit_flips_keep_the_prefix_before_the_damage(
    original: tuple[Path, list[bytes]], tmp_path: Path
) -> None:
    source, batches = original
    spans = batch_spans(source)
    rng = random.Random(2024)
    for _ in range(60):
        victim = rng.randrange(len(spans))
        name, start, end = spans[victim]
        # bytes 0-7 (baseOffset) and 12-15 (leader epoch) are not under the CRC, as in Kafka
        field = rng.choice([rng.randrange(8, 12), rng.randrange(16, end - start)])
        directory = fresh_copy(source, tmp_path)
        flip_bit(directory / name, start + field, rng.randrange(8))
        log = recover(directory)
        assert_serves_exactly(log, batches[:victim])
        assert log.truncated_bytes > 0
        log.close(flush=False)
        if victim % 5 == 0:
            check_indexes(directory, tmp_path, batches[:victim])


@pytest.mark.parametrize(
    "garbage",
    [b"\x00", b"\xff" * 11, bytes(61), os.urandom(200),
     # a plausible header that claims more bytes than exist
     (10**6).to_bytes(8, "big") + (5000).to_bytes(4, "big") + bytes(80)],
)
def test_garbage_after_the_last_batch_is_cut(
    original: tuple[Path, list[bytes]], tmp_path: Path, garbage: bytes
) -> None:
    source, batches = original
    directory = fresh_copy(source, tmp_path)
    with open(segment_files(directory)[-1], "ab") as file:
        file.write(garbage)
    log = recover(directory)
    assert log.truncated_bytes == len(garbage)
    assert_serves_exactly(log, batches)
    log.append([make_batch(2)], now_ms=0)  # and the log goes on from there
    assert read_all(log)[-1].base_offset == RecordBatch(batches[-1]).next_offset
    log.close()


def test_damage_in_a_middle_segment_drops_later_segments(
    original: tuple[Path, list[bytes]], tmp_path: Path
) -> None:
    source, batches = original
    spans = batch_spans(source)
    names = [p.name for p in segment_files(source)]
    middle = names[len(names) // 2]
    victim = next(i for i, span in enumerate(spans) if span[0] == middle) + 1
    directory = fresh_copy(source, tmp_path)
    flip_bit(directory / middle, spans[victim][1] + 40, 3)
    log = recover(directory)
    assert [p.name for p in segment_files(directory)] == names[: names.index(middle) + 1]
    assert_serves_exactly(log, batches[:victim])
    log.close()


def test_segments_below_the_recovery_point_are_trusted(
    original: tuple[Path, list[bytes]], tmp_path: Path
) -> None:
    source, batches = original
    directory = fresh_copy(source, tmp_path)
    bases = [int(p.stem) for p in segment_files(directory)]
    log = recover(directory, recovery_point=bases[-1])
    assert log.recovered_segments == 1
    assert_serves_exactly(log, batches)
    log.close()


@pytest.mark.parametrize("damage", ["delete", "odd_size", "zeros", "random", "decreasing"])
@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_missing_or_corrupt_index_files_are_rebuilt_equal(
    original: tuple[Path, list[bytes]], tmp_path: Path, damage: str, suffix: str
) -> None:
    source, batches = original
    directory = fresh_copy(source, tmp_path)
    originals = index_files(directory)
    rng = random.Random(damage + suffix)
    for path in sorted(directory.glob(f"*{suffix}")):
        size = path.stat().st_size
        if damage == "delete":
            path.unlink()
        elif damage == "odd_size":
            with open(path, "ab") as file:
                file.write(b"\x01")
        elif damage == "zeros" and size:
            path.write_bytes(bytes(size))
        elif damage == "random" and size:
            path.write_bytes(rng.randbytes(size))
        elif damage == "decreasing" and size >= 2 * (8 if suffix == ".index" else 12):
            entry = 8 if suffix == ".index" else 12
            content = path.read_bytes()
            path.write_bytes(content[entry : 2 * entry] + content[:entry] + content[2 * entry :])
    for clean in (True, False):
        log = PartitionLog(TP, directory, CONFIG, clean=clean)
        assert_serves_exactly(log, batches)
        for timestamp in (0, 2500, 6001):
            expected = next(
                ((RecordBatch(b).base_offset, RecordBatch(b).max_timestamp) for b in batches
                 if RecordBatch(b).max_timestamp >= timestamp), None)
            assert log.offset_for_timestamp(timestamp) == expected
        log.close()
        assert index_files(directory) == originals
