"""Every difference between Apache Kafka and Tidelog the differential test expects.

One entry per (exchange, field path, Kafka value, Tidelog value), exactly as the harness
renders them; ``exchange`` and ``path`` may hold ``*`` wildcards (fnmatch) when one cause shows
in many places (each such entry must still match at least one difference).

The test asserts that the differences found are exactly these: a new one fails (a regression
or a new script to classify), and so does one that stopped happening (it was fixed: delete its
entry here and regenerate docs/compatibility.md with python -m tests.differential.docs).

verdict "fix": Tidelog is wrong and should answer as Kafka does.
verdict "legit": a deliberate or harmless difference; the reason says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase


@dataclass(frozen=True)
class Known:
    exchange: str
    path: str
    kafka: str
    tidelog: str
    verdict: str  # "fix" or "legit"
    reason: str

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.exchange, self.path, self.kafka, self.tidelog)


    def matches(self, key: tuple[str, str, str, str]) -> bool:
        return all(_match(value, pattern) for value, pattern in zip(key, self.key, strict=True))


def _match(value: str, pattern: str) -> bool:
    """fnmatch when the pattern has a wildcard (values like "[]" are literal otherwise)."""
    if "*" in pattern or "?" in pattern:
        return fnmatchcase(value, pattern)
    return value == pattern


def lookup(key: tuple[str, str, str, str]) -> Known | None:
    """The documented entry a difference is, if any."""
    exact = KNOWN.get(key)
    if exact is not None:
        return exact
    for entry in _PATTERNS:
        if entry.matches(key):
            return entry
    return None


def _cause(verdict: str, reason: str, *places: tuple[str, str, str, str]) -> list[Known]:
    """One cause of difference and every (exchange, path, kafka, tidelog) it shows in."""
    return [Known(e, p, k, t, verdict, reason) for e, p, k, t in places]


FIX, LEGIT = "fix", "legit"
ANY = "*"
_FEATURES = "api_versions.v?"  # v3 and v4: v0-2 have no feature fields
_ALL_CONFIG_EXCHANGES = [
    ("create_topics.v7-ok", "topics/c-ok/configs"),
    ("configs.describe-v4-topic-all-names", "results/cfg/configs"),
]

_ENTRIES: list[Known] = [
    # ------------------------------------------------------------------ across APIs
    *_cause(
        LEGIT,
        "Tidelog fills `error_message` (KIP-467 and alike) with a diagnosis where Kafka sends "
        "null; clients show it but decide on the error code only",
        (ANY, "*error_message", "None", "<message>"),
    ),
    *_cause(
        LEGIT,
        "Kafka sends a text where Tidelog sends null; the error codes are compared on their "
        "own (listed separately when they differ)",
        (ANY, "*error_message", "<message>", "None"),
    ),
    # ------------------------------------------------------------------ ApiVersions
    *_cause(
        LEGIT,
        "Kafka 4 still advertises Produce v0-2 (kept for old librdkafka, KAFKA-18659) though "
        "it no longer accepts those versions' message formats; Tidelog serves Produce from v3 "
        "(magic v2 only). Clients use the highest common version",
        ("api_versions.v?", "api_keys/0/min_version", "0", "3"),
    ),
    *_cause(
        LEGIT,
        "KRaft feature levels (KIP-584: metadata.version, group.version, transaction.version, "
        "...): Tidelog has none and sends empty lists and epoch -1, which clients read as "
        "\"every feature at level 0\", i.e. the protocol paths Tidelog serves",
        (_FEATURES, "supported_features*", ANY, ANY),
        (_FEATURES, "finalized_features*", ANY, ANY),
    ),
    *_cause(
        LEGIT,
        "KIP-714 telemetry: Kafka lists GetTelemetrySubscriptions and PushTelemetry only when "
        "a metrics reporter that receives client telemetry is configured (it still answers "
        "them, see client_metrics.*); Tidelog's receiver is its /metrics endpoint, always on, "
        "so it lists them and clients push (docs/operations.md \"Client telemetry\")",
        ("api_versions.v?", "api_keys/71", "<absent>", "{'api_key': 71*"),
        ("api_versions.v?", "api_keys/72", "<absent>", "{'api_key': 72*"),
    ),
    # ------------------------------------------------------------------ Metadata
    *_cause(
        LEGIT,
        "Auto-creation: Kafka 4 forwards the creation to its controller and answers this "
        "Metadata before the topic exists (UNKNOWN_TOPIC_OR_PARTITION, no partitions; the "
        "client retries); Tidelog creates it synchronously and answers what Kafka's next "
        "Metadata answers (compared in metadata.v12-after-auto-create: equal)",
        ("metadata.v4-auto-create", "topics/auto/error_code", "UNKNOWN_TOPIC_OR_PARTITION(3)",
         "NONE(0)"),
        ("metadata.v4-auto-create", "topics/auto/partitions/<length>", "0", "1"),
        ("metadata.v4-auto-create", "topics/auto/partitions/0", "<absent>", ANY),
        ("metadata.v0-absent-auto-creates", "topics/auto0/error_code",
         "UNKNOWN_TOPIC_OR_PARTITION(3)", "NONE(0)"),
        ("metadata.v0-absent-auto-creates", "topics/auto0/partitions/<length>", "0", "1"),
        ("metadata.v0-absent-auto-creates", "topics/auto0/partitions/0", "<absent>", ANY),
    ),
    # ------------------------------------------------------------------ CreateTopics & co
    *_cause(
        LEGIT,
        "`durability` (log.durability: pagecache or sync) is Tidelog's own topic config",
        *[(e, f"{p}/durability", "<absent>", "listed") for e, p in _ALL_CONFIG_EXCHANGES],
    ),
    *_cause(
        LEGIT,
        "`tidelog.delivery.delay.enable` and `tidelog.delivery.max.delay.ms` are Tidelog's own "
        "topic configs for delayed delivery (docs/delivery.md); Kafka has none (KIP-1277 is "
        "under discussion)",
        *[(e, f"{p}/{name}", "<absent>", "listed") for e, p in _ALL_CONFIG_EXCHANGES
          for name in ("tidelog.delivery.delay.enable", "tidelog.delivery.max.delay.ms")],
    ),
    *_cause(
        LEGIT,
        "min.insync.replicas: a KRaft Kafka 4 formats its cluster with a cluster-wide dynamic "
        "default (DYNAMIC_DEFAULT_BROKER_CONFIG, 3); Tidelog has no dynamic broker configs "
        "and reports Kafka's built-in default (DEFAULT_CONFIG, 5), the same value 1",
        ("create_topics.*", "topics/*/configs/min.insync.replicas/config_source", "3", "5"),
        ("configs.describe-*", "results/cfg/configs/min.insync.replicas/config_source",
         "3", "5"),
    ),
    *_cause(
        LEGIT,
        "validate_only: Kafka returns the topic id it would have used, an id nothing can "
        "ever refer to; Tidelog returns null",
        ("create_topics.v7-validate-only", "topics/c-validate/topic_id", "<uuid>", "None"),
    ),
    # ------------------------------------------------------------------ Produce
    *_cause(
        LEGIT,
        "Compression codec 7 does not exist: Kafka fails with an unhandled "
        "IllegalArgumentException (UNKNOWN_SERVER_ERROR, with the partition's log start "
        "offset as for any failed append); Tidelog's CORRUPT_MESSAGE says what is wrong, and "
        "goes with log_start_offset -1 as Kafka's CORRUPT_MESSAGE does",
        ("produce.v9-bad-codec-7", "responses/pe-bad-codec-7/partition_responses/0/error_code",
         "UNKNOWN_SERVER_ERROR(-1)", "CORRUPT_MESSAGE(2)"),
        ("produce.v9-bad-codec-7", "responses/pe-bad-codec-7/partition_responses/0/"
         "log_start_offset", "0", "-1"),
    ),
    *_cause(
        LEGIT,
        "A null records field: Kafka 4.3 sends no answer (the harness waits 3 s), leaving the "
        "client to time out; Tidelog answers CORRUPT_MESSAGE",
        ("produce.v9-null-records", "<connection>", "timed out", "<absent>"),
        ("produce.v9-null-records", "responses", "<absent>", "[{'name': 'pe-magic-1'*"),
    ),
    *_cause(
        LEGIT,
        "A duplicate idempotent batch: Kafka echoes the first append's max timestamp in "
        "log_append_time even on a CreateTime topic (ProducerStateManager's cached batch "
        "metadata); Tidelog sends -1 as for any CreateTime append. Clients read "
        "log_append_time only on LogAppendTime topics",
        ("idempotence.v9-duplicate-seq-2",
         "responses/idem/partition_responses/0/log_append_time", "1600000002000", "None"),
        ("idempotence.v9-duplicate-seq-0",
         "responses/idem/partition_responses/0/log_append_time", "1600000001000", "None"),
    ),
    *_cause(
        LEGIT,
        "An unknown producer's first batch on a partition that never held a record must start "
        "at sequence 0: Tidelog refuses a later sequence as Kafka 4.5 does (KAFKA-15591), so a "
        "retried first request to a just-created partition is not refused forever while a "
        "later one was appended; Kafka 4.3 appends it",
        ("idempotence.v9-never-written-partition-seq-5",
         "responses/idem/partition_responses/1/error_code", "NONE(0)",
         "OUT_OF_ORDER_SEQUENCE_NUMBER(45)"),
        ("idempotence.v9-never-written-partition-seq-5",
         "responses/idem/partition_responses/1/base_offset", "0", "-1"),
    ),
    # ------------------------------------------------------------------ Fetch
    *_cause(
        LEGIT,
        "partition_max_bytes smaller than the data: Kafka fills the limit and cuts the last "
        "batch (a partial batch clients drop, KIP-74); Tidelog stops at the last whole batch",
        ("fetch.v11-partition-max-bytes-100", "responses/f/partitions/0/records/<length>",
         "2", "1"),
        ("fetch.v11-partition-max-bytes-100", "responses/f/partitions/0/records/1",
         "{'partial_batch_bytes': 4}", "<absent>"),
    ),
    # ------------------------------------------------------------------ ListOffsets
    # ------------------------------------------------------------------ OffsetForLeaderEpoch
    # ------------------------------------------------------------------ Offsets
    *_cause(
        LEGIT,
        "The empty group id: Kafka 4's group coordinator accepts \"\" as a group (commit, "
        "describe, delete); Tidelog keeps the classic coordinator's INVALID_GROUP_ID for a "
        "commit, so no group \"\" exists to describe or delete",
        ("offsets.commit-v8-empty-group-id", "topics/o/partitions/0/error_code", "NONE(0)",
         "INVALID_GROUP_ID(24)"),
        ("classic_group.describe-v5-empty-id", "groups//group_state", "Empty", "Dead"),
        ("classic_group.delete-groups-v0-empty-id", "results//error_code", "NONE(0)",
         "GROUP_ID_NOT_FOUND(69)"),
    ),
    # ------------------------------------------------------------------ groups
    *_cause(
        LEGIT,
        "KIP-848 epochs: Kafka bumps the group epoch twice when the first member joins "
        "(member added, then the subscribed topics' metadata recorded), Tidelog once; epochs "
        "are opaque to clients, which only echo them. After a classic member joined and left "
        "and the consumer member left, Kafka 4.3 has bumped the group epoch once more and not "
        "recomputed the target of the emptied group (its assignment epoch lags); Tidelog "
        "recomputes the target on every leave",
        ("consumer_group.heartbeat-v0-join", "member_epoch", "2", "1"),
        ("consumer_group.heartbeat-v0-steady", "member_epoch", "2", "1"),
        ("consumer_group.describe-v0", "groups/g-848/group_epoch", "2", "1"),
        ("consumer_group.describe-v0", "groups/g-848/assignment_epoch", "2", "1"),
        ("consumer_group.describe-v0", "groups/g-848/members/0/member_epoch", "2", "1"),
        ("consumer_group.describe-v0-after-leave", "groups/g-848/group_epoch", "5", "4"),
        ("consumer_group.describe-v0-after-leave", "groups/g-848/assignment_epoch", "2", "4"),
    ),
    *_cause(
        LEGIT,
        "KIP-848 error answers: Kafka sends the schema defaults beside the error (member_id "
        "null, epochs 0, state \"\"), Tidelog echoes the member id and sends -1 / Dead; "
        "clients read only the error code",
        ("consumer_group.heartbeat-v*", "member_id", "None", "<member>"),
        ("consumer_group.heartbeat-v*", "member_epoch", "0", "-1"),
        ("consumer_group.describe-v1-unknown", "groups/g-848-nothere/group_state", "", "Dead"),
        ("consumer_group.describe-v1-unknown", "groups/g-848-nothere/group_epoch", "0", "-1"),
        ("consumer_group.describe-v1-unknown", "groups/g-848-nothere/assignment_epoch", "0",
         "-1"),
    ),
    *_cause(
        LEGIT,
        "ConsumerGroupDescribe of a member without a regex subscription: Kafka sends \"\", "
        "Tidelog null (the field is nullable; both mean no regex)",
        ("consumer_group.describe-v0", "groups/g-848/members/0/subscribed_topic_regex", "",
         "None"),
    ),
    # ------------------------------------------------------------------ configs
    *_cause(
        LEGIT,
        "Config aliases: the peer's server.properties sets log.retention.hours=168 (so does "
        "Tidelog's --set). Kafka reports the broker's log.retention.ms as unset and a "
        "topic's retention.ms as DEFAULT_CONFIG in DescribeConfigs (while its own CreateTopics "
        "v5+ answer says STATIC_BROKER_CONFIG); Tidelog folds the alias into "
        "log.retention.ms and reports it as static everywhere, with the static and default "
        "synonyms",
        ("configs.describe-after-*", "results/cfg/configs/retention.ms/config_source", "5", "4"),
        ("configs.describe-v4-broker-keys", "results/<self>/configs/log.retention.ms/value",
         "None", "604800000"),
        ("configs.describe-v4-broker-keys",
         "results/<self>/configs/log.retention.ms/config_source", "5", "4"),
        ("configs.describe-v4-topic-keys-synonyms",
         "results/cfg/configs/retention.ms/synonyms/<length>", "1", "3"),
        ("configs.describe-v4-topic-keys-synonyms",
         "results/cfg/configs/retention.ms/synonyms/?", "<absent>",
         "{'name': 'log.retention.ms'*"),
    ),
    *_cause(
        LEGIT,
        "Dynamic broker configs: Kafka can change log.segment.bytes and log.retention.ms at "
        "run time (read_only false); Tidelog has no dynamic broker configs, all read-only",
        ("configs.describe-v4-broker-keys", "results/<self>/configs/*/read_only", "False",
         "True"),
    ),
    *_cause(
        LEGIT,
        "Config documentation is Tidelog's own wording",
        ("configs.describe-v3-documentation", "results/cfg/configs/retention.ms/documentation",
         ANY, ANY),
    ),
    *_cause(
        LEGIT,
        "IncrementalAlterConfigs with operation 9: Kafka fails with an unhandled exception "
        "(UNKNOWN_SERVER_ERROR); Tidelog's INVALID_REQUEST says what is wrong",
        ("configs.alter-v1-bad-operation", "responses/cfg/error_code",
         "UNKNOWN_SERVER_ERROR(-1)", "INVALID_REQUEST(42)"),
    ),
    # ------------------------------------------------------------------ client metrics
    *_cause(
        LEGIT,
        "A new client instance id is random on both brokers, and the subscription id is "
        "derived from it (Kafka: CRC32C of the metrics and interval XOR the id's hash); "
        "clients only echo it",
        ("client_metrics.get-subscriptions-v0", "subscription_id", ANY, ANY),
    ),
    # ------------------------------------------------------------------ transactions
    *_cause(
        LEGIT,
        "A read_committed fetch after an abort: Kafka 4.3.1 stopped before the ABORT marker "
        "(offset 1) although its high watermark and LSO are 2; Tidelog sends every batch below "
        "the LSO, the marker included. Clients skip control batches and move past them either "
        "way (Kafka sends the marker on the next fetch)",
        ("transactions.fetch-v11-read-committed-aborted",
         "responses/txn-data/partitions/0/records/<length>", "1", "2"),
        ("transactions.fetch-v11-read-committed-aborted",
         "responses/txn-data/partitions/0/records/1", "<absent>", "{'base_offset': 1*"),
    ),
    # ------------------------------------------------------------------ share groups
    *_cause(
        LEGIT,
        "Share groups (KIP-932): Kafka bumps the group epoch twice when the first member joins "
        "and computes the assignment asynchronously (the member gets it at a later heartbeat); "
        "Tidelog bumps once and assigns in the joining heartbeat. Epochs are opaque to clients",
        ("share_group.heartbeat-join", "member_epoch", "2", "1"),
        ("share_group.heartbeat-join", "assignment/topic_partitions/<length>", "0", "1"),
        ("share_group.heartbeat-join", "assignment/topic_partitions/0", "<absent>", "*"),
        ("share_group.describe", "groups/g-share/group_epoch", "2", "1"),
        ("share_group.describe", "groups/g-share/assignment_epoch", "2", "1"),
        ("share_group.describe", "groups/g-share/members/0/member_epoch", "2", "1"),
        ("share_group.describe", "groups/g-share/members/0/assignment/topic_partitions/<length>",
         "0", "1"),
        ("share_group.describe", "groups/g-share/members/0/assignment/topic_partitions/0",
         "<absent>", "*"),
    ),
    *_cause(
        LEGIT,
        "ShareAcknowledge: Kafka fills current_leader only with NOT_LEADER_OR_FOLLOWER (0 "
        "otherwise), Tidelog always names itself; clients read it on that error only",
        ("share_group.acknowledge-*", "responses/0/partitions/0/current_leader/leader_id", "0",
         "<self>"),
    ),
    *_cause(
        LEGIT,
        "DescribeShareGroupOffsets right after an acknowledgement: Kafka answers the start "
        "offset its share coordinator has persisted, written asynchronously (still 0); Tidelog "
        "writes before answering the acknowledgement, so the SPSO is already 4",
        ("share_group.describe-offsets-v0", "groups/g-share/topics/share/partitions/0/"
         "start_offset", "0", "4"),
    ),
    # ------------------------------------------------------------------ DescribeCluster
    # ------------------------------------------------------------------ internal topics
    *_cause(
        LEGIT,
        "DeleteTopics of __consumer_offsets: Kafka 4.3 deletes it (every group's offsets are "
        "lost); Tidelog refuses with TOPIC_AUTHORIZATION_FAILED, deliberately",
        ("internal_topics.delete-topics-v6", "responses/__consumer_offsets/topic_id", "<uuid>",
         "None"),
        ("internal_topics.delete-topics-v6", "responses/__consumer_offsets/error_code",
         "NONE(0)", "TOPIC_AUTHORIZATION_FAILED(29)"),
    ),
]

KNOWN: dict[tuple[str, str, str, str], Known] = {k.key: k for k in _ENTRIES}
_PATTERNS = [k for k in _ENTRIES if any("*" in f or "?" in f for f in k.key)]
