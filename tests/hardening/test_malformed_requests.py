"""Well-framed requests with absurd values against a live broker: Kafka's error codes, no
traceback in the broker log (the fixture fails the test on one), stored data unchanged."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from broker.raw import RawClient, request_module
from broker.test_requests import batch, create, fetch, produce
from tidelog.errors import ErrorCode
from tidelog.records.batch import iter_batches

if TYPE_CHECKING:
    from conftest import BrokerFactory

FETCH, LIST_OFFSETS, METADATA = 1, 2, 3


def fetch_body(partitions: list[tuple[int, int, int]], **options: Any) -> Any:
    """Fetch v12 of topic `bad`: (partition, fetch_offset, partition_max_bytes) each."""
    module = request_module(FETCH, 12)
    return module.FetchRequest(
        max_wait=timedelta(milliseconds=options.get("max_wait_ms", 0)),
        min_bytes=options.get("min_bytes", 0),
        max_bytes=options.get("max_bytes", 1 << 20),
        topics=(
            module.FetchTopic(
                topic="bad",
                partitions=tuple(
                    module.FetchPartition(
                        partition=p, fetch_offset=o, partition_max_bytes=m, log_start_offset=-1
                    )
                    for p, o, m in partitions
                ),
            ),
        ),
        forgotten_topics_data=(),
    )


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_absurd_fetch_and_list_offsets_values(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    with RawClient(broker.bootstrap) as client:
        create(client, "bad")
        assert produce(client, "bad", [batch([b"one", b"two"])]).base_offset == 0
        files_before = open_files(broker.pid)

        # One partition named 3,000 times: read and answered once (Kafka keys them in a map),
        # so a request cannot open thousands of files or build a huge response.
        body = fetch_body([(0, 0, 1 << 20)] * 3000, max_bytes=2**31 - 1)
        response = client.call(FETCH, 12, body)
        (topic,) = response.responses
        assert [p.partition_index for p in topic.partitions] == [0]
        assert len(list(iter_batches(topic.partitions[0].records))) == 1
        assert open_files(broker.pid) <= files_before + 2

        cases = [
            (-1, 0, 1 << 20, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            (2**31 - 1, 0, 1 << 20, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            (0, -5, 1 << 20, ErrorCode.OFFSET_OUT_OF_RANGE),
            (0, 2**63 - 1, 1 << 20, ErrorCode.OFFSET_OUT_OF_RANGE),
        ]
        for partition, offset, max_bytes, expected in cases:
            answer = client.call(FETCH, 12, fetch_body([(partition, offset, max_bytes)]))
            assert answer.responses[0].partitions[0].error_code == expected, (partition, offset)
        # Negative byte limits and waits: still at least one batch, answered at once.
        answer = client.call(
            FETCH, 12, fetch_body([(0, 0, -1)], max_bytes=-1, max_wait_ms=-1000, min_bytes=-1)
        )
        assert answer.responses[0].partitions[0].error_code == ErrorCode.NONE

        module = request_module(LIST_OFFSETS, 7)
        listed = client.call(
            LIST_OFFSETS,
            7,
            module.ListOffsetsRequest(
                replica_id=-1,
                isolation_level=0,
                topics=(
                    module.ListOffsetsTopic(
                        name="bad",
                        partitions=(
                            module.ListOffsetsPartition(partition_index=-3, timestamp=-1),
                            module.ListOffsetsPartition(partition_index=0, timestamp=-99),
                        ),
                    ),
                ),
            ),
        )
        codes = [p.error_code for p in listed.topics[0].partitions]
        assert codes[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert codes[1] != ErrorCode.NONE

        module = request_module(METADATA, 12)
        names = ["", "a" * 300, "bad name!", ".."]
        meta = client.call(
            METADATA,
            12,
            module.MetadataRequest(
                topics=tuple(module.MetadataRequestTopic(name=n, topic_id=None) for n in names),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            ),
        )
        assert all(t.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION for t in meta.topics), [
            (t.name, t.error_code) for t in meta.topics
        ]
        # Stored data unchanged.
        data = fetch(client, "bad", 0)
        assert data.high_watermark == 2
