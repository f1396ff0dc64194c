"""Kafka's ACL rules end to end with real clients: prefixed and wildcard patterns, DENY over
ALLOW, host rules, super users, allow.everyone.if.no.acl.found, the ACL APIs' own checks and
errors, silent filtering (Metadata, ListGroups), KIP-430 operations, and ACLs kept across a
restart. Every connection is User:ANONYMOUS from 127.0.0.1 (no SASL/TLS yet)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from conftest import BrokerFactory, BrokerProcess

from . import clients
from .clients import ANONYMOUS, acl

Op, RT = AclOperation, ResourceType
PREFIXED = ResourcePatternType.PREFIXED


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp: Path = tmp_path_factory.mktemp("acl-rules")
    data_dir = tmp / "data"
    clients.write_acls_file(data_dir, [clients.ADMIN_ACL_JSON])
    factory = BrokerFactory(tmp)
    try:
        broker = factory(data_dir, settings=clients.AUTHORIZER)
        clients.set_acls(broker.bootstrap, [acl(RT.BROKER, "kafka-cluster", Op.CREATE)])
        for topic in ("pre-a", "other", "wild"):
            assert clients.create_topic(broker.bootstrap, topic) == ""
        yield broker
    finally:
        bad = factory.stop_all()
    if bad:
        pytest.fail("broker logged a traceback:\n" + "\n".join(bad))


def test_prefixed_acl_covers_names_that_start_with_it(secured: BrokerProcess) -> None:
    clients.set_acls(secured.bootstrap, [acl(RT.TOPIC, "pre-", Op.WRITE, pattern=PREFIXED)])
    assert clients.produce(secured.bootstrap, "pre-a") == ""
    assert clients.produce(secured.bootstrap, "other") == "TOPIC_AUTHORIZATION_FAILED"


def test_wildcard_topic_and_wildcard_principal(secured: BrokerProcess) -> None:
    clients.set_acls(secured.bootstrap, [acl(RT.TOPIC, "*", Op.WRITE, principal="User:*")])
    assert clients.produce(secured.bootstrap, "wild") == ""
    assert clients.produce(secured.bootstrap, "other") == ""


def test_deny_overrides_allow(secured: BrokerProcess) -> None:
    clients.set_acls(secured.bootstrap, [
        acl(RT.TOPIC, "*", Op.ALL, principal="User:*"),
        acl(RT.TOPIC, "pre-", Op.WRITE, allow=False, pattern=PREFIXED),
    ])
    assert clients.produce(secured.bootstrap, "pre-a") == "TOPIC_AUTHORIZATION_FAILED"
    assert clients.produce(secured.bootstrap, "other") == ""
    # DENY WRITE does not deny DESCRIBE (denials imply nothing)
    assert clients.topic_metadata(secured.bootstrap, "pre-a") == ""


def test_acls_for_another_principal_do_not_apply(secured: BrokerProcess) -> None:
    clients.set_acls(secured.bootstrap, [acl(RT.TOPIC, "wild", Op.WRITE, principal="User:alice")])
    assert clients.produce(secured.bootstrap, "wild") == "TOPIC_AUTHORIZATION_FAILED"


def test_host_rules(secured: BrokerProcess) -> None:
    clients.set_acls(secured.bootstrap, [acl(RT.TOPIC, "wild", Op.WRITE, host="10.0.0.1")])
    assert clients.produce(secured.bootstrap, "wild") == "TOPIC_AUTHORIZATION_FAILED"
    clients.set_acls(secured.bootstrap, [acl(RT.TOPIC, "wild", Op.WRITE, host="127.0.0.1")])
    assert clients.produce(secured.bootstrap, "wild") == ""
    clients.set_acls(secured.bootstrap, [
        acl(RT.TOPIC, "wild", Op.WRITE),
        acl(RT.TOPIC, "wild", Op.WRITE, allow=False, host="127.0.0.1"),
    ])
    assert clients.produce(secured.bootstrap, "wild") == "TOPIC_AUTHORIZATION_FAILED"


def test_metadata_leaves_out_topics_the_caller_may_not_describe(secured: BrokerProcess) -> None:
    clients.set_acls(secured.bootstrap, [acl(RT.TOPIC, "pre-", Op.READ, pattern=PREFIXED)])
    listed = clients.listed_topics(secured.bootstrap)
    assert "pre-a" in listed  # READ implies DESCRIBE
    assert not listed & {"other", "wild", "__consumer_offsets"}
    # a missing topic the caller may not describe does not leak: same answer as an existing one
    assert clients.topic_metadata(secured.bootstrap, "other") == "TOPIC_AUTHORIZATION_FAILED"


def test_auto_creation_needs_create(secured: BrokerProcess) -> None:
    missing = clients.unique("auto")
    clients.set_acls(secured.bootstrap, [acl(RT.TOPIC, "auto-", Op.DESCRIBE, pattern=PREFIXED)])
    assert clients.topic_metadata(secured.bootstrap, missing) == "TOPIC_AUTHORIZATION_FAILED"
    clients.set_acls(secured.bootstrap, [acl(RT.TOPIC, "auto-", Op.CREATE, pattern=PREFIXED),
                                         acl(RT.TOPIC, "auto-", Op.DESCRIBE, pattern=PREFIXED)])
    assert clients.topic_metadata(secured.bootstrap, missing) == ""


def test_list_groups_is_filtered_without_cluster_describe(secured: BrokerProcess) -> None:
    bootstrap = secured.bootstrap
    clients.set_acls(bootstrap, [acl(RT.GROUP, "*", Op.READ), acl(RT.TOPIC, "*", Op.READ)])
    assert clients.commit_offset(bootstrap, "wild", "seen-group") == ""
    assert clients.commit_offset(bootstrap, "wild", "hidden-group") == ""
    deny_cluster_describe = acl(RT.BROKER, "kafka-cluster", Op.DESCRIBE, allow=False)
    clients.set_acls(bootstrap, [deny_cluster_describe, acl(RT.GROUP, "seen-", Op.DESCRIBE,
                                                             pattern=PREFIXED)])
    listed = clients.listed_groups(bootstrap)
    assert "seen-group" in listed and "hidden-group" not in listed
    clients.set_acls(bootstrap, [])  # ALTER on the cluster implies DESCRIBE: every group
    assert {"seen-group", "hidden-group"} <= clients.listed_groups(bootstrap)


def test_cluster_authorized_operations_come_from_the_acls(secured: BrokerProcess) -> None:
    clients.set_acls(secured.bootstrap, [acl(RT.BROKER, "kafka-cluster", Op.IDEMPOTENT_WRITE)])
    assert clients.cluster_operations(secured.bootstrap) == {
        "ALTER", "DESCRIBE", "IDEMPOTENT_WRITE"
    }


def test_create_topics_echoes_configs_only_with_describe_configs(secured: BrokerProcess) -> None:
    bootstrap = secured.bootstrap
    clients.set_acls(bootstrap, [acl(RT.TOPIC, "echo-", Op.CREATE, pattern=PREFIXED)])
    hidden = clients.create_topic_raw(bootstrap, "echo-a")
    assert clients.code_name(hidden.error_code) == ""
    assert clients.code_name(hidden.topic_config_error_code) == "TOPIC_AUTHORIZATION_FAILED"
    assert (hidden.num_partitions, hidden.configs) == (-1, ())
    clients.set_acls(bootstrap, [acl(RT.TOPIC, "echo-", Op.CREATE, pattern=PREFIXED),
                                 acl(RT.TOPIC, "echo-", Op.DESCRIBE_CONFIGS, pattern=PREFIXED)])
    shown = clients.create_topic_raw(bootstrap, "echo-a")
    assert clients.code_name(shown.topic_config_error_code) == ""
    assert shown.num_partitions == 2 and shown.configs


def test_consumer_group_describe_needs_the_groups_topics(secured: BrokerProcess) -> None:
    bootstrap = secured.bootstrap
    group = clients.unique("described")
    clients.set_acls(bootstrap, [acl(RT.GROUP, group, Op.READ), acl(RT.TOPIC, "wild", Op.READ)])
    assert clients.consumer_group_heartbeat_raw(bootstrap, "wild", group) == ""
    clients.set_acls(bootstrap, [acl(RT.GROUP, group, Op.DESCRIBE)])
    refused = clients.consumer_group_describe_raw(bootstrap, group)
    assert clients.code_name(refused.error_code) == "TOPIC_AUTHORIZATION_FAILED"
    assert refused.members == ()
    clients.set_acls(bootstrap, [acl(RT.GROUP, group, Op.DESCRIBE),
                                 acl(RT.TOPIC, "wild", Op.DESCRIBE)])
    described = clients.consumer_group_describe_raw(bootstrap, group)
    assert clients.code_name(described.error_code) == ""
    assert len(described.members) == 1
    assert described.authorized_operations == 1 << Op.DESCRIBE.value


def test_describe_acls_filters_and_delete_reports_what_it_removed(secured: BrokerProcess) -> None:
    bootstrap = secured.bootstrap
    clients.set_acls(bootstrap, [
        acl(RT.TOPIC, "orders", Op.READ),
        acl(RT.TOPIC, "ord", Op.WRITE, pattern=PREFIXED),
        acl(RT.TOPIC, "*", Op.DESCRIBE),
        acl(RT.GROUP, "orders", Op.READ),
    ])
    client = clients.admin(bootstrap)
    match = AclBindingFilter(RT.TOPIC, "orders", ResourcePatternType.MATCH, None, None,
                             Op.ANY, AclPermissionType.ANY)
    found = client.describe_acls(match).result(clients.WAIT_S)
    assert sorted((b.name, b.operation.name) for b in found) == [
        ("*", "DESCRIBE"), ("ord", "WRITE"), ("orders", "READ"),
    ]
    literal = AclBindingFilter(RT.ANY, "orders", ResourcePatternType.LITERAL, ANONYMOUS, None,
                               Op.ANY, AclPermissionType.ALLOW)
    deleted = client.delete_acls([literal])[literal].result(clients.WAIT_S)
    assert sorted((b.restype.name, b.name) for b in deleted) == [
        ("GROUP", "orders"), ("TOPIC", "orders"),
    ]
    assert len(client.describe_acls(match).result(clients.WAIT_S)) == 2


def test_invalid_acls_are_refused(secured: BrokerProcess) -> None:
    client = clients.admin(secured.bootstrap)
    bad_cluster = acl(RT.BROKER, "not-the-cluster", Op.ALTER)
    empty_name = acl(RT.TOPIC, "", Op.READ)
    results = client.create_acls([bad_cluster, empty_name])
    assert {clients.error_of(future) for future in results.values()} == {"INVALID_REQUEST"}


def test_acl_api_validation_on_the_wire(secured: BrokerProcess) -> None:
    """Kafka's INVALID_REQUEST cases, including codes no enum has; nothing is stored."""
    good = {"resource_type": 2, "resource_name": "v", "resource_pattern_type": 3,
            "principal": "User:v", "host": "*", "operation": 3, "permission_type": 3}
    bad = [
        {**good, "resource_type": 99},  # unknown resource type
        {**good, "resource_type": 1},  # ANY is a filter value
        {**good, "resource_type": 6},  # DELEGATION_TOKEN: refused
        {**good, "resource_pattern_type": 2},  # MATCH is a filter value
        {**good, "resource_pattern_type": 77},
        {**good, "operation": 1},  # ANY
        {**good, "operation": 120},
        {**good, "permission_type": 1},
        {**good, "principal": "no-colon"},
        {**good, "host": ""},
        {**good, "resource_name": ""},
    ]
    bootstrap = secured.bootstrap
    clients.set_acls(bootstrap, [])
    assert clients.create_acls_raw(bootstrap, [*bad, good]) == ["INVALID_REQUEST"] * len(bad) + [""]
    assert clients.describe_acls_filter_raw(bootstrap, resource_type_filter=0) == "INVALID_REQUEST"
    assert clients.describe_acls_filter_raw(bootstrap, pattern_type_filter=0) == "INVALID_REQUEST"
    assert clients.describe_acls_filter_raw(bootstrap, operation=0) == "INVALID_REQUEST"
    assert clients.describe_acls_filter_raw(bootstrap, resource_type_filter=55) == (
        "INVALID_REQUEST"
    )
    client = clients.admin(bootstrap)
    stored = client.describe_acls(clients.EVERY_ACL).result(clients.WAIT_S)
    assert sorted(b.principal for b in stored) == [ANONYMOUS, "User:v"]


