"""Fetch sessions (KIP-227): the partitions a fetcher reads, remembered between requests.

A fetcher that keeps a session sends only the partitions whose fetch offset (or limit)
changed, plus `forgotten_topics_data`; the broker reads every partition of the session and
answers only those with records or a changed high watermark, log start offset or error. With
1,000 partitions and little traffic, requests and responses shrink from O(partitions) to
O(changed partitions).

Request metadata (`session_id`, `session_epoch`), as Kafka's FetchMetadata reads it:

    session_id  epoch   meaning
    0           -1      sessionless full fetch (no session kept; librdkafka always sends this)
    0           0       full fetch; open a session if the cache has room (answered with its id)
    id          0       close session `id`, full fetch, open a new session
    id          -1      close session `id`, sessionless full fetch
    id          n > 0   incremental fetch: `n` must be the session's epoch (1 after opening,
                        then +1 per request, wrapping to 1 after 2**31-1)

An incremental request naming an unknown session gets FETCH_SESSION_ID_NOT_FOUND, a wrong
epoch INVALID_FETCH_SESSION_EPOCH, a topic-id/name mismatch with the session (a Fetch version
on the other side of v13 than the one that opened it) FETCH_SESSION_TOPIC_ID_ERROR; all
three at the top level with session id 0 and no partitions: the fetcher starts over with a
full fetch.

The cache (Kafka's FetchSessionCacheShard, one shard: Tidelog has one event loop) holds at
most `max.incremental.fetch.session.cache.slots` sessions (0: no sessions, every fetch is
full). When full, a new session may evict, in Kafka's order:
1. the least recently used session, if unused for `min.incremental.fetch.session.eviction.ms`
   (Kafka's constant, 120 s; KIP-227's name for it);
2. otherwise the least valuable evictable session, if the newcomer is worth at least as much:
   a follower's (privileged) session beats a consumer's, then more partitions beat fewer.
   A consumer's session is evictable by a follower at once, by anyone once it is older than
   the eviction time (a new session is not pushed out by the next newcomer).
When nothing can be evicted the newcomer gets session id 0 and keeps fetching in full.
A session holds at most `max_partitions` partitions (the broker's max.broker.partitions: a
session names each partition once, and memory stays bounded whatever a client sends): a full
request naming more opens none, an incremental one growing past it ends its session
(FETCH_SESSION_ID_NOT_FOUND, so the fetcher starts over in full).

Pure: time comes in as `now_ms`; runs on the event loop (single writer), nothing blocks.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from tidelog.errors import ErrorCode
from tidelog.protocol.wire import FetchPartitionData, FetchTopicData

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1
DEFAULT_CACHE_SLOTS = 1000  # max.incremental.fetch.session.cache.slots
DEFAULT_EVICTION_MS = 120_000  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS

# A session keys its partitions by topic id (sessions opened by Fetch v13+) or by name.
PartitionKey = tuple[str | uuid.UUID, int]


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: 1 after the initial epoch, wrapping past MAX_EPOCH."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: what the fetcher asked last and what it was told last."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    high_watermark: int = -1  # last sent; -1 (after an error too) forces the next answer
    log_start_offset: int = -1

    def key(self, uses_topic_ids: bool) -> PartitionKey:
        return (self.topic_id if uses_topic_ids else self.topic, self.partition)

    def must_respond(self, data: FetchPartitionData) -> bool:
        """Kafka's CachedPartition.maybeUpdateResponseData: whether an incremental answer
        includes this partition; remembers what it tells."""
        respond = bool(data.records)
        if data.high_watermark != self.high_watermark:
            respond = True
            self.high_watermark = data.high_watermark
        if data.log_start_offset != self.log_start_offset:
            respond = True
            self.log_start_offset = data.log_start_offset
        if data.error_code != ErrorCode.NONE:
            self.high_watermark = -1  # re-sent once the error is gone
            respond = True
        return respond


@dataclass(slots=True)
class FetchSession:
    session_id: int
    privileged: bool  # opened by a follower (replica_id >= 0)
    uses_topic_ids: bool  # opened by Fetch v13+
    creation_ms: int
    last_used_ms: int
    epoch: int = 1  # the epoch the next incremental request must carry
    partitions: dict[PartitionKey, CachedPartition] = field(default_factory=dict)
    # Where the cache filed it at its last touch (Kafka's evictableByPrivileged/ByAll).
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    def update(
        self, changed: Iterable[CachedPartition], forgotten: Iterable[PartitionKey]
    ) -> None:
        """An incremental request: add or update what it names, then drop what it forgets."""
        for partition in changed:
            key = partition.key(self.uses_topic_ids)
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = partition
            else:
                cached.fetch_offset = partition.fetch_offset
                cached.partition_max_bytes = partition.partition_max_bytes
                cached.current_leader_epoch = partition.current_leader_epoch
        for key in forgotten:
            self.partitions.pop(key, None)

    def respond(
        self, topics: Sequence[FetchTopicData], incremental: bool
    ) -> list[FetchTopicData]:
        """Remember what the answer tells; an incremental answer keeps only the partitions
        that must be told, and moves those with records to the end of the session so the
        next reads start with the others (Kafka's fairness under max_bytes)."""
        answered: list[FetchTopicData] = []
        moved: list[PartitionKey] = []
        for topic in topics:
            kept: list[FetchPartitionData] = []
            name: str | uuid.UUID = topic.topic_id if self.uses_topic_ids else topic.name
            for data in topic.partitions:
                key = (name, data.partition_index)
                cached = self.partitions.get(key)
                if cached is None or cached.must_respond(data) or not incremental:
                    kept.append(data)
                    if incremental and data.records:
                        moved.append(key)
            if kept:
                answered.append(replace(topic, partitions=kept))
        for key in moved:
            self.partitions[key] = self.partitions.pop(key)
        return answered


@dataclass(frozen=True, slots=True)
class CacheStats:
    sessions: int
    partitions: int
    evictions: int


class FetchSessionCache:
    """At most `max_entries` sessions, evicted as Kafka's FetchSessionCacheShard does."""

    def __init__(
        self,
        max_entries: int = DEFAULT_CACHE_SLOTS,
        eviction_ms: int = DEFAULT_EVICTION_MS,
        rng: random.Random | None = None,
        max_partitions: int = 4000,
    ) -> None:
        self.max_entries = max(0, max_entries)
        self.eviction_ms = eviction_ms
        self.max_partitions = max_partitions
        self._sessions: dict[int, FetchSession] = {}
        self._rng = rng or random.Random()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def stats(self) -> CacheStats:
        partitions = sum(len(session.partitions) for session in self._sessions.values())
        return CacheStats(len(self._sessions), partitions, self.evictions)

    def remove(self, session_id: int) -> FetchSession | None:
        return self._sessions.pop(session_id, None)

    def touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms
        old = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = not session.privileged or old
        session.evictable_by_all = old

    def maybe_create(
        self,
        now_ms: int,
        privileged: bool,
        uses_topic_ids: bool,
        partitions: Sequence[CachedPartition],
    ) -> FetchSession | None:
        """A new session holding `partitions`, or None (too many partitions, or no room and
        nothing to evict)."""
        if len(partitions) > self.max_partitions:
            return None
        if len(self._sessions) >= self.max_entries and not self._try_evict(
            privileged, len(partitions), now_ms
        ):
            return None
        session = FetchSession(
            self._new_session_id(), privileged, uses_topic_ids, now_ms, now_ms
        )
        for partition in partitions:
            session.partitions[partition.key(uses_topic_ids)] = partition
        self._sessions[session.session_id] = session
        self.touch(session, now_ms)
        return session

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        if not self._sessions:
            return False
        # O(sessions), only when the cache is full; the cache is bounded by its slots.
        least_recent = min(
            self._sessions.values(), key=lambda s: (s.last_used_ms, s.session_id)
        )
        if now_ms - least_recent.last_used_ms > self.eviction_ms:
            return self._evict(least_recent)
        candidates = [
            session
            for session in self._sessions.values()
            if (session.evictable_by_privileged if privileged else session.evictable_by_all)
        ]
        if not candidates:
            return False
        weakest = min(candidates, key=_evictable_key)
        # The newcomer's key carries session id 0: a tie on (privileged, size) keeps the old.
        if (privileged, size, 0) < _evictable_key(weakest):
            return False
        return self._evict(weakest)

    def _evict(self, session: FetchSession) -> bool:
        del self._sessions[session.session_id]
        self.evictions += 1
        return True

    def _new_session_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, MAX_EPOCH)
            if session_id not in self._sessions:
                return session_id


