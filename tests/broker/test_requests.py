"""Produce, Fetch, ListOffsets, InitProducerId and ApiVersions on the wire, live."""

from __future__ import annotations

import struct
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode as KioErrorCode

from tidelog.errors import ErrorCode
from tidelog.records.batch import (
    CRC_POSITION,
    LAST_OFFSET_DELTA_POSITION,
    MAGIC_POSITION,
    RecordBatch,
    iter_batches,
)
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.record import iter_records

from .metrics_probe import metrics_args, wait_for_parked_fetches
from .raw import RawClient, request_module

if TYPE_CHECKING:
    from conftest import BrokerFactory, BrokerProcess

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, INIT_PRODUCER_ID = 0, 1, 2, 3, 18, 22
DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH = 21, 23


def create(client: RawClient, topic: str) -> None:
    """Auto-create through Metadata v4 (allow_auto_topic_creation)."""
    module = request_module(METADATA, 4)
    response = client.call(
        METADATA,
        4,
        module.MetadataRequest(
            topics=(module.MetadataRequestTopic(name=topic),), allow_auto_topic_creation=True
        ),
    )
    assert response.topics[0].error_code == KioErrorCode.none


def produce_body(
    topic: str, batches: list[bytes], acks: int = 1, version: int = 9, partition: int = 0
) -> Any:
    module = request_module(PRODUCE, version)
    return module.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=timedelta(seconds=5),
        topic_data=(
            module.TopicProduceData(
                name=topic,
                partition_data=(
                    module.PartitionProduceData(index=partition, records=b"".join(batches)),
                ),
            ),
        ),
    )


def produce(client: RawClient, topic: str, batches: list[bytes], **options: Any) -> Any:
    version = options.get("version", 9)
    response = client.call(PRODUCE, version, produce_body(topic, batches, **options))
    return response.responses[0].partition_responses[0]


def fetch(client: RawClient, topic: str, offset: int, **options: Any) -> Any:
    version = options.pop("version", 11)
    module = request_module(FETCH, version)
    partition = module.FetchPartition(
        partition=0,
        fetch_offset=offset,
        partition_max_bytes=options.pop("partition_max_bytes", 1 << 20),
        log_start_offset=-1,
    )
    body = module.FetchRequest(
        replica_id=-1,
        max_wait=timedelta(milliseconds=options.pop("max_wait_ms", 0)),
        min_bytes=options.pop("min_bytes", 0),
        max_bytes=options.pop("max_bytes", 50 << 20),
        isolation_level=0,
        topics=(module.FetchTopic(topic=topic, partitions=(partition,)),),
        forgotten_topics_data=(),
    )
    response = client.call(FETCH, version, body)
    return response.responses[0].partitions[0]


def batch(values: list[bytes], **options: Any) -> bytes:
    return bytes(build_batch([NewRecord(value=value) for value in values], **options))


