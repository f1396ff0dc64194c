"""The API version table Tidelog advertises, and the ApiVersions response built from it.

Every range is a subset of what kio 0.6.5 can both read and write (checked by the tests) and
of what Apache Kafka 4.3.1 advertises, up to the newest version whose fields Tidelog handles,
so clients that infer the broker's release from the table infer 4.x (kafka-python 3.x: ListOffsets
v11 is its 4.2 marker, Produce v13 is 4.1's). Still below Kafka 4.3.1: InitProducerId v6 (2PC),
ListTransactions v2 (docs/decisions.md). Transaction version 2 (KIP-890 part 2: EndTxn and
TxnOffsetCommit v5, Produce v12's implicit add) is served, and advertised as the finalized
feature `transaction.version` 2 on a single node (`api_versions_response(features=...)`).

ApiVersions fallback frame (``encode_unsupported_api_versions``), always the v0 layout::

    size            int32   bytes that follow
    correlation_id  int32   response header v0: never a tagged-field byte for ApiVersions
    error_code      int16   35 = UNSUPPORTED_VERSION
    api_keys        int32   count, then per key:
      api_key       int16
      min_version   int16
      max_version   int16

Kafka answers an ApiVersions request of a version it does not know in exactly this layout so
that any client can read it and retry with a version from the list.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as KioErrorCode

from tidelog.errors import ErrorCode
from tidelog.protocol.api_keys import ApiKey

SUPPORTED_VERSIONS: Mapping[int, tuple[int, int]] = MappingProxyType(
    {
        0: (3, 13),  # Produce (v3 is kio's minimum; v11-12 as v10; v13: topic ids)
        1: (4, 18),  # Fetch (v17-18 add only followers' tagged fields)
        2: (1, 11),  # ListOffsets (v8-11: the tiered-storage specs; v10 is kafka-python's 4.0)
        3: (0, 13),  # Metadata
        8: (2, 10),  # OffsetCommit (v10: topic ids, UNKNOWN_TOPIC_ID)
        9: (1, 10),  # OffsetFetch (v10: topic ids, UNKNOWN_TOPIC_ID)
        10: (0, 6),  # FindCoordinator
        11: (0, 9),  # JoinGroup (v8 adds reason, v9 skip_assignment; Kafka 3.7 serves 0-9)
        12: (0, 4),  # Heartbeat
        13: (0, 5),  # LeaveGroup
        14: (0, 5),  # SyncGroup
        15: (0, 6),  # DescribeGroups (v6: GROUP_ID_NOT_FOUND for an unknown group, KIP-1043)
        16: (0, 5),  # ListGroups (v5: types filter and group type, KIP-848)
        17: (0, 1),  # SaslHandshake (v0: bare tokens follow; v1: SaslAuthenticate)
        18: (0, 4),  # ApiVersions
        19: (2, 7),  # CreateTopics
        20: (1, 6),  # DeleteTopics
        21: (0, 2),  # DeleteRecords
        22: (0, 5),  # InitProducerId (v5: TRANSACTION_ABORTABLE may be answered; v6 is 2PC)
        23: (2, 4),  # OffsetForLeaderEpoch (kio starts at v2)
        24: (0, 5),  # AddPartitionsToTxn (v4-5: batched, verify_only; single node only)
        25: (0, 4),  # AddOffsetsToTxn (Kafka 4's range; TV2 clients send TxnOffsetCommit v5)
        26: (0, 5),  # EndTxn (v5: transaction version 2, the epoch bumped per transaction)
        27: (1, 2),  # WriteTxnMarkers (v0 was removed by Kafka 4.0; single node)
        28: (0, 5),  # TxnOffsetCommit (v5: TV2, adds the group's partition itself)
        29: (1, 3),  # DescribeAcls (kio starts at v1)
        30: (1, 3),  # CreateAcls (kio starts at v1)
        31: (1, 3),  # DeleteAcls (kio starts at v1)
        32: (1, 4),  # DescribeConfigs (kio starts at v1)
        33: (0, 2),  # AlterConfigs (the given set replaces the topic's overrides)
        35: (1, 5),  # DescribeLogDirs (one log dir: --data-dir; v5 is kafka-python's 4.3)
        36: (0, 2),  # SaslAuthenticate (v1: session lifetime, KIP-368)
        37: (0, 3),  # CreatePartitions
        42: (0, 2),  # DeleteGroups
        43: (0, 2),  # ElectLeaders (single node: nothing to elect)
        44: (0, 1),  # IncrementalAlterConfigs
        45: (0, 1),  # AlterPartitionReassignments (v1: allow_replication_factor_change)
        46: (0, 0),  # ListPartitionReassignments
        47: (0, 0),  # OffsetDelete
        48: (0, 1),  # DescribeClientQuotas (KIP-546)
        49: (0, 1),  # AlterClientQuotas
        50: (0, 0),  # DescribeUserScramCredentials (single node: the data directory's store)
        51: (0, 0),  # AlterUserScramCredentials
        60: (0, 2),  # DescribeCluster (v2: is_fenced, never true here)
        61: (0, 0),  # DescribeProducers (single node)
        65: (0, 0),  # DescribeTransactions (single node)
        66: (0, 1),  # ListTransactions (v2's transactional_id_pattern not served; single node)
        68: (0, 1),  # ConsumerGroupHeartbeat (KIP-848)
        69: (0, 1),  # ConsumerGroupDescribe
        71: (0, 0),  # GetTelemetrySubscriptions (KIP-714; Kafka lists it with a telemetry
        72: (0, 0),  # PushTelemetry              receiver plugin, Tidelog's is /metrics)
        74: (0, 1),  # ListConfigResources (v0: ListClientMetricsResources; v1: KIP-1142 types)
        76: (1, 1),  # ShareGroupHeartbeat (KIP-932; v0 was Kafka 4.0's early access)
        77: (1, 1),  # ShareGroupDescribe
        78: (1, 2),  # ShareFetch (v2: renew acknowledgements, KIP-1222)
        79: (1, 2),  # ShareAcknowledge
        # The share coordinator's broker-to-broker APIs (cluster mode only, CLUSTER_ACTION).
        83: (0, 0),  # InitializeShareGroupState
        84: (0, 0),  # ReadShareGroupState
        85: (0, 1),  # WriteShareGroupState
        86: (0, 0),  # DeleteShareGroupState
        87: (0, 1),  # ReadShareGroupStateSummary
        90: (0, 1),  # DescribeShareGroupOffsets (v1: lag, KIP-1226)
        91: (0, 0),  # AlterShareGroupOffsets
        92: (0, 0),  # DeleteShareGroupOffsets
        75: (0, 0),  # DescribeTopicPartitions (KIP-966; single node)
    }
)

# APIs only cluster handler tables serve (broker to broker): a single node does not
# advertise them (ApiVersions lists the handler table), so the differential harness, which
# runs a single node, leaves them out of its coverage checks.
CLUSTER_ONLY_APIS: frozenset[int] = frozenset({83, 84, 85, 86, 87})

API_NAMES: Mapping[int, str] = MappingProxyType(
    {
        0: "Produce",
        1: "Fetch",
        2: "ListOffsets",
        3: "Metadata",
        8: "OffsetCommit",
        9: "OffsetFetch",
        10: "FindCoordinator",
        11: "JoinGroup",
        12: "Heartbeat",
        13: "LeaveGroup",
        14: "SyncGroup",
        15: "DescribeGroups",
        16: "ListGroups",
        17: "SaslHandshake",
        18: "ApiVersions",
        19: "CreateTopics",
        20: "DeleteTopics",
        21: "DeleteRecords",
        22: "InitProducerId",
        23: "OffsetForLeaderEpoch",
        24: "AddPartitionsToTxn",
        25: "AddOffsetsToTxn",
        26: "EndTxn",
        27: "WriteTxnMarkers",
        28: "TxnOffsetCommit",
        29: "DescribeAcls",
        30: "CreateAcls",
        31: "DeleteAcls",
        32: "DescribeConfigs",
        33: "AlterConfigs",
        35: "DescribeLogDirs",
        36: "SaslAuthenticate",
        37: "CreatePartitions",
        42: "DeleteGroups",
        43: "ElectLeaders",
        44: "IncrementalAlterConfigs",
        45: "AlterPartitionReassignments",
        46: "ListPartitionReassignments",
        47: "OffsetDelete",
        48: "DescribeClientQuotas",
        49: "AlterClientQuotas",
        50: "DescribeUserScramCredentials",
        51: "AlterUserScramCredentials",
        60: "DescribeCluster",
        61: "DescribeProducers",
        65: "DescribeTransactions",
        66: "ListTransactions",
        68: "ConsumerGroupHeartbeat",
        69: "ConsumerGroupDescribe",
        71: "GetTelemetrySubscriptions",
        72: "PushTelemetry",
        74: "ListConfigResources",
        76: "ShareGroupHeartbeat",
        77: "ShareGroupDescribe",
        78: "ShareFetch",
        79: "ShareAcknowledge",
        83: "InitializeShareGroupState",
        84: "ReadShareGroupState",
        85: "WriteShareGroupState",
        86: "DeleteShareGroupState",
        87: "ReadShareGroupStateSummary",
        90: "DescribeShareGroupOffsets",
        91: "AlterShareGroupOffsets",
        92: "DeleteShareGroupOffsets",
        75: "DescribeTopicPartitions",
    }
)

_FALLBACK_HEAD = struct.Struct(">iihi")
_FALLBACK_KEY = struct.Struct(">hhh")


def api_name(api_key: int) -> str:
    """Kafka's name of an API key, or ``Api<key>`` for keys Tidelog does not know."""
    return API_NAMES.get(api_key, f"Api{api_key}")


