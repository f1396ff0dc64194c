"""The hand-written Fetch v11 client codec agrees with kio, and malformed responses only ever
raise ProtocolDecodeError."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.fetch.v11 import response as fetch_response

from tidelog.errors import ProtocolDecodeError
from tidelog.protocol.codec import RequestHeader, decode_request, encode_response
from tidelog.protocol.fetch_client import decode_fetch_response, encode_fetch_request


def test_request_decodes_with_kio_to_what_was_asked() -> None:
    frame = encode_fetch_request(
        41, "tidelog-spark", "clicks", 3, 123_456_789_012,
        max_wait_ms=500, min_bytes=1, max_bytes=4_194_304, partition_max_bytes=1_048_576,
        isolation_level=1,
    )
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    request = decode_request(frame[4:])
    assert (request.header.api_key, request.header.api_version) == (1, 11)
    assert request.header.correlation_id == 41
    assert request.header.client_id == "tidelog-spark"
    body = request.body
    assert body.replica_id == -1
    assert body.max_wait == datetime.timedelta(milliseconds=500)
    assert (body.min_bytes, body.max_bytes, body.isolation_level) == (1, 4_194_304, 1)
    assert (body.session_id, body.session_epoch) == (0, -1)
    assert body.forgotten_topics_data == () and body.rack_id == ""
    (topic,) = body.topics
    (partition,) = topic.partitions
    assert topic.topic == "clicks"
    assert partition.partition == 3
    assert partition.fetch_offset == 123_456_789_012
    assert partition.current_leader_epoch == -1 and partition.log_start_offset == -1
    assert partition.partition_max_bytes == 1_048_576


def _response_frame(correlation_id: int, records: bytes | None, aborted: bool = False) -> bytes:
    def partition(index: int, payload: bytes | None) -> fetch_response.PartitionData:
        return fetch_response.PartitionData(
            partition_index=index,
            error_code=KioErrorCode.none,
            high_watermark=1000 + index,
            last_stable_offset=1000 + index,
            log_start_offset=7,
            aborted_transactions=(
                (fetch_response.AbortedTransaction(producer_id=5, first_offset=9),)
                if aborted else None
            ),
            preferred_read_replica=-1,
            records=payload,
        )

    body = fetch_response.FetchResponse(
        throttle_time=datetime.timedelta(0),
        error_code=KioErrorCode.none,
        session_id=0,
        responses=(
            fetch_response.FetchableTopicResponse(topic="other", partitions=(partition(2, b"x"),)),
            fetch_response.FetchableTopicResponse(
                topic="clicks", partitions=(partition(0, b"zz"), partition(2, records))
            ),
        ),
    )
    header = RequestHeader(1, 11, correlation_id, "t", False)
    return encode_response(header, body)[4:]


@pytest.mark.parametrize("aborted", [False, True])
def test_response_encoded_by_kio_decodes(aborted: bool) -> None:
    frame = _response_frame(9, b"batch-bytes", aborted)
    fetched = decode_fetch_response(memoryview(frame), 9, "clicks", 2)
    assert (fetched.partition, fetched.error_code) == (2, 0)
    assert (fetched.high_watermark, fetched.log_start_offset) == (1002, 7)
    assert bytes(fetched.records) == b"batch-bytes"
    assert bytes(decode_fetch_response(memoryview(frame), 9, "clicks", 0).records) == b"zz"
    assert bytes(decode_fetch_response(memoryview(frame), 9, "other", 2).records) == b"x"


def test_null_records_and_wrong_answers() -> None:
    frame = _response_frame(3, None)
    assert bytes(decode_fetch_response(memoryview(frame), 3, "clicks", 2).records) == b""
    with pytest.raises(ProtocolDecodeError, match="correlation"):
        decode_fetch_response(memoryview(frame), 4, "clicks", 2)
    with pytest.raises(ProtocolDecodeError, match="does not name"):
        decode_fetch_response(memoryview(frame), 3, "clicks", 1)


def test_every_truncation_is_a_decode_error() -> None:
    frame = _response_frame(1, b"r" * 40, aborted=True)
    for cut in range(len(frame)):
        with pytest.raises(ProtocolDecodeError):
            decode_fetch_response(memoryview(frame[:cut]), 1, "clicks", 2)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_mutated_responses_never_escape_as_other_errors(data: st.DataObject) -> None:
    frame = bytearray(_response_frame(1, b"r" * 40, aborted=True))
    for _ in range(data.draw(st.integers(1, 6))):
        index = data.draw(st.integers(0, len(frame) - 1))
        frame[index] = data.draw(st.integers(0, 255))
    try:
        fetched = decode_fetch_response(memoryview(frame), 1, "clicks", 2)
    except ProtocolDecodeError:
        return
    assert len(fetched.records) <= len(frame)
