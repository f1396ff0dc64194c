"""Kafka's Java producer (kafka-clients 4.3.1) with transactions against `tidelog serve`:
commit, abort, sendOffsetsToTransaction and a fenced zombie, read back by Java consumers at
both isolation levels."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import of_kind, run_program

if TYPE_CHECKING:
    from conftest import BrokerProcess


def test_java_producer_transactions(broker: BrokerProcess) -> None:
    lines = run_program("Transactions", broker.bootstrap, "jtx")
    assert of_kind(lines, "done"), lines[-5:]
    assert len(of_kind(lines, "fenced")) == 1
    assert "other" not in of_kind(lines, "fenced")[0], of_kind(lines, "fenced")
    read = {
        isolation: [line["value"] for line in of_kind(lines, "recv")
                    if line["isolation"] == isolation]
        for isolation in ("read_committed", "read_uncommitted")
    }
    committed = ["committed-0", "committed-1", "committed-2", "committed-last", "successor"]
    assert read["read_committed"] == committed
    assert read["read_uncommitted"] == [*committed[:3], "aborted", "committed-last", "zombie",
                                        "successor"]
    assert of_kind(lines, "committed_offset")[0]["offset"] == 3
