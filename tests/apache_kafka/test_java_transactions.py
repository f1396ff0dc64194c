"""Kafka's Java producer (kafka-clients 4.3.1) with transactions against `tidelog serve`:
commit, abort, sendOffsetsToTransaction and a fenced zombie, read back by Java consumers at
both isolation levels. The broker finalizes `transaction.version` 2, so the client runs
KIP-890 part 2: no AddPartitionsToTxn/AddOffsetsToTxn, EndTxn v5 bumping the epoch per
transaction (seen in the markers' epochs)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from broker.raw import RawClient, request_module
from tidelog.protocol.api_keys import ApiKey
from tidelog.records.batch import iter_batches

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

    # Transaction version 2: each EndTxn bumped the epoch, so the markers of the first
    # producer carry epochs 1, 2, 3 (transaction version 1 would write 0, 0, 0); the zombie's
    # id: the fence's abort at 1, the successor's commit at 3 (its InitProducerId took 2).
    module = request_module(ApiKey.FETCH, 11)
    with RawClient(broker.bootstrap) as client:
        answer = client.call(ApiKey.FETCH, 11, module.FetchRequest(
            replica_id=-1, max_wait=timedelta(0), min_bytes=0, max_bytes=1 << 20,
            isolation_level=0, topics=(module.FetchTopic(topic="jtx", partitions=(
                module.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                                      log_start_offset=-1),)),),
            forgotten_topics_data=(),
        ))
    epochs: dict[int, list[int]] = {}
    for batch in iter_batches(answer.responses[0].partitions[0].records):
        if batch.is_control:
            epochs.setdefault(batch.producer_id, []).append(batch.producer_epoch)
    assert sorted(epochs.values()) == [[1, 2, 3], [1, 3]], epochs
