"""Fuzz targets for every decoder, and the seeds each starts from (built at run time).

A target takes raw bytes and must either return or raise the project's typed errors
(`tidelog.errors.TidelogError`: ProtocolDecodeError, CorruptRecordError, ZkLayoutError, ...).
Anything else escaping (IndexError, struct.error, UnicodeDecodeError, a segfault in the C
decoder) is a bug; atheris reports it with the input that caused it. fuzz.py runs them.

Seeds: request frames of every API and version the broker serves (kio-encoded from
Hypothesis-generated bodies, plus frames captured from real clients when a capture directory
is given), record batches of every codec, and encoded ZooKeeper, consumer-offsets and
producer-snapshot payloads.
"""

from __future__ import annotations

import io
import json
import os
import struct
import warnings
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

from tidelog.errors import TidelogError

Target = Callable[[bytes], None]
EXPECTED: tuple[type[BaseException], ...] = (TidelogError,)
MAX_UNCOMPRESSED = 1 << 20  # bounded memory: a decompression bomb raises instead


# --- targets ------------------------------------------------------------------------------------
def request_frame(data: bytes) -> None:
    """protocol.codec.decode_request (guard + kio) on a frame of any API and version."""
    from tidelog.protocol.codec import decode_request

    decode_request(data)


def produce_frame(data: bytes) -> None:
    """The broker's hand Produce decoder (broker/wire.py), as the connection calls it."""
    from tidelog.protocol.wire import decode_produce_request, decode_request_header

    view = memoryview(data)
    header, position = decode_request_header(view)
    if header.api_key == 0 and 3 <= header.api_version <= 13:
        decode_produce_request(view, header.api_version, position)


def fetch_response(data: bytes) -> None:
    """protocol.fetch_client.decode_fetch_response (the Spark/consumer fetch path)."""
    from tidelog.protocol.fetch_client import decode_fetch_response

    if len(data) < 4:
        return
    (correlation_id,) = struct.unpack_from(">i", data, 0)
    decode_fetch_response(memoryview(data), correlation_id, "t", 0)


def record_batches(data: bytes) -> None:
    """records: split/validate every batch, decode every record of every codec."""
    from tidelog.records.batch import iter_batches, split_batches
    from tidelog.records.record import iter_records

    try:
        split_batches(data)
    except EXPECTED:
        pass
    for batch in iter_batches(data):
        try:
            batch.validate()
        except EXPECTED:
            pass
        for _ in iter_records(batch, max_uncompressed_bytes=MAX_UNCOMPRESSED):
            pass


def columnar(data: bytes) -> None:
    """The C columnar decoder against the pure-Python one: same rows, or both refuse."""
    from tidelog.records.columnar import NATIVE, RecordColumns

    if len(data) < 2:
        return
    count, include_headers = data[0], bool(data[1] & 1)
    records = data[2:]
    results = []
    for native in (True, False) if NATIVE else (False,):
        builder = RecordColumns(include_headers, native=native)
        try:
            kept = builder.append(records, count, 1000, 5, -1, 1000, 1000 + (data[1] >> 1))
            results.append((kept, builder.finish()))
        except EXPECTED as error:
            results.append(("error", type(error).__name__))
    if len(results) == 2 and results[0] != results[1]:
        raise AssertionError(f"C and Python columnar decoders disagree: {results}")


def zk_payload(data: bytes) -> None:
    """cluster.zk_payloads: every znode payload decoder (first byte picks one)."""
    from tidelog.cluster import zk_payloads as zk

    if not data:
        return
    body = data[1:]
    decoders: list[Callable[[bytes], Any]] = [
        lambda b: zk.BrokerRegistration.decode(1, b),
        zk.ControllerRegistration.decode,
        zk.decode_controller_epoch,
        lambda b: zk.TopicAssignment.decode("topic", b),
        zk.PartitionState.decode,
        zk.decode_isr_change,
        zk.decode_cluster_id,
    ]
    decoders[data[0] % len(decoders)](body)


def offsets_record(data: bytes) -> None:
    """coordinator.records.decode_record: a __consumer_offsets key and value."""
    from tidelog.coordinator.records import decode_record

    if len(data) < 2:
        return
    (key_length,) = struct.unpack_from(">H", data, 0)
    key, value = data[2 : 2 + key_length], data[2 + key_length :]
    decode_record(key, value if value != b"\xff" else None)


def producer_snapshot(data: bytes) -> None:
    """storage.producer_state: a producer-state snapshot file."""
    from tidelog.storage.producer_state import ProducerStateManager

    ProducerStateManager.decode(data)