def test_offset_fetch_v1_and_follower_fetch(secured: BrokerProcess) -> None:
    bootstrap = secured.bootstrap
    clients.set_acls(bootstrap, [])
    # v1 has no top-level error: the group's refusal is on each partition
    assert clients.offset_fetch_v1_raw(bootstrap, "wild", "g") == ["GROUP_AUTHORIZATION_FAILED"]
    # a follower's fetch needs CLUSTER_ACTION on the cluster (READ on the topic is not enough)
    clients.set_acls(bootstrap, [acl(RT.TOPIC, "wild", Op.READ)])
    assert clients.follower_fetch_raw(bootstrap, "wild") == "TOPIC_AUTHORIZATION_FAILED"
    wild_id = clients.topic_id_raw(bootstrap, "wild")
    assert clients.follower_fetch_v15_raw(bootstrap, wild_id) == "TOPIC_AUTHORIZATION_FAILED"
    # ... and so does a follower's OffsetForLeaderEpoch without DESCRIBE on the topic
    clients.set_acls(bootstrap, [])
    assert clients.offset_for_leader_epoch_raw(bootstrap, "wild", replica_id=2) == (
        "TOPIC_AUTHORIZATION_FAILED"
    )
    clients.set_acls(bootstrap, [acl(RT.BROKER, "kafka-cluster", Op.CLUSTER_ACTION)])
    assert clients.follower_fetch_raw(bootstrap, "wild") == ""
    # v15+ names the follower in replica_state (KIP-903), not replica_id
    assert clients.follower_fetch_v15_raw(bootstrap, wild_id) == ""
    assert clients.offset_for_leader_epoch_raw(bootstrap, "wild", replica_id=2) == ""


