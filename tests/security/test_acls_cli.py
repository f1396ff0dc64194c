"""`tidelog acls` against Tidelog and Apache Kafka 4.3.1 (the same commands, the same
listings), Kafka's own kafka-acls.sh against Tidelog, and --command-config files.

Both brokers run their authorizer with User:ANONYMOUS as a super user (every connection is
ANONYMOUS until listeners authenticate; Kafka's own brokers and controller too)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import kafka_peer
from conftest import BrokerFactory, BrokerProcess

from . import clients

SUPER = {"super.users": "User:ANONYMOUS"}
KAFKA_AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    **SUPER,
}


def tidelog_acls(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "tidelog.cli.main", "acls", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def tidelog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    factory = BrokerFactory(tmp_path_factory.mktemp("acls-cli"))
    try:
        yield factory(settings={**clients.AUTHORIZER, **SUPER})
    finally:
        bad = factory.stop_all()
    if bad:
        pytest.fail("broker logged a traceback:\n" + "\n".join(bad))


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kafka_peer.KafkaPeer]:
    with kafka_peer.running_kafka(
        tmp_path_factory.mktemp("kafka-acls"), settings=KAFKA_AUTHORIZER
    ) as peer:
        yield peer


SCRIPT = [
    ("add", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
     "--operation", "Read", "--operation", "Describe", "--topic", "orders", "--group", "billing"),
    ("add", "--deny-principal", "User:eve", "--deny-host", "10.0.0.1", "--operation", "All",
     "--topic", "ord", "--resource-pattern-type", "prefixed"),
    ("add", "--allow-principal", "User:ops", "--operation", "Alter", "--cluster"),
    ("add", "--allow-principal", "User:app", "--operation", "Write", "--transactional-id", "tx-1"),
    ("remove", "--topic", "orders", "--allow-principal", "User:bob", "--operation", "Read",
     "--force"),
    ("remove", "--group", "billing", "--force"),
]
LISTINGS = [
    ("list",),
    ("list", "--topic", "orders", "--resource-pattern-type", "match"),
    ("list", "--principal", "User:eve"),
    ("list", "--cluster"),
]


def run_script(bootstrap: str) -> list[str]:
    outputs = []
    for command in SCRIPT:
        tidelog_acls(command[0], "--bootstrap", bootstrap, *command[1:])
        outputs.append(tidelog_acls("list", "--bootstrap", bootstrap).stdout)
    for command in LISTINGS:
        outputs.append(tidelog_acls(command[0], "--bootstrap", bootstrap, *command[1:]).stdout)
    return outputs


def test_the_same_acls_commands_give_the_same_listings_on_kafka_and_tidelog(
    tidelog: BrokerProcess, kafka: kafka_peer.KafkaPeer
) -> None:
    on_tidelog = run_script(tidelog.bootstrap)
    on_kafka = run_script(kafka.bootstrap)
    assert on_tidelog == on_kafka
    final = on_tidelog[len(SCRIPT) - 1]
    assert "name=ord, patternType=PREFIXED" in final
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in final
    assert "User:bob, host=*, operation=READ" not in final and "billing" not in final
    # and Tidelog enforces what it lists: eve's DENY names only 10.0.0.1
    assert "(principal=User:eve, host=10.0.0.1, operation=ALL, permissionType=DENY)" in final


def test_kafka_acls_tool_against_tidelog(tidelog: BrokerProcess) -> None:
    def kafka_acls(*args: str) -> str:
        return kafka_peer.run_tool(
            "kafka-acls", "--bootstrap-server", tidelog.bootstrap, *args
        ).stdout

    kafka_acls("--add", "--allow-principal", "User:carol", "--operation", "Write",
               "--topic", "java-topic", "--resource-pattern-type", "prefixed")
    kafka_acls("--add", "--consumer", "--allow-principal", "User:dave", "--topic", "java-in",
               "--group", "java-group")
    listed = kafka_acls("--list", "--topic", "java-topic", "--resource-pattern-type", "prefixed")
    assert "(principal=User:carol, host=*, operation=WRITE, permissionType=ALLOW)" in listed
    # our CLI sees what Kafka's tool wrote, and the other way round
    ours = tidelog_acls("list", "--bootstrap", tidelog.bootstrap, "--group", "java-group").stdout
    assert "(principal=User:dave, host=*, operation=READ, permissionType=ALLOW)" in ours
    kafka_acls("--remove", "--force", "--topic", "java-in", "--group", "java-group")
    kafka_acls("--remove", "--force", "--topic", "java-topic", "--resource-pattern-type",
               "prefixed")
    remaining = kafka_acls("--list")
    assert "carol" not in remaining and "dave" not in remaining


def test_command_config_and_refusals(
    tmp_path: Path, broker_factory: BrokerFactory, tidelog: BrokerProcess
) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text(
        f"# Kafka client properties\nbootstrap.servers={tidelog.bootstrap}\n"
        "security.protocol=PLAINTEXT\nclient.id = acls-cli\n"
    )
    tidelog_acls("add", "--command-config", str(properties), "--allow-principal", "User:zed",
                 "--operation", "Read", "--topic", "zed")
    listed = tidelog_acls("list", "--command-config", str(properties), "--topic", "zed").stdout
    assert "User:zed" in listed
    unsupported = tmp_path / "bad.properties"
    unsupported.write_text("sasl.kerberos.service.name=kafka\n")
    result = tidelog_acls("list", "--command-config", str(unsupported), check=False)
    assert result.returncode == 2 and "sasl.kerberos.service.name" in result.stderr
    # a broker without an authorizer refuses, named, exit status 1
    plain = broker_factory()
    result = tidelog_acls("add", "--bootstrap", plain.bootstrap, "--allow-principal", "User:a",
                          "--operation", "Read", "--topic", "t", check=False)
    assert result.returncode == 1 and "SECURITY_DISABLED" in result.stderr
