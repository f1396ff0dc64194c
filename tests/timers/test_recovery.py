"""The timer service's start-up on real storage, in process, with time passed in.

Each case builds the state a crash leaves at one precise point (the SIGKILL test in
test_delivery_crash.py hits such points by chance), restarts, and checks that every record is
delivered exactly once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog.broker.config import load_config
from tidelog.broker.state import Broker
from tidelog.broker.timers.service import TimerService, service
from tidelog.errors import ErrorCode, InvalidRecordError, KafkaError
from tidelog.records.batch import Codec, RecordBatch, iter_batches
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.record import Record, iter_records
from tidelog.storage.timer_records import TIMER_TOPIC, delivery_time, header_value
from tidelog.types import TopicPartition

TOPIC = "later"
TP = TopicPartition(TOPIC, 0)


def with_timers(data_dir: Path, body: Callable[[Broker, TimerService], None]) -> None:
    """Open a broker on `data_dir`, start its timer service (loading), run `body`, close."""

    async def run() -> None:
        broker = Broker(load_config(None, {}, data_dir=data_dir))
        try:
            if broker.topics.get(TOPIC) is None:
                broker.create_topic(TOPIC, 1, {"tidelog.delivery.delay.enable": "true"})
            body(broker, service(broker))
        finally:
            broker.close()

    asyncio.run(run())


def divert(broker: Broker, timers: TimerService, now_ms: int, *records: NewRecord) -> None:
    batch = RecordBatch(memoryview(build_batch(list(records), now_ms=now_ms)))
    diverted = timers.divert(broker.partition_log(TOPIC, 0), TP, [batch], now_ms)
    assert diverted.batches == [] and diverted.timer_log is not None


def delayed(value: bytes, due_ms: int, *extra: tuple[str, bytes]) -> NewRecord:
    return NewRecord(value, headers=(("TIMER_DELIVER_MS", str(due_ms).encode()), *extra))


def target_records(broker: Broker) -> list[Record]:
    partition_log = broker.partition_log(TOPIC, 0)
    if partition_log.log_end_offset == 0:
        return []
    data = b"".join(s.read_bytes() for s in partition_log.read(0, 1 << 20).slices)
    return [record for batch in iter_batches(data) for record in iter_records(batch)]


def test_delivery_whose_done_record_was_lost_is_not_repeated(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    start_ms: list[int] = []

    def deliver_then_lose_done(broker: Broker, timers: TimerService) -> None:
        now_ms = timers.wheel.current_tick * timers.wheel.tick_ms
        start_ms.append(now_ms)
        divert(broker, timers, now_ms, delayed(b"a", now_ms + 500), delayed(b"b", now_ms + 900))
        assert timers.deliver_due(now_ms + 1_000) == 2
        timer_log = broker.partition_log(TIMER_TOPIC, 0)
        assert timer_log.log_end_offset == 3  # two SCHEDULE records, one DONE
        timer_log.truncate_to(2)  # the crash came between the target append and the DONE

    with_timers(data_dir, deliver_then_lose_done)

    def restart(broker: Broker, timers: TimerService) -> None:
        assert len(timers.wheel) == 0  # found in the target log, not pending again
        assert timers.deliver_due(start_ms[0] + 60_000) == 0
        assert [r.value for r in target_records(broker)] == [b"a", b"b"]
        assert broker.partition_log(TIMER_TOPIC, 0).log_end_offset == 3  # the DONE, again

    with_timers(data_dir, restart)
    with_timers(data_dir, restart)  # and the rewritten DONE holds on the next start


def test_pending_records_survive_a_restart_and_are_delivered_once(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    due: list[int] = []

    def schedule(broker: Broker, timers: TimerService) -> None:
        now_ms = timers.wheel.current_tick * timers.wheel.tick_ms
        due.append(now_ms + 300)
        divert(broker, timers, now_ms, delayed(b"x", due[0], ("UNIQ_KEY", b"u1")),
               delayed(b"y", due[0], ("UNIQ_KEY", b"u2")))
        divert(broker, timers, now_ms, NewRecord(None, headers=(("TIMER_CANCEL", b"u2"),)))

    with_timers(data_dir, schedule)

    def deliver(broker: Broker, timers: TimerService) -> None:
        assert len(timers.wheel) == 2
        timers.deliver_due(due[0] + 100)
        assert [r.value for r in target_records(broker)] == [b"x"]  # y was cancelled
        assert timers.cancelled_total == 1

    with_timers(data_dir, deliver)

    def nothing_left(broker: Broker, timers: TimerService) -> None:
        assert len(timers.wheel) == 0
        assert timers.deliver_due(due[0] + 60_000) == 0
        assert [r.value for r in target_records(broker)] == [b"x"]

    with_timers(data_dir, nothing_left)


def test_timer_log_is_cut_below_the_oldest_pending_record(tmp_path: Path) -> None:
    def run(broker: Broker, timers: TimerService) -> None:
        now_ms = timers.wheel.current_tick * timers.wheel.tick_ms
        divert(broker, timers, now_ms, delayed(b"soon", now_ms + 200))
        divert(broker, timers, now_ms, delayed(b"late", now_ms + 50_000))
        timers.deliver_due(now_ms + 1_000)
        timers.cleanup(now_ms + 1_000)
        timer_log = broker.partition_log(TIMER_TOPIC, 0)
        assert timer_log.log_start_offset == 1  # "late" (offset 1) is the oldest pending
        timers.deliver_due(now_ms + 60_000)
        timers.cleanup(now_ms + 60_000)
        assert timer_log.log_start_offset == timer_log.log_end_offset
        assert [r.value for r in target_records(broker)] == [b"soon", b"late"]

    with_timers(tmp_path / "data", run)


_NAMES = st.sampled_from(["TIMER_DELIVER_MS", "TIMER_DELAY_MS", "DELAY", "TIMER_CANCEL",
                          "UNIQ_KEY", "x", "TIMER_", "DELAYED"])
_VALUES = st.one_of(
    st.none(), st.binary(max_size=24), st.integers(0, 10**21).map(lambda n: str(n).encode()),
    st.integers(0, 20).map(lambda n: str(n).encode()),
)
_RECORDS = st.lists(
    st.lists(st.tuples(_NAMES, _VALUES), max_size=4).map(
        lambda headers: NewRecord(b"v", headers=tuple(headers))),
    min_size=1, max_size=6,
)


@settings(max_examples=25)
@given(batches=st.lists(_RECORDS, min_size=1, max_size=5), codec=st.sampled_from(list(Codec)))
def test_produce_hook_takes_any_headers(tmp_path_factory: pytest.TempPathFactory,
                                        batches: list[list[NewRecord]], codec: Codec) -> None:
    """Any header names and values: the hook refuses the batch exactly when a model of the
    header rules does, keeps the due-now records and schedules the others (both the column
    scan and the full decode decide)."""
    data_dir = tmp_path_factory.mktemp("fuzz") / "data"

    def run(broker: Broker, timers: TimerService) -> None:
        partition_log = broker.partition_log(TOPIC, 0)
        now_ms = timers.wheel.current_tick * timers.wheel.tick_ms
        max_delay_ms = partition_log.config.tidelog_delivery_max_delay_ms
        for records in batches:
            expected: tuple[int, int] | None = (0, 0)  # (kept, scheduled); None: refused
            for record in records:
                if header_value(record.headers, "TIMER_CANCEL") is not None:
                    continue  # the first TIMER_CANCEL header decides
                try:
                    due_ms = delivery_time(record.headers, now_ms, max_delay_ms)
                except InvalidRecordError:
                    expected = None
                    break
                later = due_ms is not None and due_ms > now_ms
                expected = (expected[0] + (not later), expected[1] + later)
            batch = RecordBatch(memoryview(build_batch(records, codec=codec, now_ms=now_ms)))
            before = len(timers.wheel)
            try:
                diverted = timers.divert(partition_log, TP, [batch], now_ms)
            except KafkaError as error:
                assert expected is None, error
                assert error.code == ErrorCode.INVALID_RECORD
                assert len(timers.wheel) == before
                continue
            kept = sum(b.records_count for b in diverted.batches)
            assert (kept, len(timers.wheel) - before) == expected

    with_timers(data_dir, run)


def test_idempotent_sequences_come_back_after_an_unclean_start(tmp_path: Path) -> None:
    """The target's producer state never saw the batch the timer log took; without the
    SEQUENCE record an unclean start would forget it and refuse the producer's next batch."""
    data_dir = tmp_path / "data"

    def produce_three(broker: Broker, timers: TimerService) -> None:
        now_ms = timers.wheel.current_tick * timers.wheel.tick_ms
        partition_log = broker.partition_log(TOPIC, 0)
        first = build_batch([NewRecord(b"a")], producer_id=7, producer_epoch=0,
                            base_sequence=0, now_ms=now_ms)
        partition_log.append([RecordBatch(memoryview(first))], now_ms=now_ms)
        taken = build_batch([delayed(b"b", now_ms + 60_000), NewRecord(b"c")], producer_id=7,
                            producer_epoch=0, base_sequence=1, now_ms=now_ms)
        timers.divert(partition_log, TP, [RecordBatch(memoryview(taken))], now_ms)
        assert partition_log.producer_state.producers[7].last_sequence == 2

    with_timers(data_dir, produce_three)
    for snapshot in (data_dir / f"{TOPIC}-0").glob("*.snapshot"):
        snapshot.unlink()  # as if the broker died before writing one

    def restart(broker: Broker, timers: TimerService) -> None:
        state = broker.partition_log(TOPIC, 0).producer_state
        assert state.producers[7].last_sequence == 2
        state.check(7, 0, 3, 3)  # the producer's next batch is in sequence

    with_timers(data_dir, restart)


