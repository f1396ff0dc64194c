"""The checker of the mixed-nemesis run: counts anomalies in a history (jepsen_workload.py's
JSON lines) and in the replicas' logs, in the style of Jepsen's Kafka checker.

Counts that must be 0 (`MUST_BE_ZERO`):
- lost: a send acknowledged (ok) whose value no final read holds;
- duplicated: a value at more than one offset in the final reads;
- unexpected: a value read that no producer ever sent (corruption);
- inconsistent_offsets: one (partition, offset) with two values, across the producer's
  acknowledgements, every consumer's polls and the final reads;
- nonmonotonic_sends: per partition, acknowledged offsets not increasing in send order;
- nonmonotonic_polls: within one consumer session (between assignments), a partition's polled
  offsets not strictly increasing;
- commits_backwards: a group's committed offset for a partition going down;
- incomplete_final_reads: a partition the final read could not read up to its high watermark;
- replica_divergence: an offset whose value differs between two replicas' logs.
Reported, not required to be 0: indefinite sends (timed out: may or may not be written) and
whether they were read, definite failures that were read anyway, and unseen (acknowledged but
never polled by a group consumer before the workload stopped).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MUST_BE_ZERO = (
    "lost", "duplicated", "unexpected", "inconsistent_offsets", "nonmonotonic_sends",
    "nonmonotonic_polls", "commits_backwards", "incomplete_final_reads", "replica_divergence",
)


@dataclass
class Analysis:
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[Any]] = field(default_factory=dict)

    def ok(self) -> bool:
        return all(self.counts.get(name, 0) == 0 for name in MUST_BE_ZERO)

    def note(self, name: str, example: Any) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1
        examples = self.examples.setdefault(name, [])
        if len(examples) < 10:
            examples.append(example)


def _group_of(process: str) -> str:
    return process.rsplit("-", 1)[0]


def analyse(history: Iterable[Mapping[str, Any]],
            replicas: Mapping[str, Mapping[int, Mapping[int, str]]] | None = None) -> Analysis:
    """`replicas`: replica name -> partition -> offset -> value, read from stopped brokers."""
    result = Analysis()
    for name in MUST_BE_ZERO:
        result.counts[name] = 0
    sent: set[str] = set()
    acked: dict[str, tuple[int, int]] = {}
    indefinite: set[str] = set()
    failed: set[str] = set()
    at_offset: dict[tuple[int, int], str] = {}
    final_at: dict[str, list[tuple[int, int]]] = defaultdict(list)
    polled: set[str] = set()
    last_ack: dict[int, tuple[int, int]] = {}  # partition -> (value number, offset)
    session_position: dict[tuple[str, int], int] = {}  # (consumer, partition) -> last offset
    committed: dict[tuple[str, int], int] = {}

    def place(partition: int, offset: int, value: str, where: str) -> None:
        known = at_offset.setdefault((partition, offset), value)
        if known != value:
            result.note("inconsistent_offsets", [partition, offset, known, value, where])

    for op in history:
        process, kind, f = op["process"], op["type"], op["f"]
        if f == "send":
            if kind == "invoke":
                sent.add(op["value"])
            elif kind == "ok":
                value, partition, offset = op["value"], op["partition"], op["offset"]
                acked[value] = (partition, offset)
                place(partition, offset, value, "ack")
                number = int(value)
                previous = last_ack.get(partition)
                if previous is not None and number > previous[0] and offset <= previous[1]:
                    result.note("nonmonotonic_sends", [partition, previous, [number, offset]])
                if previous is None or number > previous[0]:
                    last_ack[partition] = (number, offset)
            elif kind == "info":
                indefinite.add(op["value"])
            else:
                failed.add(op["value"])
        elif f == "assign" and process != "final":
            for key in [key for key in session_position if key[0] == process]:
                del session_position[key]
        elif f == "poll" and kind == "ok":
            for partition, offset, value in op["records"]:
                place(partition, offset, value, process)
                polled.add(value)
                key = (process, partition)
                if key in session_position and offset <= session_position[key]:
                    result.note("nonmonotonic_polls", [process, partition,
                                                       session_position[key], offset])
                session_position[key] = offset
        elif f == "commit" and kind == "ok":
            group = _group_of(process)
            for partition, offset in op["offsets"]:
                key = (group, partition)
                if key in committed and offset < committed[key]:
                    result.note("commits_backwards", [group, partition, committed[key], offset])
                committed[key] = max(offset, committed.get(key, offset))
        elif f == "read" and process == "final":
            if not op["complete"]:
                result.note("incomplete_final_reads", [op["partition"], op["high"]])
            for partition, offset, value in op["records"]:
                place(partition, offset, value, "final")
                final_at[value].append((partition, offset))

    for value, places in final_at.items():
        if len(set(places)) > 1:
            result.note("duplicated", [value, sorted(set(places))])
        if value not in sent:
            result.note("unexpected", [value, places[0]])
    for value, where in acked.items():
        if value not in final_at:
            result.note("lost", [value, where])
    result.counts["acknowledged"] = len(acked)
    result.counts["sent"] = len(sent)
    result.counts["indefinite"] = len(indefinite)
    result.counts["indefinite_read"] = len(indefinite & final_at.keys())
    result.counts["failed"] = len(failed)
    result.counts["failed_read"] = len(failed & final_at.keys())
    result.counts["read"] = sum(len(p) for p in final_at.values())
    result.counts["unseen"] = len(acked.keys() - polled)
    result.counts["polled"] = len(polled)

    if replicas:
        names = sorted(replicas)
        partitions = {p for name in names for p in replicas[name]}
        for partition in sorted(partitions):
            logs = [replicas[name].get(partition, {}) for name in names]
            common = set.intersection(*(set(log) for log in logs)) if logs else set()
            for offset in sorted(common):
                values = {log[offset] for log in logs}
                if len(values) > 1:
                    result.note("replica_divergence", [partition, offset, sorted(values)])
            # A committed record must also sit at the same offset on every replica.
            for offset, value in ((o, v) for (p, o), v in at_offset.items() if p == partition):
                for name, log in zip(names, logs, strict=True):
                    if offset in log and log[offset] != value:
                        result.note("replica_divergence", [name, partition, offset, value,
                                                           log[offset]])
    return result
