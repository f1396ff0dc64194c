"""Fencing with real brokers: leader epochs on the data path (KIP-320) and a stale controller.

Real ZooKeeper, three real `tidelog serve --zookeeper` processes, raw requests where a client
library hides the epochs.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode as KioErrorCode

from tidelog.cluster.zk_layout import PartitionState
from tidelog.cluster.zk_store import ControllerFence, ControllerMovedError, ZkStore
from tidelog.types import TopicPartition

from .harness import SESSION_TIMEOUT_MS, Cluster
from .raw_requests import fetch_error, list_offsets, metadata_leader_epoch, produce

TOPIC = "fenced"
NONE = int(KioErrorCode.none)
FENCED = int(KioErrorCode.fenced_leader_epoch)
UNKNOWN = int(KioErrorCode.unknown_leader_epoch)
NOT_LEADER = int(KioErrorCode.not_leader_or_follower)


@contextmanager
def zk_store(cluster: Cluster) -> Iterator[ZkStore]:
    client = KazooClient(hosts=cluster.zookeeper, timeout=10)
    client.start(timeout=15)
    try:
        yield ZkStore(client)
    finally:
        client.stop()
        client.close()


def _stable(cluster: Cluster) -> bool:
    leader, _, isr = cluster.partition_state(TOPIC)
    return leader >= 0 and cluster.brokers[leader].alive() and len(isr) == 3


def test_fetch_and_list_offsets_honour_the_leader_epoch(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC)
    cluster.wait_for(lambda: _stable(cluster), what="ISR of 3")
    first_address = cluster.bootstrap().split(",")[0]
    first_leader, _ = cluster.wait_value(
        lambda: metadata_leader_epoch(first_address, TOPIC), lambda answer: answer[0] >= 0,
        what=f"broker at {first_address} to see the topic's leader")
    # The leader learns it leads from its own watch, maybe after the broker that answered.
    cluster.wait_value(lambda: metadata_leader_epoch(cluster.brokers[first_leader].address, TOPIC),
                       lambda answer: answer[0] == first_leader,
                       what="the leader to know it leads")
    assert produce(cluster.brokers[first_leader].address, TOPIC, [b"a", b"b"], acks=-1) == (
        NONE, 0)
    cluster.kill(first_leader)  # the controller elects a new leader with leader_epoch + 1
    cluster.wait_for(lambda: cluster.partition_state(TOPIC)[0] not in (-1, first_leader),
                     what="a new leader")
    any_live = cluster.bootstrap().split(",")[0]
    # Each broker learns the election from its own ZooKeeper watch: this one may lag the one
    # that answered above.
    leader, epoch = cluster.wait_value(
        lambda: metadata_leader_epoch(any_live, TOPIC),
        lambda answer: answer[0] not in (-1, first_leader),
        what=f"broker at {any_live} to see the new leader")
    assert epoch >= 1
    address = cluster.brokers[leader].address
    cluster.wait_for(lambda: fetch_error(address, TOPIC, epoch) == NONE, what="leader ready")
    assert fetch_error(address, TOPIC, epoch - 1) == FENCED
    assert fetch_error(address, TOPIC, epoch + 1) == UNKNOWN
    assert fetch_error(address, TOPIC, -1) == NONE  # no epoch given: no check (old clients)
    # Latest = the high watermark (it passes 2 once the surviving follower fetched from the
    # new leader) and the answer carries the real leader epoch.
    cluster.wait_for(lambda: list_offsets(address, TOPIC, epoch) == (NONE, 2, epoch),
                     what="ListOffsets at the high watermark with the leader epoch")
    assert list_offsets(address, TOPIC, epoch - 1)[0] == FENCED
    assert list_offsets(address, TOPIC, epoch + 1)[0] == UNKNOWN
    follower = next(n for n, b in cluster.brokers.items() if b.alive() and n != leader)
    assert fetch_error(cluster.brokers[follower].address, TOPIC, epoch) == NOT_LEADER
    assert fetch_error(cluster.brokers[follower].address, TOPIC, epoch - 1) == FENCED


def test_stopped_or_killed_controller_is_replaced_and_fenced(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC)
    cluster.wait_for(lambda: _stable(cluster), what="ISR of 3")
    tp = TopicPartition(TOPIC, 0)
    with zk_store(cluster) as store:
        old = store.controller_id()
        epoch_and_version = store.controller_epoch()
        assert old is not None and epoch_and_version is not None
        old_fence = ControllerFence(old, *epoch_and_version)
        cluster.signal(old, signal.SIGSTOP)  # past the session timeout: ZooKeeper expires it
        try:
            new = cluster.wait_value(store.controller_id, lambda c: c not in (None, old),
                                     timeout_s=SESSION_TIMEOUT_MS / 1000 * 6,
                                     what="a new controller")
            new_epoch = store.controller_epoch()
            assert new_epoch is not None and new_epoch[0] == old_fence.epoch + 1
            cluster.wait_for(lambda: old not in store.partition_state(tp).state.isr,
                             what="the stopped broker to leave the ISR")
        finally:
            cluster.signal(old, signal.SIGCONT)
        # The resumed broker steps down: it registers again, and its own view names the new
        # controller.
        cluster.wait_for(lambda: old in store.live_brokers(), what="re-registration")
        old_address = cluster.brokers[old].address
        cluster.wait_for(
            lambda: cluster.admin_of(old_address).list_topics(timeout=5).controller_id == new,
            what="the old controller to see the new one",
        )
        cluster.wait_for(lambda: b"resigned as controller" in cluster.brokers[old]
                         .log_path.read_bytes(), what="the old controller to resign")
        # Its fence (epoch and /controller_epoch version it won with) no longer writes.
        current = store.partition_state(tp)
        assert current is not None
        stale = PartitionState(old, current.state.leader_epoch + 1, (old,), old_fence.epoch)
        try:
            store.write_partition_state(old_fence, tp, stale, current.zk_version)
        except ControllerMovedError:
            pass
        else:
            raise AssertionError("a stale controller's write was accepted")
        after = store.partition_state(tp)
        assert after is not None and after.state != stale
        assert store.controller_epoch() == new_epoch and store.controller_id() == new
        cluster.wait_for(lambda: _stable(cluster), what="the old controller back in the ISR")
        # SIGKILL of the (new) controller: a third election, epoch + 1 again.
        cluster.kill(new)
        cluster.wait_for(lambda: store.controller_id() not in (None, new),
                         timeout_s=SESSION_TIMEOUT_MS / 1000 * 6, what="a controller after kill")
        third = store.controller_epoch()
        assert third is not None and third[0] == new_epoch[0] + 1
    cluster.wait_for(lambda: cluster.partition_state(TOPIC)[0] not in (-1, new),
                     what="leadership off the killed controller")
