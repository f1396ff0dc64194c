"""Fill a small filesystem under a PartitionLog, in a process of its own (run by
test_disk_full.py): a SIGBUS from a mapped index would kill this process, not pytest.

Usage: python disk_full_child.py DIR MODE, MODE `tmpfs` (DIR is a tiny tmpfs: fill it with a
filler file) or `rlimit` (RLIMIT_FSIZE caps every file; SIGXFSZ ignored, so writes get EFBIG).
Prints one JSON line: acknowledged offsets, the OSError seen, and what a reopen recovered.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from pathlib import Path

from tidelog.records.batch import iter_batches
from tidelog.storage.config import LogConfig
from tidelog.storage.log import PartitionLog
from tidelog.types import TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from storage.helpers import make_batch

TP = TopicPartition("full", 0)
CONFIG = LogConfig(segment_bytes=1 << 20, index_interval_bytes=64, segment_index_bytes=1 << 20)


def _fill(filler: Path, keep_bytes: int) -> None:
    """Write `filler` until only `keep_bytes` are free (0: until ENOSPC)."""
    with filler.open("wb", buffering=0) as stream:
        while True:
            stat = os.statvfs(filler.parent)
            free = stat.f_bavail * stat.f_frsize - keep_bytes
            if free <= 0:
                return
            try:
                stream.write(b"\0" * min(free, 1 << 16))
            except OSError:
                return


def main() -> None:
    root, mode = Path(sys.argv[1]), sys.argv[2]
    log = PartitionLog(TP, root / TP.dir_name, CONFIG)
    filler = root / "filler"
    if mode == "tmpfs-index":
        # 340 small batches, each with a time-index entry: the next ones cross into the time
        # index's second (sparse) page while the .log's last page still has room; then not a
        # single free page is left. Storing into that sparse page must not be a SIGBUS.
        for tag in range(340):
            log.append([make_batch(1, value_size=8, timestamp_ms=10 + tag, tag=tag)], now_ms=1)
        _fill(filler, 0)
    elif mode == "tmpfs":
        _fill(filler, 48 * 1024)
    else:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (48 * 1024, hard))
    acknowledged = [] if mode != "tmpfs-index" else list(range(340))
    error = ""
    for tag in range(10_000):
        try:
            if mode == "tmpfs-index":
                batch = make_batch(1, value_size=8, timestamp_ms=400 + tag, tag=tag)
            else:
                batch = make_batch(4, value_size=700, tag=tag)
            acknowledged.append(log.append([batch], now_ms=1).base_offset)
        except OSError as failure:
            error = failure.strerror or str(failure)
            break
    file_size = os.path.getsize(log.segments()[-1].path)
    segment_size = log.segments()[-1].size
    # Space returns; appends work again and land right after the last acknowledged batch.
    if mode.startswith("tmpfs"):
        filler.unlink()
    else:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    after = log.append([make_batch(1, tag=99_999)], now_ms=1).base_offset
    log.close()
    reopened = PartitionLog(TP, root / TP.dir_name, CONFIG, clean=False)
    offsets = []
    for segment in reopened.segments():
        offsets += [batch.base_offset for batch in iter_batches(Path(segment.path).read_bytes())]
    print(json.dumps({
        "acknowledged": acknowledged, "error": error, "file_size": file_size,
        "segment_size": segment_size, "after": after, "recovered": offsets,
        "truncated_bytes": reopened.truncated_bytes,
    }))


if __name__ == "__main__":
    main()