def test_a_topic_created_again_gets_none_of_its_predecessors_records(tmp_path: Path) -> None:
    def run(broker: Broker, timers: TimerService) -> None:
        now_ms = timers.wheel.current_tick * timers.wheel.tick_ms
        divert(broker, timers, now_ms, delayed(b"old", now_ms + 300))
        broker.delete_topic(TOPIC)
        broker.create_topic(TOPIC, 1, {"tidelog.delivery.delay.enable": "true"})
        assert timers.deliver_due(now_ms + 1_000) == 0
        assert target_records(broker) == []
        assert len(timers.wheel) == 0

    with_timers(tmp_path / "data", run)


def test_one_round_delivers_in_due_order(tmp_path: Path) -> None:
    """Records expiring in the same round (a stalled loop, a restart) keep their due order."""
    def run(broker: Broker, timers: TimerService) -> None:
        now_ms = timers.wheel.current_tick * timers.wheel.tick_ms
        divert(broker, timers, now_ms, delayed(b"third", now_ms + 900),
               delayed(b"first", now_ms + 300), delayed(b"second", now_ms + 600))
        assert timers.deliver_due(now_ms + 5_000) == 3
        assert [r.value for r in target_records(broker)] == [b"first", b"second", b"third"]

    with_timers(tmp_path / "data", run)


