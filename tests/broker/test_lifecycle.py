"""Connection limits and graceful shutdown of a live broker."""

from __future__ import annotations

import signal
import time
from datetime import timedelta
from typing import TYPE_CHECKING

from .metrics_probe import metrics_args, wait_for_parked_fetches
from .raw import RawClient, request_module
from .test_requests import create

if TYPE_CHECKING:
    from conftest import BrokerFactory

API_VERSIONS, FETCH = 18, 1


def _api_versions(client: RawClient) -> int:
    module = request_module(API_VERSIONS, 3)
    response = client.call(
        API_VERSIONS,
        3,
        module.ApiVersionsRequest(client_software_name="t", client_software_version="1"),
    )
    return int(response.error_code)


def test_max_connections_refuses_the_extra_connection(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(settings={"max.connections": "2"})
    with RawClient(broker.bootstrap) as first, RawClient(broker.bootstrap) as second:
        assert _api_versions(first) == 0 and _api_versions(second) == 0
        with RawClient(broker.bootstrap) as third:
            assert third.is_closed_by_peer()
    # Once the others are gone, a new connection is accepted again.
    for _ in range(50):
        with RawClient(broker.bootstrap) as again:
            try:
                if _api_versions(again) == 0:
                    break
            except AssertionError:
                time.sleep(0.05)  # the broker has not seen the close of the old ones yet
    else:
        raise AssertionError("broker never accepted a connection again")


def test_sigterm_answers_parked_fetches_and_exits_zero(broker_factory: BrokerFactory) -> None:
    args, metrics_port = metrics_args()
    broker = broker_factory(extra_args=args)
    with RawClient(broker.bootstrap) as client:
        create(client, "parked")
        module = request_module(FETCH, 11)
        body = module.FetchRequest(
            replica_id=-1,
            max_wait=timedelta(seconds=60),
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            topics=(
                module.FetchTopic(
                    topic="parked",
                    partitions=(
                        module.FetchPartition(
                            partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
        )
        correlation_id = client.send(FETCH, 11, body)
        wait_for_parked_fetches(metrics_port, 1)
        started = time.monotonic()
        broker.process.send_signal(signal.SIGTERM)
        response = client.read_response(FETCH, 11, correlation_id)
        assert response.responses[0].partitions[0].high_watermark == 0
        assert broker.process.wait(10) == 0
        assert time.monotonic() - started < 10
    assert (broker.data_dir / ".clean-shutdown").exists()