def is_supported(api_key: int, api_version: int, supported: Mapping[int, tuple[int, int]]) -> bool:
    version_range = supported.get(api_key)
    return version_range is not None and version_range[0] <= api_version <= version_range[1]


FEATURES_EPOCH = 1  # finalized_features_epoch: fixed, the levels never change at run time


def api_versions_response(
    api_version: int,
    supported: Mapping[int, tuple[int, int]],
    error_code: int = 0,
    features: Mapping[str, tuple[int, int, int]] | None = None,
) -> Any:
    """An ApiVersionsResponse entity of ``api_version`` (0-4) listing ``supported``.
    ``features``: name -> (min supported, max supported, finalized level), Kafka's feature
    fields of v3+ (KIP-584; a client reads e.g. `transaction.version` from the finalized
    list). As Kafka, v3 leaves out the supported features whose minimum is 0."""
    response_class = load_response_schema(ApiKey.API_VERSIONS, api_version)
    module = sys.modules[response_class.__module__]
    api_keys = tuple(
        module.ApiVersion(api_key=key, min_version=low, max_version=high)
        for key, (low, high) in sorted(supported.items())
    )
    fields: dict[str, Any] = {"error_code": KioErrorCode(error_code), "api_keys": api_keys}
    if api_version >= 1:
        fields["throttle_time"] = timedelta(0)
    if features and api_version >= 3 and error_code == 0:
        fields["supported_features"] = tuple(
            module.SupportedFeatureKey(name=name, min_version=low, max_version=high)
            for name, (low, high, _) in sorted(features.items())
            if api_version >= 4 or low > 0
        )
        fields["finalized_features_epoch"] = FEATURES_EPOCH
        fields["finalized_features"] = tuple(
            module.FinalizedFeatureKey(name=name, max_version_level=level,
                                       min_version_level=level)
            for name, (_, _, level) in sorted(features.items())
        )
    return response_class(**fields)


def encode_unsupported_api_versions(
    correlation_id: int, supported: Mapping[int, tuple[int, int]]
) -> bytes:
    """The complete v0 ApiVersions frame (size prefix included) with UNSUPPORTED_VERSION."""
    keys = sorted(supported.items())
    body = bytearray(_FALLBACK_HEAD.size + _FALLBACK_KEY.size * len(keys))
    _FALLBACK_HEAD.pack_into(
        body,
        0,
        len(body) - 4,
        correlation_id,
        ErrorCode.UNSUPPORTED_VERSION,
        len(keys),
    )
    position = _FALLBACK_HEAD.size
    for key, (low, high) in keys:
        _FALLBACK_KEY.pack_into(body, position, key, low, high)
        position += _FALLBACK_KEY.size
    return bytes(body)
