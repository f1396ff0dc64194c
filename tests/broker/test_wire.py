"""The hand-written Produce decoder and Fetch encoder agree byte for byte with kio."""

from __future__ import annotations

import io
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial import entity_reader, entity_writer

from tidelog.errors import ProtocolDecodeError
from tidelog.protocol.codec import RequestHeader, encode_response
from tidelog.protocol.wire import (
    FetchPartitionData,
    FetchTopicData,
    SendSlice,
    decode_produce_request,
    decode_request_header,
    encode_fetch_response,
)


def _produce_frame(version: int, topics: list[tuple[str, list[tuple[int, bytes | None]]]]) -> bytes:
    request_cls = load_request_schema(0, version)
    module = sys.modules[request_cls.__module__]
    body = request_cls(
        transactional_id=None,
        acks=-1,
        timeout=timedelta(milliseconds=1500),
        topic_data=tuple(
            module.TopicProduceData(
                name=name,
                partition_data=tuple(
                    module.PartitionProduceData(index=index, records=records)
                    for index, records in partitions
                ),
            )
            for name, partitions in topics
        ),
    )
    header = request_cls.__header_schema__(
        request_api_key=0, request_api_version=version, correlation_id=7, client_id="t"
    )
    buffer = io.BytesIO()
    entity_writer(type(header))(buffer, header)
    entity_writer(request_cls)(buffer, body)
    return buffer.getvalue()


_topics = st.lists(
    st.tuples(
        st.text(alphabet="abc._-", min_size=1, max_size=8),
        st.lists(
            st.tuples(st.integers(0, 2**31 - 1), st.one_of(st.none(), st.binary(max_size=80))),
            max_size=4,
        ),
    ),
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(version=st.integers(3, 10), topics=_topics)
def test_produce_decoder_matches_kio(version: int, topics: list) -> None:
    frame = bytearray(_produce_frame(version, topics))
    view = memoryview(frame)
    header, position = decode_request_header(view)
    assert (header.api_key, header.api_version, header.correlation_id) == (0, version, 7)
    assert header.client_id == "t"
    decoded = decode_produce_request(view, version, position)
    assert decoded.acks == -1 and decoded.timeout_ms == 1500
    assert decoded.transactional_id is None
    got = [
        (t.name, [(p.index, None if p.records is None else bytes(p.records)) for p in t.partitions])
        for t in decoded.topics
    ]
    assert got == [(name, list(parts)) for name, parts in topics]


def test_produce_records_are_writable_views_into_the_frame() -> None:
    frame = bytearray(_produce_frame(9, [("t", [(0, b"x" * 70)])]))
    view = memoryview(frame)
    _, position = decode_request_header(view)
    records = decode_produce_request(view, 9, position).topics[0].partitions[0].records
    assert records is not None and not records.readonly
    records[0] = ord("y")
    assert b"y" + b"x" * 69 in frame


@settings(max_examples=200, deadline=None)
@given(cut=st.integers(0, 200), version=st.integers(3, 10))
def test_truncated_produce_frames_raise_the_typed_error(cut: int, version: int) -> None:
    frame = _produce_frame(version, [("topic", [(0, b"r" * 40), (1, None)])])
    truncated = memoryview(bytearray(frame[: min(cut, len(frame) - 1)]))
    with pytest.raises(ProtocolDecodeError):
        _, position = decode_request_header(truncated)
        decode_produce_request(truncated, version, position)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=120), version=st.integers(3, 10))
def test_random_produce_bodies_raise_only_the_typed_error(data: bytes, version: int) -> None:
    try:
        decode_produce_request(memoryview(bytearray(data)), version, 0)
    except ProtocolDecodeError:
        pass


def _kio_fetch_frame(version: int, header: RequestHeader, topics: list, payloads: dict) -> bytes:
    cls = load_response_schema(1, version)
    module = sys.modules[cls.__module__]
    kio_topics = []
    for topic in topics:
        partitions = []
        for partition in topic.partitions:
            fields = dict(
                partition_index=partition.partition_index,
                error_code=KioErrorCode(partition.error_code),
                high_watermark=partition.high_watermark,
                last_stable_offset=partition.last_stable_offset,
                aborted_transactions=() if partition.aborted_transactions_listed else None,
                records=payloads[(topic.name, partition.partition_index)],
            )
            if version >= 5:
                fields["log_start_offset"] = partition.log_start_offset
            if version >= 11:
                fields["preferred_read_replica"] = -1
            partitions.append(module.PartitionData(**fields))
        key = {"topic_id": topic.topic_id} if version >= 13 else {"topic": topic.name}
        kio_topics.append(module.FetchableTopicResponse(**key, partitions=tuple(partitions)))
    fields = {"throttle_time": timedelta(0), "responses": tuple(kio_topics)}
    if version >= 7:
        fields.update(error_code=KioErrorCode(0), session_id=0)
    return encode_response(header, cls(**fields))


@pytest.mark.parametrize("version", range(4, 17))
def test_fetch_encoder_matches_kio(version: int, tmp_path: Path) -> None:
    segment = tmp_path / "segment"
    segment.write_bytes(b"0123456789" * 10)
    payloads = {("a", 0): b"2345678", ("a", 1): b"", ("b", 3): b"0123456789" * 3}
    files: list[io.FileIO] = []

    def piece(position: int, length: int) -> list[SendSlice]:
        if not length:
            return []
        files.append(io.FileIO(segment, "rb"))
        return [SendSlice(files[-1], position, length)]

    topics = [
        FetchTopicData(
            "a",
            uuid.uuid4(),
            [
                FetchPartitionData(0, 0, 100, 100, 5, piece(2, 7)),
                FetchPartitionData(1, 1, -1, -1, 0, [], aborted_transactions_listed=True),
            ],
        ),
        FetchTopicData("b", uuid.uuid4(), [FetchPartitionData(3, 0, 9, 9, 0, piece(0, 30))]),
    ]
    header = RequestHeader(1, version, 99, "c", version >= 12)
    outgoing = encode_fetch_response(header, topics)
    stitched = b"".join(
        part if isinstance(part, bytes) else segment.read_bytes()[part.position :][: part.length]
        for part in outgoing.parts
    )
    assert stitched == _kio_fetch_frame(version, header, topics, payloads)
    assert outgoing.size == len(stitched)
    for file in files:
        file.close()
    # The frame also parses back with kio.
    body = stitched[8 + (1 if version >= 12 else 0) :]
    parsed, _ = entity_reader(load_response_schema(1, version))(body, 0)
    assert len(parsed.responses) == 2
