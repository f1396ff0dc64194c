"""Kafka Streams 4.3.1 word count, at-least-once, against a real `tidelog serve`: the output
is checked record by record. With the record cache off and no failure, at-least-once emits
exactly one update per input word: for each word the counts 1, 2, ..., n in order (one key
lives in one output partition), the last being the word's count in the input."""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from typing import TYPE_CHECKING

import pytest

from .common import (
    NO_REBALANCE_DELAY,
    of_kind,
    partition_dirs,
    run_program,
    tidelog_broker,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from conftest import BrokerProcess

VOCABULARY = (
    "the",
    "tide",
    "log",
    "Kafka",
    "stream",
    "count",
    "word",
    "sea",
    "wave",
    "shore",
    "salt",
    "moon",
    "état",
    "naïve",
    "x",
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """This module's Tidelog broker, with Kafka's shipped group.initial.rebalance.delay.ms=0."""
    yield from tidelog_broker(tmp_path_factory.mktemp("broker"), NO_REBALANCE_DELAY)


def make_lines(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        words = [rng.choice(VOCABULARY) for _ in range(rng.randint(0, 9))]
        separators = [rng.choice((" ", "  ", ", ", "! ", " - ", "\t")) for _ in words]
        lines.append("".join(w + s for w, s in zip(words, separators, strict=True)))
    return lines


def test_word_count_at_least_once(broker: BrokerProcess, tmp_path: Path) -> None:
    lines = make_lines(300, seed=10)
    expected = Counter(w for line in lines for w in re.split(r"\W+", line.lower()) if w)
    total = sum(expected.values())
    out = run_program(
        "WordCount",
        broker.bootstrap,
        "wc-app",
        "wc-input",
        "wc-counts",
        str(tmp_path / "state"),
        str(total),
        input="\n".join(lines) + "\n",
        timeout=240,
    )
    assert of_kind(out, "done"), "the program did not finish"
    assert of_kind(out, "streams_error") == []
    [state] = of_kind(out, "state")
    assert state["state"] == "RUNNING", state

    records = of_kind(out, "out")
    counts: dict[str, list[int]] = defaultdict(list)
    partition_of: dict[str, set[int]] = defaultdict(set)
    offsets: dict[int, list[int]] = defaultdict(list)
    for record in records:
        counts[record["word"]].append(record["count"])
        partition_of[record["word"]].add(record["partition"])
        offsets[record["partition"]].append(record["offset"])
    for partition, seen in offsets.items():
        assert seen == list(range(len(seen))), f"output partition {partition}: offsets {seen}"
    assert len(records) == total, f"{len(records)} output records for {total} input words"
    assert set(counts) == set(expected)
    for word, n in expected.items():
        assert counts[word] == list(range(1, n + 1)), f"{word!r}: {counts[word]}"
        assert len(partition_of[word]) == 1, word
    last = {word: values[-1] for word, values in counts.items()}
    assert last == dict(expected)

    # Streams created its internal topics through Tidelog's CreateTopics.
    for internal in ("wc-app-words-repartition", "wc-app-counts-changelog"):
        assert len(partition_dirs(broker.data_dir, internal)) == 2, internal


def test_word_count_exactly_once_v2(broker: BrokerProcess, tmp_path: Path) -> None:
    """processing.guarantee=exactly_once_v2 (transactions, KIP-447): read with read_committed,
    each word's counts are 1..n exactly once (offsets have gaps: transaction markers)."""
    lines = make_lines(200, seed=11)
    expected = Counter(w for line in lines for w in re.split(r"\W+", line.lower()) if w)
    total = sum(expected.values())
    out = run_program(
        "WordCount", broker.bootstrap, "eos-app", "eos-input", "eos-counts",
        str(tmp_path / "state"), str(total), "exactly_once_v2",
        input="\n".join(lines) + "\n", timeout=240,
    )
    assert of_kind(out, "done"), "the program did not finish"
    assert of_kind(out, "streams_error") == []
    [state] = of_kind(out, "state")
    assert state["state"] == "RUNNING", state
    counts: dict[str, list[int]] = defaultdict(list)
    for record in of_kind(out, "out"):
        counts[record["word"]].append(record["count"])
    assert set(counts) == set(expected)
    for word, n in expected.items():
        assert counts[word] == list(range(1, n + 1)), f"{word!r}: {counts[word]}"
