"""A Jepsen-style checker for one partition: acknowledged writes against what replicas hold.

Inputs: the values the producer saw acknowledged (value -> offset), the values it sent in
order, and each replica's log as offset -> value. Counts must all be 0 for a correct run.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Verdict:
    lost: int  # acknowledged, but on no replica at its acknowledged offset
    duplicated: int  # a value stored at more than one offset
    reordered: int  # two values of one producer stored in the opposite order of sending
    inconsistent_offsets: int  # replicas disagree on the value at an offset both hold
    acknowledged: int

    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered or self.inconsistent_offsets)


def check(
    acknowledged: Mapping[bytes, int],
    sent_order: Sequence[bytes],
    replicas: Mapping[int, Mapping[int, bytes]],
) -> Verdict:
    reference = max(replicas.values(), key=len)  # the longest replica log
    inconsistent = 0
    for log in replicas.values():
        inconsistent += sum(1 for o, v in log.items() if o in reference and reference[o] != v)
    lost = sum(1 for value, offset in acknowledged.items() if reference.get(offset) != value)
    counts = Counter(reference.values())
    duplicated = sum(count - 1 for count in counts.values() if count > 1)
    position = {v: o for o, v in reference.items()}
    stored_in_send_order = [position[v] for v in sent_order if v in position]
    reordered = sum(1 for a, b in itertools.pairwise(stored_in_send_order) if b < a)
    return Verdict(lost, duplicated, reordered, inconsistent, len(acknowledged))