def test_produce_then_fetch_returns_the_same_records(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as client:
        create(client, "raw-a")
        first = produce(client, "raw-a", [batch([b"a", b"b"])])
        assert first.error_code == KioErrorCode.none and first.base_offset == 0
        assert produce(client, "raw-a", [batch([b"c"])]).base_offset == 2
        second = produce(client, "raw-a", [batch([b"d"])])
        assert second.base_offset == 3
        data = fetch(client, "raw-a", 0)
        assert data.high_watermark == 4
        batches = list(iter_batches(data.records))
        assert [b.base_offset for b in batches] == [0, 2, 3]
        values = [record.value for b in batches for record in iter_records(b)]
        assert values == [b"a", b"b", b"c", b"d"]


def test_corrupt_batch_is_rejected_and_nothing_is_written(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as client:
        create(client, "raw-corrupt")
        good = batch([b"good"])
        bad = bytearray(batch([b"bad"]))
        bad[-1] ^= 0xFF  # breaks the CRC
        result = produce(client, "raw-corrupt", [bytes(bad)])
        assert result.error_code == KioErrorCode.corrupt_message
        # v3+ allows exactly one batch per partition, as Kafka's validateRecords does.
        two = produce(client, "raw-corrupt", [good, good])
        assert two.error_code == KioErrorCode.invalid_record
        # Cut short, the record set holds no whole batch: INVALID_RECORD, as Kafka answers.
        truncated = produce(client, "raw-corrupt", [good[:-3]])
        assert truncated.error_code == KioErrorCode.invalid_record
        assert fetch(client, "raw-corrupt", 0).high_watermark == 0


def _rewritten(data: bytes, position: int, fmt: str, value: int) -> bytes:
    """A batch with one header field rewritten and its CRC redone (well formed, but lying)."""
    buffer = bytearray(data)
    struct.pack_into(fmt, buffer, position, value)
    struct.pack_into(">I", buffer, CRC_POSITION, RecordBatch(buffer).compute_crc())
    return bytes(buffer)


def test_client_batches_are_refused_where_kafka_refuses_them(broker: BrokerProcess) -> None:
    """Kafka's checks of a client's record set (ProduceRequest.validateRecords,
    LogValidator.validateBatch with AppendOrigin.CLIENT, KafkaApis' transactional-id check,
    ReplicaManager's internal-topic guard): nothing is appended, and errors raised by the
    log's checks carry the partition's log start offset."""
    with RawClient(broker.bootstrap) as client:
        create(client, "raw-client-rules")
        assert produce(client, "raw-client-rules", [batch([b"a"])]).base_offset == 0
        two = batch([b"b", b"c"])
        cases = {
            "delta": (_rewritten(two, LAST_OFFSET_DELTA_POSITION, ">i", 5),
                      KioErrorCode.invalid_record, 0),
            "base offset": (batch([b"b"], base_offset=500), KioErrorCode.invalid_record, 0),
            "control": (batch([b"b"], control=True), KioErrorCode.invalid_record, 0),
            "magic 1": (_rewritten(two, MAGIC_POSITION, ">b", 1),
                        KioErrorCode.invalid_record, -1),
            "empty": (b"", KioErrorCode.invalid_record, -1),
            "transactional": (
                batch([b"b"], transactional=True, producer_id=4000, producer_epoch=0,
                      base_sequence=0),
                KioErrorCode.transactional_id_authorization_failed, -1,
            ),
        }
        for name, (data, code, log_start) in cases.items():
            answer = produce(client, "raw-client-rules", [data])
            assert (answer.error_code, answer.base_offset) == (code, -1), name
            assert answer.log_start_offset == log_start, name
        assert fetch(client, "raw-client-rules", 0).high_watermark == 1
        # Only the group coordinator writes __consumer_offsets; clients may not truncate it.
        create(client, "__consumer_offsets")
        internal = produce(client, "__consumer_offsets", [batch([b"forged"])])
        assert internal.error_code == KioErrorCode.invalid_topic_exception
        module = request_module(DELETE_RECORDS, 2)
        deleted = client.call(DELETE_RECORDS, 2, module.DeleteRecordsRequest(
            topics=(module.DeleteRecordsTopic(name="__consumer_offsets", partitions=(
                module.DeleteRecordsPartition(partition_index=0, offset=-1),)),),
            timeout=timedelta(seconds=5),
        ))
        result = deleted.topics[0].partitions[0]
        assert (result.error_code, result.low_watermark) == (
            KioErrorCode.invalid_topic_exception, -1
        )


def test_unknown_topic_and_too_large(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as client:
        missing = produce(client, "never-created", [batch([b"x"])])
        assert missing.error_code == KioErrorCode.unknown_topic_or_partition
        create(client, "raw-large")
        large = produce(client, "raw-large", [batch([b"x" * (1100 * 1024)])])
        assert large.error_code == KioErrorCode.message_too_large
        wrong_partition = produce(client, "raw-large", [batch([b"x"])], partition=7)
        assert wrong_partition.error_code == KioErrorCode.unknown_topic_or_partition


def test_acks_zero_gets_no_response_and_order_is_kept(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as client:
        create(client, "raw-acks0")
        client.send(PRODUCE, 9, produce_body("raw-acks0", [batch([b"0"])], acks=0))
        module = request_module(API_VERSIONS, 3)
        ids = [
            client.send(
                API_VERSIONS,
                3,
                module.ApiVersionsRequest(client_software_name="t", client_software_version="1"),
            )
            for _ in range(5)
        ]
        # The next frame answers the first ApiVersions: the acks=0 produce had no response.
        for correlation_id in ids:
            response = client.read_response(API_VERSIONS, 3, correlation_id)
            assert response.error_code == KioErrorCode.none
        assert fetch(client, "raw-acks0", 0).high_watermark == 1


def test_unsupported_api_versions_version_gets_the_v0_fallback(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as client:
        frame = struct.pack(">hhih", API_VERSIONS, 99, 42, -1)
        client.sock.sendall(struct.pack(">i", len(frame)) + frame)
        answer = client.read_frame()
        correlation_id, error_code, count = struct.unpack_from(">ihi", answer, 0)
        assert (correlation_id, error_code) == (42, ErrorCode.UNSUPPORTED_VERSION)
        # Kafka's answer (KIP-511): ApiVersions' own range only, enough to retry.
        entries = [struct.unpack_from(">hhh", answer, 10 + 6 * i) for i in range(count)]
        assert entries == [(API_VERSIONS, 0, 4)]


def test_fetch_out_of_range_and_at_least_one_batch(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as client:
        create(client, "raw-fetch")
        produce(client, "raw-fetch", [batch([b"x" * 5000])])
        produce(client, "raw-fetch", [batch([b"y" * 5000])])
        beyond = fetch(client, "raw-fetch", 10)
        assert beyond.error_code == KioErrorCode.offset_out_of_range
        assert beyond.log_start_offset == -1  # Kafka sends no offsets beside a fetch error
        small = fetch(client, "raw-fetch", 0, partition_max_bytes=100, max_bytes=100)
        assert [b.base_offset for b in iter_batches(small.records)] == [0]
        at_end = fetch(client, "raw-fetch", 2)
        assert at_end.error_code == KioErrorCode.none and not at_end.records


def test_long_poll_is_woken_by_an_append(broker_factory: BrokerFactory) -> None:
    args, metrics_port = metrics_args()
    broker = broker_factory(extra_args=args)
    with RawClient(broker.bootstrap) as waiter, RawClient(broker.bootstrap) as writer:
        create(writer, "raw-poll")
        module = request_module(FETCH, 11)
        body = module.FetchRequest(
            replica_id=-1,
            max_wait=timedelta(seconds=60),
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            topics=(
                module.FetchTopic(
                    topic="raw-poll",
                    partitions=(
                        module.FetchPartition(
                            partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
        )
        correlation_id = waiter.send(FETCH, 11, body)
        wait_for_parked_fetches(metrics_port, 1)
        started = time.monotonic()
        produce(writer, "raw-poll", [batch([b"wake"])])
        response = waiter.read_response(FETCH, 11, correlation_id)
        # Woken by the append, not by the 60 s deadline.
        assert time.monotonic() - started < 30
        assert response.responses[0].partitions[0].high_watermark == 1


def test_list_offsets(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as client:
        create(client, "raw-offsets")
        for index, timestamp in enumerate((1000, 3000, 2000)):
            produce(
                client,
                "raw-offsets",
                [bytes(build_batch([NewRecord(value=b"%d" % index, timestamp_ms=timestamp)]))],
            )
        module = request_module(LIST_OFFSETS, 7)

        def lookup(timestamp: int) -> tuple[int, int]:
            response = client.call(
                LIST_OFFSETS,
                7,
                module.ListOffsetsRequest(
                    replica_id=-1,
                    isolation_level=0,
                    topics=(
                        module.ListOffsetsTopic(
                            name="raw-offsets",
                            partitions=(
                                module.ListOffsetsPartition(partition_index=0, timestamp=timestamp),
                            ),
                        ),
                    ),
                ),
            )
            partition = response.topics[0].partitions[0]
            assert partition.error_code == KioErrorCode.none
            return partition.offset, partition.timestamp

        assert lookup(-2)[0] == 0
        assert lookup(-1)[0] == 3
        assert lookup(-3) == (1, 3000)
        assert lookup(1500) == (1, 3000)
        assert lookup(3001)[0] == -1


def test_idempotent_retry_is_answered_with_the_original_offset(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as client:
        create(client, "raw-idempotent")
        module = request_module(INIT_PRODUCER_ID, 4)
        init = client.call(
            INIT_PRODUCER_ID,
            4,
            module.InitProducerIdRequest(
                transactional_id=None, transaction_timeout=timedelta(seconds=60)
            ),
        )
        assert init.error_code == KioErrorCode.none
        pid = init.producer_id

        def idempotent(values: list[bytes], sequence: int) -> bytes:
            return batch(values, producer_id=pid, producer_epoch=0, base_sequence=sequence)

        first = produce(client, "raw-idempotent", [idempotent([b"a", b"b"], 0)])
        produce(client, "raw-idempotent", [idempotent([b"c"], 2)])
        retry = produce(client, "raw-idempotent", [idempotent([b"a", b"b"], 0)])
        assert (first.base_offset, retry.base_offset) == (0, 0)
        assert retry.error_code == KioErrorCode.none
        gap = produce(client, "raw-idempotent", [idempotent([b"z"], 9)])
        assert gap.error_code == KioErrorCode.out_of_order_sequence_number
        assert fetch(client, "raw-idempotent", 0).high_watermark == 3
        transactional = client.call(
            INIT_PRODUCER_ID,
            4,
            module.InitProducerIdRequest(
                transactional_id="tx", transaction_timeout=timedelta(seconds=60)
            ),
        )
        # A transactional id gets its own producer id at epoch 0 (tests/transactions/).
        assert transactional.error_code == KioErrorCode.none
        assert transactional.producer_id not in (-1, pid)
        assert transactional.producer_epoch == 0


def test_responses_follow_request_order_behind_a_parked_fetch(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as client:
        create(client, "raw-order")
        module = request_module(FETCH, 11)
        parked = client.send(
            FETCH,
            11,
            module.FetchRequest(
                replica_id=-1,
                max_wait=timedelta(milliseconds=400),
                min_bytes=1,
                max_bytes=1 << 20,
                isolation_level=0,
                topics=(
                    module.FetchTopic(
                        topic="raw-order",
                        partitions=(
                            module.FetchPartition(
                                partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                            ),
                        ),
                    ),
                ),
                forgotten_topics_data=(),
            ),
        )
        versions = request_module(API_VERSIONS, 3)
        quick = client.send(
            API_VERSIONS,
            3,
            versions.ApiVersionsRequest(client_software_name="t", client_software_version="1"),
        )
        # ApiVersions finishes first inside the broker, but is answered after the fetch.
        fetched = client.read_response(FETCH, 11, parked)
        assert fetched.responses[0].partitions[0].high_watermark == 0
        assert client.read_response(API_VERSIONS, 3, quick).error_code == KioErrorCode.none


def test_partition_named_twice_is_produced_once_with_its_last_record_set(
    broker: BrokerProcess,
) -> None:
    with RawClient(broker.bootstrap) as client:
        create(client, "raw-twice")
        module = request_module(PRODUCE, 9)
        body = module.ProduceRequest(
            transactional_id=None,
            acks=1,
            timeout=timedelta(seconds=5),
            topic_data=(
                module.TopicProduceData(
                    name="raw-twice",
                    partition_data=(
                        module.PartitionProduceData(index=0, records=batch([b"first"])),
                        module.PartitionProduceData(index=0, records=batch([b"last"])),
                    ),
                ),
            ),
        )
        response = client.call(PRODUCE, 9, body)
        (answer,) = response.responses[0].partition_responses
        assert answer.error_code == KioErrorCode.none and answer.base_offset == 0
        data = fetch(client, "raw-twice", 0)
        values = [record.value for b in iter_batches(data.records) for record in iter_records(b)]
        assert values == [b"last"]


def test_leader_epochs_on_a_single_node(broker: BrokerProcess) -> None:
    """A lone broker leads at epoch 0 (KIP-320, as Kafka's Partition does): a newer
    current_leader_epoch is UNKNOWN_LEADER_EPOCH in Fetch and ListOffsets, and
    OffsetForLeaderEpoch (served standalone, not only in a cluster) answers from the epoch
    cache: epoch 0 ends at the log end, a later one is undefined."""
    with RawClient(broker.bootstrap) as client:
        create(client, "raw-epochs")
        produce(client, "raw-epochs", [batch([b"a", b"b", b"c"])])
        fetch_module = request_module(FETCH, 11)

        def fetch_at_epoch(epoch: int) -> Any:
            body = fetch_module.FetchRequest(
                replica_id=-1, max_wait=timedelta(0), min_bytes=0, max_bytes=1 << 20,
                isolation_level=0, session_id=0, session_epoch=-1, rack_id="",
                topics=(fetch_module.FetchTopic(topic="raw-epochs", partitions=(
                    fetch_module.FetchPartition(
                        partition=0, current_leader_epoch=epoch, fetch_offset=0,
                        log_start_offset=-1, partition_max_bytes=1 << 20),)),),
                forgotten_topics_data=(),
            )
            return client.call(FETCH, 11, body).responses[0].partitions[0]

        assert fetch_at_epoch(0).high_watermark == 3
        assert fetch_at_epoch(-1).high_watermark == 3
        future = fetch_at_epoch(7)
        assert (future.error_code, future.high_watermark, future.log_start_offset) == (
            KioErrorCode.unknown_leader_epoch, -1, -1
        )
        assert future.aborted_transactions is None  # READ_UNCOMMITTED, as Kafka answers

        lo_module = request_module(LIST_OFFSETS, 7)
        listed = client.call(LIST_OFFSETS, 7, lo_module.ListOffsetsRequest(
            replica_id=-1, isolation_level=0, topics=(lo_module.ListOffsetsTopic(
                name="raw-epochs", partitions=(lo_module.ListOffsetsPartition(
                    partition_index=0, current_leader_epoch=7, timestamp=-1),)),),
        )).topics[0].partitions[0]
        assert (listed.error_code, listed.offset, listed.leader_epoch) == (
            KioErrorCode.unknown_leader_epoch, -1, -1
        )

        ole_module = request_module(OFFSET_FOR_LEADER_EPOCH, 4)

        def end_of(epoch: int, current: int = -1, partition: int = 0) -> tuple[Any, int, int]:
            body = ole_module.OffsetForLeaderEpochRequest(
                replica_id=-1, topics=(ole_module.OffsetForLeaderTopic(
                    topic="raw-epochs", partitions=(ole_module.OffsetForLeaderPartition(
                        partition=partition, current_leader_epoch=current,
                        leader_epoch=epoch),)),),
            )
            answer = client.call(OFFSET_FOR_LEADER_EPOCH, 4, body).topics[0].partitions[0]
            return answer.error_code, answer.leader_epoch, answer.end_offset

        assert end_of(0) == (KioErrorCode.none, 0, 3)
        assert end_of(5) == (KioErrorCode.none, -1, -1)
        assert end_of(0, current=7) == (KioErrorCode.unknown_leader_epoch, -1, -1)
        assert end_of(0, partition=4) == (KioErrorCode.unknown_topic_or_partition, -1, -1)


def test_api_versions_refuses_an_invalid_client_software_name(broker: BrokerProcess) -> None:
    module = request_module(API_VERSIONS, 3)
    with RawClient(broker.bootstrap) as client:
        answer = client.call(API_VERSIONS, 3, module.ApiVersionsRequest(
            client_software_name="bad name!", client_software_version="1"))
        assert (answer.error_code, answer.api_keys) == (KioErrorCode.invalid_request, ())
        good = client.call(API_VERSIONS, 3, module.ApiVersionsRequest(
            client_software_name="librdkafka", client_software_version="2.3.0-RC1"))
        assert good.error_code == KioErrorCode.none
        assert OFFSET_FOR_LEADER_EPOCH in {key.api_key for key in good.api_keys}


def test_offset_commit_and_fetch_v10_name_topics_by_id(broker: BrokerProcess) -> None:
    """OffsetCommit/OffsetFetch v10 (topic ids instead of names): committed by id, fetched by
    id and by "all topics" (answered with ids), UNKNOWN_TOPIC_ID for an id no topic has."""
    import uuid

    commit_module, fetch_module = request_module(8, 10), request_module(9, 10)
    absent = uuid.UUID("0b5f2d9c-1a2b-4c3d-8e4f-5a6b7c8d9e0f")
    with RawClient(broker.bootstrap) as client:
        create(client, "by-id")
        metadata = request_module(METADATA, 12)
        (topic,) = client.call(METADATA, 12, metadata.MetadataRequest(
            topics=(metadata.MetadataRequestTopic(name="by-id", topic_id=None),),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False,
        )).topics
        topic_id = topic.topic_id
        assert topic_id is not None

        def commit(target: uuid.UUID) -> Any:
            return client.call(8, 10, commit_module.OffsetCommitRequest(
                group_id="g-by-id", generation_id_or_member_epoch=-1, member_id="",
                group_instance_id=None,
                topics=tuple(commit_module.OffsetCommitRequestTopic(
                    topic_id=target, partitions=(commit_module.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=42, committed_leader_epoch=-1,
                        committed_metadata="m"),),
                ) for target in [target]),
            ))

        committed = commit(topic_id)
        assert [(t.topic_id, [p.error_code.value for p in t.partitions])
                for t in committed.topics] == [(topic_id, [0])]
        refused = commit(absent)
        assert [(t.topic_id, [p.error_code.value for p in t.partitions])
                for t in refused.topics] == [(absent, [ErrorCode.UNKNOWN_TOPIC_ID])]

        def fetch(topics: Any) -> Any:
            (group,) = client.call(9, 10, fetch_module.OffsetFetchRequest(
                groups=(fetch_module.OffsetFetchRequestGroup(
                    group_id="g-by-id", member_id=None, member_epoch=-1, topics=topics),),
                require_stable=False,
            )).groups
            return [(t.topic_id, [(p.committed_offset, p.error_code.value) for p in t.partitions])
                    for t in group.topics]

        assert fetch((fetch_module.OffsetFetchRequestTopics(
            topic_id=topic_id, partition_indexes=(0,)),)) == [(topic_id, [(42, 0)])]
        assert fetch(None) == [(topic_id, [(42, 0)])]
        assert fetch((fetch_module.OffsetFetchRequestTopics(
            topic_id=absent, partition_indexes=(0,)),)) == [
            (absent, [(-1, ErrorCode.UNKNOWN_TOPIC_ID)])]


def test_produce_v13_names_topics_by_id(broker: BrokerProcess) -> None:
    """Produce v13 (KIP-516): the topic by id, answered by id; UNKNOWN_TOPIC_ID for an id no
    topic has (the other partitions of the request are appended)."""
    import uuid

    absent = uuid.UUID("0b5f2d9c-1a2b-4c3d-8e4f-5a6b7c8d9e0f")
    module = request_module(PRODUCE, 13)
    with RawClient(broker.bootstrap) as client:
        create(client, "produce-by-id")
        metadata = request_module(METADATA, 12)
        (topic,) = client.call(METADATA, 12, metadata.MetadataRequest(
            topics=(metadata.MetadataRequestTopic(name="produce-by-id", topic_id=None),),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False,
        )).topics
        batch = bytes(build_batch([NewRecord(b"v", b"k")], now_ms=1_700_000_000_000))
        answer = client.call(PRODUCE, 13, module.ProduceRequest(
            transactional_id=None, acks=1, timeout=timedelta(seconds=5),
            topic_data=tuple(
                module.TopicProduceData(topic_id=target, partition_data=(
                    module.PartitionProduceData(index=0, records=batch),))
                for target in (topic.topic_id, absent)
            ),
        ))
    outcome = {t.topic_id: [(p.error_code.value, p.base_offset) for p in t.partition_responses]
               for t in answer.responses}
    assert outcome == {topic.topic_id: [(0, 0)], absent: [(ErrorCode.UNKNOWN_TOPIC_ID, -1)]}
