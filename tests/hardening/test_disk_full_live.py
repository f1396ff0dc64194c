"""A live broker whose disk fills (RLIMIT_FSIZE set on its PID by prlimit, so no root is
needed): the produce gets KAFKA_STORAGE_ERROR, nothing partial is acknowledged, reads keep
working, appends resume once space returns, and a restart recovers every acknowledged batch.
"""

from __future__ import annotations

import resource
from typing import TYPE_CHECKING

from broker.raw import RawClient
from broker.test_requests import batch, create, fetch, produce
from tidelog.errors import ErrorCode
from tidelog.records.batch import iter_batches

if TYPE_CHECKING:
    from conftest import BrokerFactory

LIMIT_BYTES = 256 * 1024


def _read_all(client: RawClient, topic: str) -> list[int]:
    offsets: list[int] = []
    start = 0
    while True:
        data = fetch(client, topic, start)
        assert data.error_code == ErrorCode.NONE
        batches = list(iter_batches(data.records or b""))
        if not batches:
            return offsets
        offsets += [b.base_offset for b in batches]
        start = batches[-1].next_offset


def test_produce_on_a_full_disk_is_a_storage_error(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    with RawClient(broker.bootstrap) as client:
        create(client, "full")
        original = resource.prlimit(broker.pid, resource.RLIMIT_FSIZE)
        resource.prlimit(broker.pid, resource.RLIMIT_FSIZE, (LIMIT_BYTES, original[1]))
        acknowledged: list[int] = []
        codes: list[int] = []
        for index in range(400):
            result = produce(client, "full", [batch([b"%06d" % index + b"x" * 2000])])
            codes.append(result.error_code)
            if result.error_code != ErrorCode.NONE:
                break
            acknowledged.append(result.base_offset)
        assert codes[-1] == ErrorCode.KAFKA_STORAGE_ERROR, codes[-3:]
        assert acknowledged and len(acknowledged) < 400
        # Reads keep working and show exactly the acknowledged batches, nothing partial.
        assert _read_all(client, "full") == acknowledged
        resource.prlimit(broker.pid, resource.RLIMIT_FSIZE, original)
        resumed = produce(client, "full", [batch([b"after"])])
        assert resumed.error_code == ErrorCode.NONE
        assert resumed.base_offset == acknowledged[-1] + 1
    assert broker.stop() == 0
    restarted = broker_factory(data_dir=broker.data_dir)
    with RawClient(restarted.bootstrap) as client:
        assert _read_all(client, "full") == [*acknowledged, resumed.base_offset]