def producer_snapshot_unchecked(data: bytes) -> None:
    """The snapshot body parser past its CRC gate (the fuzzer cannot forge CRCs)."""
    import crc32c

    body = data[6:]
    fixed = struct.pack(">hI", 1, int(crc32c.crc32c(body))) + body if len(data) >= 6 else data
    producer_snapshot(fixed)


def otlp_metrics(data: bytes) -> None:
    """protocol.otlp: a PushTelemetry payload (KIP-714), as the broker decodes it."""
    from tidelog.protocol.otlp import decode_metrics_data

    decode_metrics_data(data)


TARGETS: dict[str, Target] = {
    "request": request_frame,
    "produce": produce_frame,
    "fetch_response": fetch_response,
    "record_batch": record_batches,
    "columnar": columnar,
    "zk_payload": zk_payload,
    "offsets_record": offsets_record,
    "producer_snapshot": producer_snapshot_unchecked,
    "otlp": otlp_metrics,
}


# --- seeds --------------------------------------------------------------------------------------
def _batches() -> Iterator[bytes]:
    from tidelog.records.batch import Codec
    from tidelog.records.builder import NewRecord, build_batch

    records = [
        NewRecord(value=b"value-%d" % i * (i + 1), key=b"k%d" % i if i % 2 else None,
                  headers=(("h", b"v"),) if i % 3 == 0 else ())
        for i in range(5)
    ]
    for codec in Codec:
        yield bytes(build_batch(records, codec=codec, base_offset=3))
        yield bytes(build_batch(records[:1], codec=codec, producer_id=7, producer_epoch=0,
                                base_sequence=0, transactional=True))


def _encode_frame(api_key: int, version: int, body: Any) -> bytes:
    from kio.index import load_request_schema
    from kio.serial import entity_writer

    request_cls = load_request_schema(api_key, version)
    header = request_cls.__header_schema__(
        request_api_key=api_key, request_api_version=version, correlation_id=7,
        client_id="fuzz-seed",
    )
    buffer = io.BytesIO()
    entity_writer(type(header))(buffer, header)
    entity_writer(request_cls)(buffer, body)
    return buffer.getvalue()


def _collector(into: list[Any]) -> Callable[[Any], None]:
    def collect(body: Any) -> None:
        into.append(body)

    return collect


