"""Issue 10: the same raw-request sessions sent to Apache Kafka and to Tidelog, compared.

Both brokers start once for the module: Tidelog through the shared BrokerFactory, Apache
Kafka (KRaft, single node) through the Kafka peer fixture. The sessions run once; the tests
then assert on the report:

- the differences found are exactly the documented ones (known.KNOWN; a new difference and a
  fixed one both fail, with the full table in the message),
- docs/compatibility.md lists every documented difference (its generated block is current),
- at least 150 exchanges ran and every API Tidelog serves was exercised.

The totals line ``differential: N exchanges, D differences (K known)`` is printed in the
terminal summary (conftest.py); the full JSON report is written under the pytest tmp dir.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tidelog.protocol.versions import CLUSTER_ONLY_APIS, SUPPORTED_VERSIONS

from . import docs
from .conftest import TIDELOG_SETTINGS
from .run import Report, compare_brokers

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tidelog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from conftest import BrokerFactory

    factory = BrokerFactory(tmp_path_factory.mktemp("differential-tidelog"))
    try:
        yield factory(settings=TIDELOG_SETTINGS)
    finally:
        bad = factory.stop_all()
    if bad:
        pytest.fail("tidelog logged a traceback:\n" + "\n".join(bad))


@pytest.fixture(scope="module")
def report(
    kafka_peer_bootstrap: str, tidelog: Any, tmp_path_factory: pytest.TempPathFactory
) -> Report:
    result = compare_brokers(kafka_peer_bootstrap, tidelog.bootstrap)
    path = tmp_path_factory.mktemp("differential") / "differential-report.json"
    path.write_text(json.dumps(result.to_json(), indent=1, default=str))
    from . import conftest

    conftest.SUMMARY.append(result.totals() + f" in {result.seconds:.1f}s; report: {path}")
    return result


def test_differences_are_exactly_the_documented_ones(report: Report) -> None:
    if report.new or report.gone:
        pytest.fail(
            f"{report.totals()}: {len(report.new)} undocumented, {len(report.gone)} documented "
            "but not seen (fixed? delete them from tests/differential/known.py and "
            "regenerate docs/compatibility.md)\n" + report.table()
        )


def test_every_api_tidelog_serves_is_exercised(report: Report) -> None:
    assert len(report.results) >= 150, report.totals()
    covered = {r.api_key for r in report.results}
    served = set(SUPPORTED_VERSIONS) - CLUSTER_ONLY_APIS
    assert served <= covered, sorted(served - covered)


def test_no_exchange_failed_to_decode(report: Report) -> None:
    """A body kio cannot read is a broken response, whoever sent it."""
    broken = [
        (r.name, side)
        for r in report.results
        for side, answer in (("kafka", r.kafka), ("tidelog", r.tidelog))
        if isinstance(answer, dict) and ("<undecodable>" in answer or "<trailing bytes>" in answer)
    ]
    assert not broken


def test_compatibility_doc_lists_every_known_difference() -> None:
    text = (REPO / "docs" / "compatibility.md").read_text()
    assert docs.generated_block() in text, (
        "docs/compatibility.md is stale: run python -m tests.differential.docs"
    )