def test_done_follows_the_targets_fsync_with_durability_sync(tmp_path: Path) -> None:
    """With durability=sync a produce is acknowledged once fsynced; a delivery is marked DONE
    only once it is as durable (else a power cut could keep the DONE and lose the record)."""

    async def run() -> None:
        broker = Broker(load_config(None, {}, data_dir=tmp_path / "data"))
        try:
            broker.create_topic(TOPIC, 1, {"tidelog.delivery.delay.enable": "true",
                                           "durability": "sync"})
            timers = service(broker)
            now_ms = timers.wheel.current_tick * timers.wheel.tick_ms
            divert(broker, timers, now_ms, delayed(b"a", now_ms + 500))
            target = broker.partition_log(TOPIC, 0)
            assert target.recovery_point == 0
            assert timers.deliver_due(now_ms + 1_000) == 1
            assert target.log_end_offset == 1
            assert target.recovery_point == 1  # fsynced before the DONE below was written
            assert broker.partition_log(TIMER_TOPIC, 0).log_end_offset == 2  # SCHEDULE, DONE
        finally:
            broker.close()

    asyncio.run(run())


def test_cluster_replay_finds_open_intents_and_sequences(tmp_path: Path) -> None:
    """What a new timer partition leader takes over (broker/timers/cluster.py): SCHEDULEs
    without DONE pending, the last INTENT of each target giving its next producer epoch and
    sequence, an INTENT without DONE in doubt (its records are re-sent, not pending), an
    INTENT without ids only a sequence, and nothing past the committed end."""
    from tidelog.broker.timers.divert import meta_record
    from tidelog.broker.timers.loading import load_timer_log
    from tidelog.storage.timer_records import Done, Intent, Schedule

    async def run() -> None:
        broker = Broker(load_config(None, {}, data_dir=tmp_path / "data"))
        try:
            broker.create_topic(TIMER_TOPIC, 1, {}, internal=True)
            timer_log = broker.partition_log(TIMER_TOPIC, 0)
            other = TopicPartition(TOPIC, 1)

            def schedule(partition: int) -> NewRecord:
                return meta_record(Schedule(5_000, 0, 0, TOPIC, partition))

            records = [
                schedule(0), schedule(0), schedule(0), schedule(1), schedule(1),  # 0-4
                meta_record(Intent(0, 0, TOPIC, 0, (0,))),  # 5
                meta_record(Done(7, TOPIC, 0, (0,))),  # 6
                meta_record(Intent(0, 1, TOPIC, 0, (1, 2))),  # 7: open
                meta_record(Intent(3, 40, TOPIC, 1, ())),  # 8: a sequence past a cut
                meta_record(Done(9, TOPIC, 1, (3,))),  # 9
                meta_record(Intent(3, 40, TOPIC, 1, (4,))),  # 10: not committed yet
            ]
            for record in records:
                timer_log.append([RecordBatch(memoryview(build_batch([record], now_ms=1)))],
                                 now_ms=1)
            loaded = load_timer_log(timer_log, 1_000, end_offset=10)
            assert loaded.next_sequence == {TP: (0, 3), other: (3, 40)}
            assert set(loaded.in_doubt) == {TP}
            assert loaded.in_doubt[TP].timer_ids == (1, 2)
            assert list(loaded.timer_ids) == [4]  # 0 and 3 done, 1 and 2 in doubt
            whole = load_timer_log(timer_log, 1_000)
            assert whole.in_doubt[other].timer_ids == (4,) and len(whole.timer_ids) == 0
        finally:
            broker.close()

    asyncio.run(run())