@dataclass(frozen=True, slots=True)
class FetchContext:
    """How one Fetch request relates to the cache (Kafka's FetchManager.newContext)."""

    kind: str  # "sessionless", "full" (may open a session), "incremental" or "error"
    error: ErrorCode = ErrorCode.NONE
    session: FetchSession | None = None


def new_context(
    cache: FetchSessionCache,
    session_id: int,
    epoch: int,
    uses_topic_ids: bool,
    changed: Sequence[CachedPartition],
    forgotten: Sequence[PartitionKey],
    now_ms: int,
) -> FetchContext:
    """Classify a request (the table in the module docstring); an incremental one updates
    its session and advances the epoch the next request must carry."""
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)  # a full request closes the session it names
        return FetchContext("sessionless" if epoch == FINAL_EPOCH else "full")
    session = cache.get(session_id)
    if session is None:
        return FetchContext("error", ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    if session.epoch != epoch:
        return FetchContext("error", ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    if session.uses_topic_ids != uses_topic_ids:
        return FetchContext("error", ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
    session.update(changed, forgotten)
    if len(session.partitions) > cache.max_partitions:
        cache.remove(session_id)
        return FetchContext("error", ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    if not session.partitions:
        cache.remove(session_id)  # an emptied session ends: answered sessionless
        return FetchContext("sessionless")
    cache.touch(session, now_ms)
    session.epoch = next_epoch(session.epoch)
    return FetchContext("incremental", session=session)


def _evictable_key(session: FetchSession) -> tuple[bool, int, int]:
    # Kafka's EvictableKey: the size cached at the last touch; here the current size, which
    # only differs between a touch and the end of the same request.
    return (session.privileged, len(session.partitions), session.session_id)