def test_acl_apis_need_cluster_rights(tmp_path: Path, broker_factory: BrokerFactory) -> None:
    """No ACL at all: even the ACL APIs are refused (ALTER / DESCRIBE on the cluster)."""
    broker = broker_factory(tmp_path / "data", settings=clients.AUTHORIZER)
    client = clients.admin(broker.bootstrap)
    binding = acl(RT.TOPIC, "t", Op.READ)
    assert clients.error_of(client.create_acls([binding])[binding]) == (
        "CLUSTER_AUTHORIZATION_FAILED"
    )
    assert clients.describe_acls_raw(broker.bootstrap) == "CLUSTER_AUTHORIZATION_FAILED"
    assert clients.produce(broker.bootstrap, "t") == "TOPIC_AUTHORIZATION_FAILED"


def test_without_an_authorizer_the_acl_apis_are_disabled(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    client = clients.admin(broker.bootstrap)
    binding = acl(RT.TOPIC, "t", Op.READ)
    assert clients.error_of(client.create_acls([binding])[binding]) == "SECURITY_DISABLED"
    assert clients.describe_acls_raw(broker.bootstrap) == "SECURITY_DISABLED"
    assert clients.produce(broker.bootstrap, "t") == ""  # nothing enforced


def test_super_users_may_do_anything(tmp_path: Path, broker_factory: BrokerFactory) -> None:
    settings = {**clients.AUTHORIZER, "super.users": f"User:admin;{ANONYMOUS}"}
    broker = broker_factory(tmp_path / "data", settings=settings)
    assert clients.create_topic(broker.bootstrap, "su") == ""
    assert clients.produce(broker.bootstrap, "su", idempotent=True) == ""
    assert clients.fetch(broker.bootstrap, "su") == ""
    # even an explicit DENY does not bind a super user (Kafka checks super users first)
    deny = acl(RT.TOPIC, "su", Op.ALL, allow=False)
    client = clients.admin(broker.bootstrap)
    assert clients.error_of(client.create_acls([deny])[deny]) == ""
    assert clients.produce(broker.bootstrap, "su") == ""


def test_allow_everyone_if_no_acl_found(tmp_path: Path, broker_factory: BrokerFactory) -> None:
    settings = {**clients.AUTHORIZER, "allow.everyone.if.no.acl.found": "true"}
    broker = broker_factory(tmp_path / "data", settings=settings)
    assert clients.create_topic(broker.bootstrap, "open") == ""
    assert clients.produce(broker.bootstrap, "open") == ""
    # once any ACL names the topic, only the ACLs decide
    only_alice = acl(RT.TOPIC, "open", Op.WRITE, principal="User:alice")
    client = clients.admin(broker.bootstrap)
    assert clients.error_of(client.create_acls([only_alice])[only_alice]) == ""
    assert clients.produce(broker.bootstrap, "open") == "TOPIC_AUTHORIZATION_FAILED"


def test_acls_survive_a_restart(tmp_path: Path, broker_factory: BrokerFactory) -> None:
    data_dir = tmp_path / "data"
    clients.write_acls_file(data_dir, [clients.ADMIN_ACL_JSON])
    broker = broker_factory(data_dir, settings=clients.AUTHORIZER)
    clients.set_acls(broker.bootstrap, [acl(RT.BROKER, "kafka-cluster", Op.CREATE),
                                        acl(RT.TOPIC, "kept", Op.WRITE)])
    assert clients.create_topic(broker.bootstrap, "kept") == ""
    assert broker.stop() == 0
    again = broker_factory(data_dir, settings=clients.AUTHORIZER)
    assert clients.produce(again.bootstrap, "kept") == ""
    client = clients.admin(again.bootstrap)
    assert len(client.describe_acls(clients.EVERY_ACL).result(clients.WAIT_S)) == 3


def test_a_corrupt_acl_file_stops_the_broker(tmp_path: Path) -> None:
    """Starting with fewer ACLs than written could drop a DENY: refuse to start instead."""
    import subprocess
    import sys

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "acls.json").write_text('{"version": 1, "acls": [{"resource_type": "TOPIC"}]}')
    result = subprocess.run(
        [sys.executable, "-m", "tidelog.cli.main", "serve", "--data-dir", str(data_dir),
         "--listen", "127.0.0.1:0", "--set", "authorizer.class.name=AclAuthorizer"],
        capture_output=True, timeout=60, check=False,
    )
    assert result.returncode == 1
    assert b"acls.json" in result.stderr and b"Traceback" not in result.stderr
