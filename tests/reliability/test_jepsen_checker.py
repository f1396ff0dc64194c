"""The mixed-nemesis checker counts each anomaly it claims to (a history built by hand per
anomaly), and a clean history passes."""

from __future__ import annotations

from typing import Any

from reliability.jepsen_checker import MUST_BE_ZERO, analyse


def op(process: str, kind: str, f: str, **fields: Any) -> dict[str, Any]:
    return {"t": 0.0, "process": process, "type": kind, "f": f, **fields}


def clean() -> list[dict[str, Any]]:
    return [
        op("producer", "invoke", "send", value="0", partition=0),
        op("producer", "ok", "send", value="0", partition=0, offset=0),
        op("producer", "invoke", "send", value="1", partition=0),
        op("producer", "ok", "send", value="1", partition=0, offset=1),
        op("classic-0", "ok", "assign", partitions=[0]),
        op("classic-0", "ok", "poll", records=[[0, 0, "0"], [0, 1, "1"]]),
        op("classic-0", "ok", "commit", offsets=[[0, 2]]),
        op("final", "ok", "read", partition=0, high=2, complete=True,
           records=[[0, 0, "0"], [0, 1, "1"]]),
    ]


def plus(*ops: dict[str, Any]) -> list[dict[str, Any]]:
    return [*clean(), *ops]


def but_final(*ops: dict[str, Any]) -> list[dict[str, Any]]:
    return [*clean()[:-1], *ops]


def test_clean_history_passes() -> None:
    result = analyse(clean(), {"b1": {0: {0: "0", 1: "1"}}, "b2": {0: {0: "0", 1: "1"}}})
    assert result.ok(), result.counts
    assert result.counts["acknowledged"] == 2 and result.counts["read"] == 2


def test_each_anomaly_is_counted() -> None:
    def final(high: int, records: list[list[Any]], complete: bool = True) -> dict[str, Any]:
        return op("final", "ok", "read", partition=0, high=high, complete=complete,
                  records=records)

    cases: dict[str, list[dict[str, Any]]] = {
        "lost": but_final(final(1, [[0, 0, "0"]])),
        "duplicated": but_final(final(3, [[0, 0, "0"], [0, 1, "1"], [0, 2, "1"]])),
        "unexpected": but_final(final(3, [[0, 0, "0"], [0, 1, "1"], [0, 2, "9"]])),
        "inconsistent_offsets": plus(op("classic-1", "ok", "poll", records=[[0, 1, "0"]])),
        "nonmonotonic_sends": plus(
            op("producer", "invoke", "send", value="2", partition=0),
            op("producer", "ok", "send", value="2", partition=0, offset=1)),
        "nonmonotonic_polls": plus(op("classic-0", "ok", "poll", records=[[0, 0, "0"]])),
        "commits_backwards": plus(op("classic-1", "ok", "commit", offsets=[[0, 1]])),
        "incomplete_final_reads": but_final(final(2, [[0, 0, "0"], [0, 1, "1"]], False)),
    }
    assert set(cases) | {"replica_divergence"} == set(MUST_BE_ZERO)
    for name, history in cases.items():
        result = analyse(history)
        assert result.counts[name] >= 1, (name, result.counts)
        assert not result.ok()
    # a new assignment starts a new session: re-reading from the committed offset is fine
    reassigned = plus(op("classic-0", "ok", "assign", partitions=[0]),
                      op("classic-0", "ok", "poll", records=[[0, 1, "1"]]))
    assert analyse(reassigned).ok()
    divergent = analyse(clean(), {"b1": {0: {0: "0", 1: "1"}}, "b2": {0: {0: "0", 1: "x"}}})
    assert divergent.counts["replica_divergence"] >= 1
