"""Producer id allocation that never repeats an id, across restarts.

File `producer-id-block` in the data dir (ASCII decimal, rewritten atomically)::

    <next_block_start>    the first id not yet handed to any block; ids below it may be in use

Ids are reserved in blocks of BLOCK_SIZE: the file is advanced past a block before any id of the
block is handed out, so a crash can skip ids but never reuse one (Kafka's ProducerIdManager).
Blocking file I/O once per block.
"""

from __future__ import annotations

from pathlib import Path

from tidelog.broker.metadata import write_atomically

BLOCK_FILE = "producer-id-block"
BLOCK_SIZE = 1000


class ProducerIdAllocator:
    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / BLOCK_FILE
        self._next_id = int(self._path.read_text("ascii")) if self._path.exists() else 0
        self._block_end = self._next_id  # nothing reserved yet in this process

    def allocate(self) -> int:
        if self._next_id >= self._block_end:
            block_end = self._next_id + BLOCK_SIZE
            write_atomically(self._path, str(block_end).encode("ascii"))
            self._block_end = block_end
        producer_id = self._next_id
        self._next_id += 1
        return producer_id