def request_seeds(per_version: int = 2) -> Iterator[bytes]:
    """Frames of every (API, version) the broker serves, bodies drawn by Hypothesis."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from kio.static.primitive import Records

    from tidelog.protocol.codec import request_schema
    from tidelog.protocol.versions import SUPPORTED_VERSIONS

    batch = next(_batches())
    st.register_type_strategy(Records, st.just(Records(batch)))
    frames: list[bytes] = []
    for api_key, (low, high) in sorted(SUPPORTED_VERSIONS.items()):
        for version in range(low, high + 1):
            bodies: list[Any] = []
            draw = given(st.from_type(request_schema(api_key, version)))(_collector(bodies))
            draw = settings(max_examples=per_version, database=None, derandomize=True,
                            suppress_health_check=list(HealthCheck), deadline=None)(draw)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    draw()
                except Exception:  # a schema Hypothesis cannot draw: captures cover it
                    pass
            for body in bodies[:per_version]:
                try:
                    frames.append(_encode_frame(api_key, version, body))
                except Exception:  # a drawn value kio cannot encode: skip it
                    pass
    yield from frames


def produce_seeds() -> Iterator[bytes]:
    import sys

    from kio.index import load_request_schema

    batches = list(_batches())
    for version in range(3, 11):
        module = sys.modules[load_request_schema(0, version).__module__]
        body = module.ProduceRequest(
            transactional_id=None, acks=-1, timeout=timedelta(seconds=5),
            topic_data=(module.TopicProduceData(name="t", partition_data=(
                module.PartitionProduceData(index=0, records=batches[version % len(batches)]),
                module.PartitionProduceData(index=1, records=None),
            )),),
        )
        yield _encode_frame(0, version, body)


def fetch_response_seeds() -> Iterator[bytes]:
    import sys

    from kio.index import load_response_schema
    from kio.schema.errors import ErrorCode
    from kio.serial import entity_writer

    cls = load_response_schema(1, 11)
    module = sys.modules[cls.__module__]
    for records in (next(_batches()), None):
        body = cls(
            throttle_time=timedelta(0), error_code=ErrorCode.none, session_id=0,
            responses=(module.FetchableTopicResponse(topic="t", partitions=(
                module.PartitionData(
                    partition_index=0, error_code=ErrorCode.none, high_watermark=9,
                    last_stable_offset=9, log_start_offset=0,
                    aborted_transactions=(module.AbortedTransaction(producer_id=1,
                                                                    first_offset=2),),
                    preferred_read_replica=-1, records=records),
            )),),
        )
        buffer = io.BytesIO()
        entity_writer(cls)(buffer, body)
        yield struct.pack(">i", 7) + buffer.getvalue()


def columnar_seeds() -> Iterator[bytes]:
    from tidelog.records.batch import Codec, RecordBatch

    for raw in _batches():
        batch = RecordBatch(memoryview(raw))
        if batch.attributes & 7 == Codec.NONE:
            yield bytes([batch.records_count, 0x11]) + bytes(batch.records_bytes)
            yield bytes([batch.records_count, 0x10]) + bytes(batch.records_bytes)


def zk_seeds() -> Iterator[bytes]:
    from tidelog.cluster import zk_payloads as zk

    payloads = [
        zk.BrokerRegistration(1, "127.0.0.1", 9092, 1700000000000, rack="r1").encode(),
        json.dumps({"version": 2, "brokerid": 1, "timestamp": "1700000000000",
                    "kraftControllerEpoch": -1}).encode(),
        zk.encode_controller_epoch(3),
        zk.TopicAssignment("topic", zk.new_topic_id(), {0: (1, 2, 3), 1: (2, 3, 1)}).encode(),
        zk.PartitionState(1, 4, (1, 2), 2).encode(),
        json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0}]}).encode(),
        zk.encode_cluster_id("BTfEbZN2SkeldUjoUah0kg"),
    ]
    for selector, payload in enumerate(payloads):
        yield bytes([selector]) + payload


def offsets_seeds() -> Iterator[bytes]:
    from tidelog.coordinator.record_keys import GroupMetadataKey, OffsetCommitKey
    from tidelog.coordinator.record_values import (
        GroupMetadataValue,
        MemberMetadata,
        OffsetCommitValue,
    )
    from tidelog.coordinator.records import encode_key, encode_value

    offset_key = encode_key(OffsetCommitKey("group", "topic", 3))
    for version in range(OffsetCommitValue.MAX_VERSION + 1):
        value = encode_value(OffsetCommitValue(42, "meta", 1700000000000, 5, -1), version)
        yield struct.pack(">H", len(offset_key)) + offset_key + value
    group_key = encode_key(GroupMetadataKey("group"))
    member = MemberMetadata("member-1", "client", "/127.0.0.1", 30000, 10000, b"sub", b"asg",
                            None)
    for version in range(GroupMetadataValue.MAX_VERSION + 1):
        value = encode_value(
            GroupMetadataValue("consumer", 3, "range", "member-1", 1700000000000, (member,)),
            version,
        )
        yield struct.pack(">H", len(group_key)) + group_key + value
    yield struct.pack(">H", len(group_key)) + group_key + b"\xff"  # tombstone


def snapshot_seeds() -> Iterator[bytes]:
    from tidelog.storage.producer_state import (
        BatchMetadata,
        ProducerEntry,
        ProducerStateManager,
    )

    state = ProducerStateManager()
    for producer_id in range(3):
        entry = ProducerEntry(producer_id)
        for n in range(producer_id + 1):
            entry.batches.append(BatchMetadata(n * 5, n * 5 + 4, n * 10, n * 10 + 4, 1700 + n))
        state.producers[1000 + producer_id] = entry
    yield state.encode()
    yield ProducerStateManager().encode()


def otlp_seeds() -> Iterator[bytes]:
    from protocol.otlp_encode import (
        gauge,
        histogram,
        histogram_point,
        metrics_data,
        monotonic_sum,
        number_point,
    )

    yield metrics_data(
        gauge("org.apache.kafka.producer.record.queue.time.avg", number_point(0.5, {"a": "b"})),
        monotonic_sum("org.apache.kafka.consumer.fetch.total", number_point(3)),
        histogram("latency", histogram_point(2, 1.5, {"node.id": "1"})),
        resource={"client_rack": "r"},
    )
    yield b""


SEEDS: dict[str, Callable[[], Iterator[bytes]]] = {
    "request": request_seeds,
    "produce": produce_seeds,
    "fetch_response": fetch_response_seeds,
    "record_batch": _batches,
    "columnar": columnar_seeds,
    "zk_payload": zk_seeds,
    "offsets_record": offsets_seeds,
    "producer_snapshot": snapshot_seeds,
    "otlp": otlp_seeds,
}

if os.environ.get("TIDELOG_FUZZ_SELFTEST") == "1":
    # A planted bug, to show that the harness fails when a decoder raises an untyped error.
    def _planted(data: bytes) -> None:
        if len(data) > 2 and data[0] == 0x42:
            raise ValueError("planted untyped error")

    TARGETS["selftest"] = _planted
    SEEDS["selftest"] = lambda: iter([b"abc"])
