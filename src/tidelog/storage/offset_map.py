"""The log cleaner's offset map: key digest -> latest offset, in a fixed memory budget.

Kafka's SkimpyOffsetMap: one preallocated buffer of slots, open addressing with linear probing,
never resized, so the cleaner's memory is exactly `memory_bytes` however many keys a log holds.
A full map is not an error: the cleaner stops the dirty scan at a batch boundary and cleans
what the map covers; the rest waits for the next pass.

Slot layout (24 bytes, in memory only)::

    0   digest  16 bytes  BLAKE2b-128 of the record key (all zeros = empty slot)
    16  offset  int64     big-endian, the latest offset seen for that key

Two keys with the same 128-bit digest would be treated as one key (the older record of the
other key would be dropped); the odds are those of an MD5 collision in Kafka's map.
Not thread-safe; owned by the cleaner.
"""

from __future__ import annotations

import hashlib
import struct

DIGEST_BYTES = 16
SLOT_BYTES = DIGEST_BYTES + 8
LOAD_FACTOR = 0.9  # Kafka's log.cleaner.io.buffer.load.factor default
_EMPTY = bytes(DIGEST_BYTES)
_OFFSET = struct.Struct(">q")


def key_digest(key: bytes) -> bytes:
    """The 16-byte digest the map stores; never the all-zero empty marker."""
    digest = hashlib.blake2b(key, digest_size=DIGEST_BYTES).digest()
    return digest if digest != _EMPTY else b"\x00" * (DIGEST_BYTES - 1) + b"\x01"


class OffsetMap:
    """Key digest -> latest offset. `put` refuses nothing; callers check `free_slots` first."""

    __slots__ = ("_buffer", "_slots", "entries", "latest_offset", "max_entries")

    def __init__(self, memory_bytes: int) -> None:
        slots = memory_bytes // SLOT_BYTES
        if slots < 2:
            raise ValueError(f"offset map needs at least {2 * SLOT_BYTES} bytes")
        self._slots = slots
        self._buffer = bytearray(slots * SLOT_BYTES)
        self.max_entries = max(1, int(slots * LOAD_FACTOR))
        self.entries = 0
        self.latest_offset = -1

    @property
    def memory_bytes(self) -> int:
        return len(self._buffer)

    @property
    def free_slots(self) -> int:
        return self.max_entries - self.entries

    def clear(self) -> None:
        self._buffer[:] = bytes(len(self._buffer))
        self.entries = 0
        self.latest_offset = -1

    def _slot_of(self, digest: bytes) -> int:
        """Position of `digest`'s slot, or of the empty slot where it would go."""
        buffer = self._buffer
        slots = self._slots
        slot = int.from_bytes(digest[:8], "big") % slots
        while True:
            position = slot * SLOT_BYTES
            stored = buffer[position : position + DIGEST_BYTES]
            if stored in (digest, _EMPTY):
                return position
            slot = slot + 1 if slot + 1 < slots else 0

    def put(self, digest: bytes, offset: int) -> None:
        if self.entries >= self.max_entries:
            raise AssertionError("offset map full: the caller must check free_slots")
        position = self._slot_of(digest)
        if self._buffer[position : position + DIGEST_BYTES] == _EMPTY:
            self._buffer[position : position + DIGEST_BYTES] = digest
            self.entries += 1
        _OFFSET.pack_into(self._buffer, position + DIGEST_BYTES, offset)
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, digest: bytes) -> int:
        """The latest offset recorded for `digest`, or -1."""
        position = self._slot_of(digest)
        if self._buffer[position : position + DIGEST_BYTES] == _EMPTY:
            return -1
        value: int = _OFFSET.unpack_from(self._buffer, position + DIGEST_BYTES)[0]
        return value
