"""Apache Kafka's own tools and Java client (4.3.1, through `scripts/kafka tool`) against
Tidelog's SASL_SSL listener: kafka-configs adds a SCRAM user through
AlterUserScramCredentials, then the Java console producer and
consumer log in as that user with SCRAM-SHA-512 over TLS (the Java client checks the server's
final SCRAM signature strictly)."""

from __future__ import annotations

from pathlib import Path

import kafka_peer

from .conftest import USERS, Certs, StartSecure, tidelog, tls_settings


def _properties(path: Path, user: str, password: str, mechanism: str, certs: Certs) -> str:
    path.write_text(
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={mechanism}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required"
        f' username="{user}" password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={certs['ca.pem']}\n"
    )
    return str(path)


def test_kafka_configs_and_java_clients_over_sasl_ssl(
    secure_broker: StartSecure, certs: Certs, tmp_path: Path
) -> None:
    broker = secure_broker(["SASL_SSL"], tls_settings(certs))
    bootstrap = broker.bootstrap("SASL_SSL")
    admin = _properties(tmp_path / "admin.properties", "alice", USERS["alice"][1],
                        "SCRAM-SHA-256", certs)
    kafka_peer.run_tool(
        "kafka-configs", "--bootstrap-server", bootstrap, "--command-config", admin, "--alter",
        "--add-config", "SCRAM-SHA-512=[iterations=8192,password=frank-secret]",
        "--entity-type", "users", "--entity-name", "frank",
    )
    # (kafka-configs --describe of users would list SCRAM mechanisms and quotas together;
    # the same properties file serves `tidelog users list`.)
    described = tidelog("users", "list", "--bootstrap", bootstrap, "--command-config", admin)
    assert "frank\tSCRAM-SHA-512 (iterations=8192)" in described, described
    frank = _properties(tmp_path / "frank.properties", "frank", "frank-secret",
                        "SCRAM-SHA-512", certs)
    lines = [f"line {index}" for index in range(20)]
    kafka_peer.run_tool(
        "kafka-console-producer", "--bootstrap-server", bootstrap, "--command-config", frank,
        "--topic", "java-scram", input="\n".join(lines) + "\n",
    )
    out = kafka_peer.run_tool(
        "kafka-console-consumer", "--bootstrap-server", bootstrap, "--command-config", frank,
        "--topic", "java-scram", "--from-beginning", "--max-messages", str(len(lines)),
    ).stdout
    assert out.splitlines() == lines
    broker.wait_for_log("authenticated as User:frank with SCRAM-SHA-512")
