"""SCRAM users online: AlterUserScramCredentials / DescribeUserScramCredentials through
confluent-kafka's admin client and `tidelog users ... --bootstrap --command-config` (Kafka
client properties); a user added so logs in at once, a removed one no longer does. Error
codes are compared with Apache Kafka's in tests/differential (session scram_users)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin as kafka_admin
import pytest

from broker.raw import RawClient, request_module
from tidelog.errors import ErrorCode

from .conftest import USERS, Certs, StartSecure, tidelog, tls_settings
from .tls_sasl_clients import ROUNDTRIPS, Security, values


def _admin(bootstrap: str, security: Security) -> kafka_admin.AdminClient:
    return kafka_admin.AdminClient({"bootstrap.servers": bootstrap, **security.librdkafka()})


def test_confluent_admin_alters_and_describes_users(secure_broker: StartSecure,
                                                    certs: Certs) -> None:
    broker = secure_broker(["SASL_SSL"], tls_settings(certs))
    admin_security = Security("SASL_SSL", "SCRAM-SHA-256", "alice", USERS["alice"][1],
                              ca=certs["ca.pem"])
    admin = _admin(broker.bootstrap("SASL_SSL"), admin_security)
    upsert = kafka_admin.UserScramCredentialUpsertion(
        "dave", kafka_admin.ScramCredentialInfo(kafka_admin.ScramMechanism.SCRAM_SHA_512, 8192),
        b"dave-secret", b"some-salt-bytes!",
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    described = admin.describe_user_scram_credentials(["dave"])["dave"].result(30)
    [info] = described.scram_credential_infos
    assert (info.mechanism, info.iterations) == (kafka_admin.ScramMechanism.SCRAM_SHA_512, 8192)
    everyone = admin.describe_user_scram_credentials().result(30)
    assert sorted(everyone) == ["alice", "bob512", "dave"]
    # dave logs in with the new credential at once, with SCRAM-SHA-512 and with PLAIN.
    for mechanism in ("SCRAM-SHA-512", "PLAIN"):
        dave = Security("SASL_SSL", mechanism, "dave", "dave-secret", ca=certs["ca.pem"])
        topic = f"dave-{mechanism}".lower()
        assert ROUNDTRIPS["confluent"](broker.bootstrap("SASL_SSL"), topic, dave, 3) == values(
            topic, 3)
    # A missing user is RESOURCE_NOT_FOUND, as from Kafka.
    with pytest.raises(confluent_kafka.KafkaException) as missing:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(30)
    assert missing.value.args[0].code() == confluent_kafka.KafkaError.RESOURCE_NOT_FOUND
    deletion = kafka_admin.UserScramCredentialDeletion(
        "dave", kafka_admin.ScramMechanism.SCRAM_SHA_512)
    for future in admin.alter_user_scram_credentials([deletion]).values():
        future.result(30)
    assert "dave" not in admin.describe_user_scram_credentials().result(30)


def test_users_cli_through_the_admin_api(secure_broker: StartSecure, certs: Certs,
                                         tmp_path: Path) -> None:
    broker = secure_broker(["SASL_SSL", "PLAINTEXT"], tls_settings(certs))
    properties = tmp_path / "admin.properties"
    properties.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required"
        f' username="bob512" password="{USERS["bob512"][1]}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={certs['ca.pem']}\n"
    )
    online = ["--bootstrap", broker.bootstrap("SASL_SSL"), "--command-config", str(properties)]
    tidelog("users", "add", "erin", "--password", "erin-secret", *online)
    assert tidelog("users", "list", *online) == (
        "alice\tSCRAM-SHA-256 (iterations=4096)\n"
        "bob512\tSCRAM-SHA-512 (iterations=4096)\n"
        "erin\tSCRAM-SHA-256 (iterations=4096)\n"
    )
    erin = Security("SASL_SSL", "SCRAM-SHA-256", "erin", "erin-secret", ca=certs["ca.pem"])
    assert ROUNDTRIPS["kcat"](broker.bootstrap("SASL_SSL"), "erin", erin, 3) == values("erin", 3)
    tidelog("users", "remove", "erin", *online)
    assert "erin" not in tidelog("users", "list", "--data-dir", str(broker.process.data_dir))
    refused = subprocess.run(
        [sys.executable, "-m", "tidelog.cli.main", "users", "remove", "erin", *online],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert refused.returncode == 1 and "no such user" in refused.stderr



def test_refused_describe_is_kafkas_answer(secure_broker: StartSecure) -> None:
    """Without DESCRIBE on the cluster: CLUSTER_AUTHORIZATION_FAILED with Kafka's message and
    no results (User:ANONYMOUS on a PLAINTEXT listener, authorizer on)."""
    broker = secure_broker(["PLAINTEXT"], {"authorizer.class.name": "AclAuthorizer"})
    module = request_module(50, 0)
    client = RawClient(broker.bootstrap("PLAINTEXT"))
    try:
        answer = client.call(50, 0, module.DescribeUserScramCredentialsRequest(
            users=(module.UserName(name="alice"),)))
    finally:
        client.close()
    assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert answer.error_message == "Cluster authorization failed."
    assert answer.results == ()
