"""The differential harness's own logic, without brokers: masks, keyed diffs, batches, scripts."""

from __future__ import annotations

import struct
from fnmatch import fnmatchcase

from tidelog.protocol.versions import CLUSTER_ONLY_APIS, SUPPORTED_VERSIONS

from .compare import BrokerMasks, diff
from .known import KNOWN
from .scripts import T0, batch, records, sessions
from .wire import build, encode_request, parse_records


def test_masks() -> None:
    masks = BrokerMasks(now_ms=T0)
    masks.self_node_id = 3
    data = {
        "throttle_time_ms": 5,
        "topics": [
            {"topic_id": "11111111-1111-1111-1111-111111111111", "leader_id": 3},
            {"topic_id": "22222222-2222-2222-2222-222222222222", "leader_id": -1},
            {"topic_id": "11111111-1111-1111-1111-111111111111", "leader_id": 4},
        ],
        "error_message": "boom",
        "log_append_time_ms": T0 + 5,
        "timestamp": T0 - 10 * 86_400_000,
    }
    assert masks.apply(data) == {
        "topics": [
            {"topic_id": "<uuid>", "leader_id": "<self>"},
            {"topic_id": "<uuid>", "leader_id": -1},
            {"topic_id": "<uuid>", "leader_id": 4},
        ],
        "error_message": "<message>",
        "log_append_time_ms": "<now>",
        "timestamp": T0 - 10 * 86_400_000,
    }


def test_lists_with_a_natural_key_compare_by_key_not_order() -> None:
    kafka = {"topics": [{"name": "a", "error_code": 0}, {"name": "b", "error_code": 3}]}
    tidelog = {"topics": [{"name": "b", "error_code": 0}, {"name": "a", "error_code": 0}]}
    assert diff(kafka, tidelog) == [("topics/b/error_code", 3, 0)]


def test_lists_without_a_key_compare_by_index_and_length() -> None:
    found = diff({"x": [1, 2, 3]}, {"x": [1, 5]})
    assert ("x/<length>", 3, 2) in found
    assert ("x/1", 2, 5) in found


def test_batches_round_trip_through_the_parser() -> None:
    data = batch(records(3), base_offset=7) + batch(records(1, 3), bad_crc=True)
    parsed = parse_records(data)
    assert [b["base_offset"] for b in parsed] == [7, 0]
    assert [b["crc_ok"] for b in parsed] == [True, False]
    assert [r["value"] for r in parsed[0]["records"]] == ["v0", "v1", "v2"]
    assert parsed[0]["records"][2]["timestamp"] == T0 + 2000
    assert parse_records(data[:-3])[-1] == {"partial_batch_bytes": len(batch(records(1))) - 3}


def test_every_scripted_body_encodes_and_names_are_unique() -> None:
    ctx = {
        "node": 0,
        "m1_id": "11111111-1111-1111-1111-111111111111",
        "d2": "11111111-1111-1111-1111-111111111111",
        "f": "11111111-1111-1111-1111-111111111111",
        "o_id": "11111111-1111-1111-1111-111111111111",
        "cclassic": "c-classic",
        "cgeneration": 1,
        "share": "11111111-1111-1111-1111-111111111111",
        "pid": 1,
        "epoch": 0,
        "fetch_session": 5,
        "member": "m",
        "generation": 1,
        "cmember": "c",
        "cepoch": 1,
    }
    names: set[str] = set()
    exchanges = 0
    covered: set[int] = set()
    for session in sessions("tok"):
        for step in session.steps:
            body = step.body(ctx) if callable(step.body) else step.body
            frame = encode_request(step.api_key, step.version, 1, body)
            assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
            if step.compare:
                name = f"{session.name}.{step.name}"
                assert name not in names
                names.add(name)
                exchanges += 1
                covered.add(step.api_key)
    assert exchanges >= 150
    # Cluster-only APIs: tests/share/test_cluster_share.py covers the share coordinator's.
    served = set(SUPPORTED_VERSIONS) - CLUSTER_ONLY_APIS
    assert served <= covered, served - covered
    for known in KNOWN.values():
        assert any(fnmatchcase(n, known.exchange) for n in names), known.exchange


def test_unknown_fields_are_refused() -> None:
    from kio.index import load_request_schema

    try:
        build(load_request_schema(3, 12), {"topicz": None})
    except Exception as error:
        assert "topicz" in str(error)
    else:
        raise AssertionError("a misspelt field was accepted")


def test_report_fails_on_new_and_on_fixed_differences() -> None:
    from .compare import Difference
    from .harness import ExchangeResult
    from .run import Report

    known = next(k for k in KNOWN.values() if "*" not in "".join(k.key) and "?" not in k.path)
    documented = Difference(known.exchange, known.path, known.kafka, known.tidelog)
    # render() shows strings as they are, so the documented strings round-trip.
    assert documented.key == known.key

    def report(*differences: Difference) -> Report:
        return Report([ExchangeResult(known.exchange, 0, 0, {}, {}, list(differences))], 1.0)

    assert report(documented).new == [] and known not in report(documented).gone
    surprise = Difference(known.exchange, "some/new/field", "1", "2")
    assert report(documented, surprise).new == [surprise]
    assert known in report().gone  # the difference went away: fixed, so the table must change
