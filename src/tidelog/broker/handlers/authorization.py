"""Which ACLs each API needs: the one table (ARCHITECTURE D13), as Kafka's KafkaApis checks them
and its AuthorizerIntegrationTest encodes them. Handlers name their requirement from here, so
this module is where a reader learns what is allowed; docs/security.md prints the same table.

With no authorizer configured the handlers skip every check (`deps.authorizer is None`: one
branch per request); these helpers are only called with an authorizer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tidelog.broker.handlers.context import (
    ALL_CLUSTER_OPERATIONS,
    OPERATIONS_NOT_PROVIDED,
    RequestContext,
)
from tidelog.errors import ErrorCode
from tidelog.protocol.api_keys import ApiKey
from tidelog.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from tidelog.security.authorizer import Authorizer

Op = AclOperation
Type = ResourceType


@dataclass(frozen=True, slots=True)
class Requirement:
    operation: AclOperation
    resource_type: ResourceType


# What each served API asks for. "any of" rows (CreateTopics, InitProducerId) are spelled out
# in the handler that uses them; refusals answer with `REFUSAL[resource_type]`.
REQUIRED: dict[ApiKey, tuple[Requirement, ...]] = {
    # WRITE per topic; a transactional batch also needs WRITE on its transactional id.
    ApiKey.PRODUCE: (
        Requirement(Op.WRITE, Type.TOPIC),
        Requirement(Op.WRITE, Type.TRANSACTIONAL_ID),
    ),
    # READ per topic (a follower's fetch: CLUSTER_ACTION on the cluster instead).
    ApiKey.FETCH: (Requirement(Op.READ, Type.TOPIC),),
    ApiKey.LIST_OFFSETS: (Requirement(Op.DESCRIBE, Type.TOPIC),),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (Requirement(Op.DESCRIBE, Type.TOPIC),),
    # DESCRIBE per topic, unauthorized topics left out of an all-topics answer; auto-creation
    # needs CREATE on the cluster or the topic.
    ApiKey.METADATA: (Requirement(Op.DESCRIBE, Type.TOPIC), Requirement(Op.CREATE, Type.CLUSTER)),
    ApiKey.OFFSET_COMMIT: (Requirement(Op.READ, Type.GROUP), Requirement(Op.READ, Type.TOPIC)),
    # DESCRIBE on the group; topics the caller may not DESCRIBE are left out (all-topics form)
    # or answered TOPIC_AUTHORIZATION_FAILED (named form).
    ApiKey.OFFSET_FETCH: (
        Requirement(Op.DESCRIBE, Type.GROUP),
        Requirement(Op.DESCRIBE, Type.TOPIC),
    ),
    ApiKey.FIND_COORDINATOR: (
        Requirement(Op.DESCRIBE, Type.GROUP),
        Requirement(Op.DESCRIBE, Type.TRANSACTIONAL_ID),
    ),
    ApiKey.JOIN_GROUP: (Requirement(Op.READ, Type.GROUP),),
    ApiKey.SYNC_GROUP: (Requirement(Op.READ, Type.GROUP),),
    ApiKey.HEARTBEAT: (Requirement(Op.READ, Type.GROUP),),
    ApiKey.LEAVE_GROUP: (Requirement(Op.READ, Type.GROUP),),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (
        Requirement(Op.READ, Type.GROUP),
        Requirement(Op.DESCRIBE, Type.TOPIC),
    ),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (Requirement(Op.DESCRIBE, Type.GROUP),),
    # Share groups (KIP-932): READ on the group; READ on each topic fetched, DESCRIBE on
    # each topic subscribed.
    ApiKey.SHARE_GROUP_HEARTBEAT: (
        Requirement(Op.READ, Type.GROUP),
        Requirement(Op.DESCRIBE, Type.TOPIC),
    ),
    ApiKey.SHARE_GROUP_DESCRIBE: (Requirement(Op.DESCRIBE, Type.GROUP),),
    ApiKey.SHARE_FETCH: (Requirement(Op.READ, Type.GROUP), Requirement(Op.READ, Type.TOPIC)),
    ApiKey.SHARE_ACKNOWLEDGE: (
        Requirement(Op.READ, Type.GROUP),
        Requirement(Op.READ, Type.TOPIC),
    ),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (
        Requirement(Op.DESCRIBE, Type.GROUP),
        Requirement(Op.DESCRIBE, Type.TOPIC),
    ),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (
        Requirement(Op.READ, Type.GROUP),
        Requirement(Op.READ, Type.TOPIC),
    ),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (
        Requirement(Op.DELETE, Type.GROUP),
        Requirement(Op.READ, Type.TOPIC),
    ),
    # The share coordinator's APIs are broker-to-broker (KafkaApis: CLUSTER_ACTION).
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (Requirement(Op.CLUSTER_ACTION, Type.CLUSTER),),
    ApiKey.READ_SHARE_GROUP_STATE: (Requirement(Op.CLUSTER_ACTION, Type.CLUSTER),),
    ApiKey.WRITE_SHARE_GROUP_STATE: (Requirement(Op.CLUSTER_ACTION, Type.CLUSTER),),
    ApiKey.DELETE_SHARE_GROUP_STATE: (Requirement(Op.CLUSTER_ACTION, Type.CLUSTER),),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (Requirement(Op.CLUSTER_ACTION, Type.CLUSTER),),
    ApiKey.DESCRIBE_GROUPS: (Requirement(Op.DESCRIBE, Type.GROUP),),
    # Groups the caller may not DESCRIBE are left out.
    ApiKey.LIST_GROUPS: (Requirement(Op.DESCRIBE, Type.GROUP),),
    ApiKey.DELETE_GROUPS: (Requirement(Op.DELETE, Type.GROUP),),
    ApiKey.OFFSET_DELETE: (Requirement(Op.DELETE, Type.GROUP), Requirement(Op.READ, Type.TOPIC)),
    # CREATE on the cluster, or else on each topic.
    ApiKey.CREATE_TOPICS: (
        Requirement(Op.CREATE, Type.CLUSTER),
        Requirement(Op.CREATE, Type.TOPIC),
    ),
    ApiKey.DELETE_TOPICS: (Requirement(Op.DELETE, Type.TOPIC),),
    ApiKey.DELETE_RECORDS: (Requirement(Op.DELETE, Type.TOPIC),),
    ApiKey.CREATE_PARTITIONS: (Requirement(Op.ALTER, Type.TOPIC),),
    ApiKey.DESCRIBE_CONFIGS: (
        Requirement(Op.DESCRIBE_CONFIGS, Type.TOPIC),
        Requirement(Op.DESCRIBE_CONFIGS, Type.CLUSTER),
    ),
    ApiKey.ALTER_CONFIGS: (
        Requirement(Op.ALTER_CONFIGS, Type.TOPIC),
        Requirement(Op.ALTER_CONFIGS, Type.CLUSTER),
    ),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (
        Requirement(Op.ALTER_CONFIGS, Type.TOPIC),
        Requirement(Op.ALTER_CONFIGS, Type.CLUSTER),
    ),
    # Transactional: WRITE on the transactional id. Idempotent: IDEMPOTENT_WRITE on the
    # cluster, or WRITE on any topic (KIP-679).
    ApiKey.INIT_PRODUCER_ID: (
        Requirement(Op.WRITE, Type.TRANSACTIONAL_ID),
        Requirement(Op.IDEMPOTENT_WRITE, Type.CLUSTER),
    ),
    # Transactions (KafkaApis): WRITE on the transactional id, then per API what it touches.
    # v4+ is the brokers' batched form: CLUSTER_ACTION instead of the per-id and topic checks.
    ApiKey.ADD_PARTITIONS_TO_TXN: (
        Requirement(Op.WRITE, Type.TRANSACTIONAL_ID),
        Requirement(Op.WRITE, Type.TOPIC),
        Requirement(Op.CLUSTER_ACTION, Type.CLUSTER),
    ),
    ApiKey.ADD_OFFSETS_TO_TXN: (
        Requirement(Op.WRITE, Type.TRANSACTIONAL_ID),
        Requirement(Op.READ, Type.GROUP),
    ),
    ApiKey.END_TXN: (Requirement(Op.WRITE, Type.TRANSACTIONAL_ID),),
    ApiKey.TXN_OFFSET_COMMIT: (
        Requirement(Op.WRITE, Type.TRANSACTIONAL_ID),
        Requirement(Op.READ, Type.GROUP),
        Requirement(Op.READ, Type.TOPIC),
    ),
    # ALTER on the cluster (the admin client's abortTransaction, KIP-664), else CLUSTER_ACTION.
    ApiKey.WRITE_TXN_MARKERS: (
        Requirement(Op.ALTER, Type.CLUSTER),
        Requirement(Op.CLUSTER_ACTION, Type.CLUSTER),
    ),
    # DESCRIBE per id; partitions of topics the caller may not DESCRIBE are left out.
    ApiKey.DESCRIBE_TRANSACTIONS: (
        Requirement(Op.DESCRIBE, Type.TRANSACTIONAL_ID),
        Requirement(Op.DESCRIBE, Type.TOPIC),
    ),
    # Ids the caller may not DESCRIBE are left out.
    ApiKey.LIST_TRANSACTIONS: (Requirement(Op.DESCRIBE, Type.TRANSACTIONAL_ID),),
    ApiKey.DESCRIBE_PRODUCERS: (Requirement(Op.READ, Type.TOPIC),),
    ApiKey.DESCRIBE_CLUSTER: (Requirement(Op.DESCRIBE, Type.CLUSTER),),
    ApiKey.DESCRIBE_LOG_DIRS: (Requirement(Op.DESCRIBE, Type.CLUSTER),),
    ApiKey.ELECT_LEADERS: (Requirement(Op.ALTER, Type.CLUSTER),),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (Requirement(Op.ALTER, Type.CLUSTER),),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (Requirement(Op.DESCRIBE, Type.CLUSTER),),
    # Topics the caller may not DESCRIBE are left out, or refused when named.
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (Requirement(Op.DESCRIBE, Type.TOPIC),),
    ApiKey.DESCRIBE_ACLS: (Requirement(Op.DESCRIBE, Type.CLUSTER),),
    ApiKey.CREATE_ACLS: (Requirement(Op.ALTER, Type.CLUSTER),),
    ApiKey.DELETE_ACLS: (Requirement(Op.ALTER, Type.CLUSTER),),
    ApiKey.API_VERSIONS: (),
    # Authentication itself needs no ACL (the SASL exchange happens before any principal).
    ApiKey.SASL_HANDSHAKE: (),
    ApiKey.SASL_AUTHENTICATE: (),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (Requirement(Op.DESCRIBE, Type.CLUSTER),),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (Requirement(Op.ALTER, Type.CLUSTER),),
    # Client quotas: the cluster's configs (top-level refusal / every entry refused).
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (Requirement(Op.DESCRIBE_CONFIGS, Type.CLUSTER),),
    ApiKey.ALTER_CLIENT_QUOTAS: (Requirement(Op.ALTER_CONFIGS, Type.CLUSTER),),
    # Client telemetry (KIP-714): any connected client may subscribe and push; listing config
    # resources reads the cluster's configs. CLIENT_METRICS resources in Describe/
    # IncrementalAlterConfigs need DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster.
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (),
    ApiKey.PUSH_TELEMETRY: (),
    ApiKey.LIST_CONFIG_RESOURCES: (Requirement(Op.DESCRIBE_CONFIGS, Type.CLUSTER),),
}

REFUSAL: dict[ResourceType, ErrorCode] = {
    Type.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    Type.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    Type.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    Type.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def allowed(
    authorizer: Authorizer,
    context: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
) -> bool:
    return authorizer.authorize(
        context.principal, context.client_host, operation, resource_type, name
    )


def cluster_allowed(
    authorizer: Authorizer, context: RequestContext, operation: AclOperation
) -> bool:
    return authorizer.authorize(
        context.principal, context.client_host, operation, ResourceType.CLUSTER, CLUSTER_NAME
    )


def allowed_names(
    authorizer: Authorizer,
    context: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[str],
) -> set[str]:
    """The subset of `names` the caller may `operation` (each name decided once)."""
    return {
        name
        for name in set(names)
        if authorizer.authorize(
            context.principal, context.client_host, operation, resource_type, name
        )
    }


def resource_operations(
    authorizer: Authorizer | None,
    context: RequestContext,
    requested: object,
    resource_type: ResourceType,
    name: str,
    every_operation: int,
) -> int:
    """KIP-430 authorized_operations: INT32_MIN when not asked; every operation of the type
    with no authorizer (AuthHelper.authorizedOperations); else those the ACLs allow."""
    if not requested:
        return OPERATIONS_NOT_PROVIDED
    if authorizer is None:
        return every_operation
    return authorizer.authorized_operations(
        context.principal, context.client_host, resource_type, name
    )


def cluster_operations(
    authorizer: Authorizer | None, context: RequestContext, requested: object
) -> int:
    return resource_operations(
        authorizer, context, requested, Type.CLUSTER, CLUSTER_NAME, ALL_CLUSTER_OPERATIONS
    )
