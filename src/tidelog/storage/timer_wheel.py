"""A hierarchical timing wheel of (due time, timer id) pairs: delayed delivery's index (D16).

Pure and synchronous: the caller passes the time in (`now_ms`) and gets back the entries that
became due. It holds no record bodies: each entry is a due time, a timer id (the record's
offset in `__tidelog_timer`) and a small integer tag (the caller's target-partition index),
kept in `array` columns, 20 bytes an entry, so millions of pending records fit in tens of MiB.

Layout (Linux's timer wheel, as RocketMQ 5's TimerWheel and Kafka's TimingWheel do it): time
is counted in ticks of `tick_ms`; level L has `WHEEL_SIZE` (64) slots, each spanning
64^L ticks. An entry due at tick t goes to the lowest level L whose next-coarser block
(t >> 6(L+1)) is the current tick's block, in slot (t >> 6L) & 63; so a level-0 entry waits
for its exact tick and a level-L entry waits in a slot the wheel has not reached yet. When the
current tick enters a new level-L slot (its low 6L bits are zero), that slot's entries are
re-inserted (they fall to lower levels), the highest level first; then level 0's slot for the
tick expires. Entries due in the next top-level block wait in an overflow slot until the wheel
enters that block. Five levels of 100 ms ticks span 64^5 ticks (about 3.4 years); the config caps
delays at a year (`storage.config.MAX_DELIVERY_DELAY_MS`).

An entry expires at the first `advance` whose `now_ms` reaches the *end* of its tick, so it is
never early and at most one tick (plus the caller's scheduling) late. Entries already due when
added go straight to the ready list. `advance` walks tick by tick but jumps over runs of empty
ticks, so a broker that was down for hours catches up in one call.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass

WHEEL_BITS = 6
WHEEL_SIZE = 1 << WHEEL_BITS
LEVELS = 5
_SPAN_BITS = WHEEL_BITS * LEVELS
DEFAULT_TICK_MS = 100


@dataclass(frozen=True, slots=True)
class Expired:
    """Entries that became due in one `advance`, in the column form they were kept in."""

    due_ms: array[int]
    timer_ids: array[int]
    tags: array[int]

    def __len__(self) -> int:
        return len(self.timer_ids)

    def __iter__(self) -> Iterator[tuple[int, int, int]]:
        return iter(zip(self.due_ms, self.timer_ids, self.tags, strict=True))


class _Slot:
    __slots__ = ("due_ms", "tags", "timer_ids")

    def __init__(self) -> None:
        self.due_ms = array("q")
        self.timer_ids = array("q")
        self.tags = array("i")

    def add(self, due_ms: int, timer_id: int, tag: int) -> None:
        self.due_ms.append(due_ms)
        self.timer_ids.append(timer_id)
        self.tags.append(tag)

    def take(self) -> tuple[array[int], array[int], array[int]]:
        taken = (self.due_ms, self.timer_ids, self.tags)
        self.due_ms, self.timer_ids, self.tags = array("q"), array("q"), array("i")
        return taken


class TimingWheel:
    def __init__(self, now_ms: int, tick_ms: int = DEFAULT_TICK_MS) -> None:
        if tick_ms <= 0:
            raise ValueError("tick_ms must be positive")
        self.tick_ms = tick_ms
        # Ticks up to and including `current_tick` have expired (their end passed).
        self.current_tick = now_ms // tick_ms - 1
        self._levels = [[_Slot() for _ in range(WHEEL_SIZE)] for _ in range(LEVELS)]
        self._counts = [0] * LEVELS  # entries per level: empty levels are skipped
        self._ready = _Slot()
        self._overflow = _Slot()  # due in the next top-level block (past a 2^30-tick boundary)
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, due_ms: int, timer_id: int, tag: int = 0) -> None:
        """Schedule `timer_id` for `due_ms`; already due: returned by the next `advance`.
        A due time past the wheel's span raises ValueError (callers cap delays first)."""
        self._place(due_ms, timer_id, tag)
        self._size += 1

    def _place(self, due_ms: int, timer_id: int, tag: int, cascading: bool = False) -> None:
        """`cascading`: re-inserted while the current tick is being entered, so an entry of
        that very tick goes to level 0 (expired right after), not to the ready list."""
        tick = due_ms // self.tick_ms
        current = self.current_tick
        if tick < current or (tick == current and not cascading):
            self._ready.add(due_ms, timer_id, tag)
            return
        for level in range(LEVELS):
            coarser = WHEEL_BITS * (level + 1)
            if tick >> coarser == current >> coarser:
                slot = (tick >> (WHEEL_BITS * level)) & (WHEEL_SIZE - 1)
                self._levels[level][slot].add(due_ms, timer_id, tag)
                self._counts[level] += 1
                return
        if (tick >> _SPAN_BITS) - (current >> _SPAN_BITS) > 1:
            raise ValueError(f"due time {due_ms} is past the wheel's span")
        # In the next top-level block: re-placed when the wheel enters it.
        self._overflow.add(due_ms, timer_id, tag)

    def advance(self, now_ms: int) -> Expired:
        """Expire every tick whose end is at or before `now_ms`; returns their entries (and
        any added already due), in tick order."""
        out_due, out_ids, out_tags = self._ready.take()
        last = (now_ms + 1) // self.tick_ms - 1  # the last tick whose end <= now_ms
        while self.current_tick < last:
            if self._size - len(out_ids) == 0:
                self.current_tick = last  # nothing pending: jump
                break
            tick = self.current_tick + 1
            tick = self._skip_empty(tick, last)
            self.current_tick = tick
            if tick & ((1 << _SPAN_BITS) - 1) == 0 and self._overflow.timer_ids:
                for entry in zip(*self._overflow.take(), strict=True):
                    self._place(*entry, cascading=True)
            for level in range(LEVELS - 1, 0, -1):
                shift = WHEEL_BITS * level
                if tick & ((1 << shift) - 1) == 0 and self._counts[level]:
                    slot = self._levels[level][(tick >> shift) & (WHEEL_SIZE - 1)]
                    if slot.timer_ids:
                        due, ids, tags = slot.take()
                        self._counts[level] -= len(ids)
                        for entry in zip(due, ids, tags, strict=True):
                            self._place(*entry, cascading=True)
            slot = self._levels[0][tick & (WHEEL_SIZE - 1)]
            if slot.timer_ids:
                due, ids, tags = slot.take()
                self._counts[0] -= len(ids)
                out_due.extend(due)
                out_ids.extend(ids)
                out_tags.extend(tags)
        self._size -= len(out_ids)
        return Expired(out_due, out_ids, out_tags)

    def _skip_empty(self, tick: int, last: int) -> int:
        """The first tick in [tick, last] at which something happens: a level-0 slot with
        entries, or a cascade of a non-empty higher level. Saves walking idle ticks one by
        one (a wheel holding only far-away entries)."""
        if self._counts[0]:
            return tick
        # Only higher levels hold entries: the next event is the next level-1 boundary at
        # the earliest (a cascade), which may land entries anywhere in level 0.
        boundary = (tick + WHEEL_SIZE - 1) & ~(WHEEL_SIZE - 1)
        return min(max(tick, boundary), last)

    def _all_slots(self) -> Iterator[_Slot]:
        """Every slot in the order its entries fall due: the ready list, level 0 from the
        current tick on, then each coarser level (a level's entries all lie beyond the finer
        levels' block), the overflow slot last. Entries inside one slot are unordered."""
        yield self._ready
        for level, slots in enumerate(self._levels):
            first = ((self.current_tick >> (WHEEL_BITS * level)) & (WHEEL_SIZE - 1)) + 1
            yield from slots[first:]
            yield from slots[:first]  # empty by construction; kept for completeness
        yield self._overflow

    def entries(self) -> Iterator[tuple[int, int, int]]:
        """Every pending (due_ms, timer_id, tag), slot by slot in due order (entries within
        one slot are unordered): a caller may stop early once it has seen enough."""
        for slot in self._all_slots():
            yield from zip(slot.due_ms, slot.timer_ids, slot.tags, strict=True)

    def next_due_per_tag(self, tags: set[int]) -> dict[int, int]:
        """The earliest due time of each of `tags`, scanning slots in due order and stopping
        once every tag is found (cheap when they are all due soon)."""
        found: dict[int, int] = {}
        for slot in self._all_slots():
            for due_ms, tag in zip(slot.due_ms, slot.tags, strict=True):
                current = found.get(tag)
                if current is None or due_ms < current:
                    found[tag] = due_ms
            if len(found) >= len(tags) and tags <= found.keys():
                break
        return found

    def min_timer_id(self) -> int | None:
        """The smallest pending timer id (the timer log may be deleted below it)."""
        lowest: int | None = None
        for slot in self._all_slots():
            if slot.timer_ids:
                candidate = min(slot.timer_ids)
                lowest = candidate if lowest is None else min(lowest, candidate)
        return lowest

    def next_due_ms(self) -> int | None:
        """The earliest pending due time."""
        for slot in self._all_slots():
            if slot.due_ms:
                return min(slot.due_ms)
        return None
