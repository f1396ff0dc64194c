"""The controller's topic changes (Kafka's KafkaController topic and partition handlers).

- creation: replicas placed over the live brokers (placement.assign_replicas), the assignment
  and every partition's initial state written in one fenced multi-op;
- topic change: load topics an admin created (or that appeared while we were not the
  controller) and write the partition states they lack;
- partition modification: states for partitions an admin added to a topic;
- ISR change notifications: refresh the cached states the leaders rewrote;
- deletion requests: delete the topic's znodes and forget it.

Blocking (kazoo, synchronous); run on the member's own thread (controller_zk.py). The data
watches it sets only put PARTITION_MODIFICATION into the member's inbox.
"""

from __future__ import annotations

import logging
import random

from kazoo.exceptions import NoNodeError

from tidelog.cluster import placement
from tidelog.cluster import zk_layout as layout
from tidelog.cluster.controller_context import ControllerContext
from tidelog.cluster.events import ControllerEvent, EventInbox, PartitionChange
from tidelog.cluster.zk_layout import TopicAssignment, ZkLayoutError, new_topic_id
from tidelog.cluster.zk_store import ControllerFence, ControllerMovedError
from tidelog.types import TopicPartition

_log = logging.getLogger(__name__)


class TopicChanges:
    """Topic creation, loading and deletion for the controller whose context it shares."""

    def __init__(self, context: ControllerContext, inbox: EventInbox, rng: random.Random) -> None:
        self._context = context
        self._inbox = inbox
        self._rng = rng
        self._watched_topics: set[str] = set()  # topic znodes with a data watch

    def create_topic(
        self,
        topic: str,
        partition_count: int,
        replication_factor: int,
        *,
        topic_id: str | None = None,
    ) -> TopicAssignment:
        """Place replicas over the live brokers and create the topic (controller only)."""
        context = self._context
        fence = context.require_fence()
        live = context.store.live_brokers()
        context.live = live
        n = len(live)
        assignment = TopicAssignment(
            topic,
            topic_id or new_topic_id(),
            placement.assign_replicas(
                live,
                partition_count,
                replication_factor,
                start_index=self._rng.randrange(n) if n else 0,
                replica_shift=self._rng.randrange(n) if n else 0,
            ),
        )
        states = {
            p: placement.initial_state(replicas, live, controller_epoch=fence.epoch)
            for p, replicas in assignment.partitions.items()
        }
        try:
            written = context.store.create_topic(fence, assignment, states)
        except ControllerMovedError:
            context.resign()
            raise
        context.assignments[topic] = assignment
        for p, state in written.items():
            context.states[TopicPartition(topic, p)] = state
        return assignment

    def on_topic_change(self) -> list[PartitionChange]:
        """Load new topics; create partition states for those an admin only assigned."""
        context = self._context
        fence = context.require_fence()
        changes = []
        topics = set(context.store.topics())
        for gone in set(context.assignments) - topics:
            context.forget_topic(gone)
        for topic in sorted(topics - set(context.assignments)):
            try:
                changes.extend(self._load_topic(fence, topic))
            except NoNodeError:
                continue  # deleted while we read it
            except ZkLayoutError as exc:
                # One unreadable topic must not keep the others from being served.
                _log.error("topic %s skipped: %s", topic, exc)
        return changes

    def on_partition_modification(self) -> list[PartitionChange]:
        """Kafka's PartitionModifications: states for partitions an admin added."""
        context = self._context
        fence = context.require_fence()
        changes = []
        for topic, known in list(context.assignments.items()):
            fresh = context.store.topic_assignment(topic)
            if fresh is not None and set(fresh.partitions) != set(known.partitions):
                changes.extend(self._load_topic(fence, topic))
            elif fresh is not None:
                context.assignments[topic] = fresh  # a reassignment's start or end
        return changes

    def _watch_topic(self, topic: str) -> None:
        if topic in self._watched_topics:
            return
        self._watched_topics.add(topic)

        def watcher(data: bytes | None, stat: object) -> None:
            self._inbox.put(ControllerEvent.PARTITION_MODIFICATION)

        self._context.store.client.DataWatch(layout.topic_path(topic), watcher)

    def _load_topic(self, fence: ControllerFence, topic: str) -> list[PartitionChange]:
        context = self._context
        self._watch_topic(topic)
        assignment = context.store.topic_assignment(topic)
        if assignment is None:
            return []
        missing = {}
        loaded = {}
        for p, replicas in assignment.partitions.items():
            tp = TopicPartition(topic, p)
            current = context.store.partition_state(tp)
            if current is not None:
                loaded[tp] = current
            elif set(replicas) & set(context.live):
                missing[p] = placement.initial_state(
                    replicas, context.live, controller_epoch=fence.epoch
                )
        written = (
            context.store.create_partition_states(fence, topic, missing) if missing else {}
        )
        context.assignments[topic] = assignment
        context.states.update(loaded)
        changes = []
        for p, state in written.items():
            context.states[TopicPartition(topic, p)] = state
            changes.append(PartitionChange(TopicPartition(topic, p), state))
        return changes

    def on_isr_change(self) -> list[TopicPartition]:
        """Refresh the states leaders rewrote; returns those partitions."""
        context = self._context
        refreshed = []
        for name in context.store.isr_change_notifications():
            for tp in context.store.take_isr_change(name):
                fresh = context.store.partition_state(tp)
                if fresh is not None and tp.topic in context.assignments:
                    context.states[tp] = fresh
                    refreshed.append(tp)
        return refreshed

    def on_topic_deletion(self) -> None:
        context = self._context
        fence = context.require_fence()
        for topic in context.store.topics_to_delete():
            context.store.delete_topic(fence, topic)
            context.forget_topic(topic)
