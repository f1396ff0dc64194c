"""Listener settings (Kafka's names) and ssl.principal.mapping.rules, without a broker; then
`tidelog users` and bad settings through the real commands."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tidelog.broker.config import ConfigError, advertised_endpoint, load_config
from tidelog.broker.listener_config import SecurityProtocol, listener_setting
from tidelog.security.ssl_principal import (
    PrincipalMappingError,
    map_principal,
    parse_rules,
    subject_dn,
)


def test_listeners_and_their_advertised_endpoints() -> None:
    config = load_config(None, {
        "listeners": "PLAINTEXT://127.0.0.1:9092,CLIENT://0.0.0.0:9094,sasl_ssl://:9093",
        "advertised.listeners": "CLIENT://broker.example:19094",
        "listener.security.protocol.map": "CLIENT:SASL_SSL",
        "inter.broker.listener.name": "plaintext",
    })
    names = [(s.name, s.security_protocol, s.host, s.port) for s in config.listeners]
    assert names == [
        ("PLAINTEXT", SecurityProtocol.PLAINTEXT, "127.0.0.1", 9092),
        ("CLIENT", SecurityProtocol.SASL_SSL, "0.0.0.0", 9094),
        ("SASL_SSL", SecurityProtocol.SASL_SSL, "", 9093),
    ]
    assert (config.listen_host, config.listen_port) == ("127.0.0.1", 9092)
    assert advertised_endpoint(config, "CLIENT") == ("broker.example", 19094)
    assert advertised_endpoint(config, "SASL_SSL") == ("127.0.0.1", 9093)
    assert config.inter_broker_listener_name == "PLAINTEXT"


def test_listen_is_the_plaintext_shorthand() -> None:
    config = load_config(None, {}, listen="127.0.0.1:7000", advertise="kafka.local:7001")
    [spec] = config.listeners
    assert (spec.name, spec.port, spec.advertised_host, spec.advertised_port) == (
        "PLAINTEXT", 7000, "kafka.local", 7001)


@pytest.mark.parametrize(("settings", "listen"), [
    ({"listeners": "PLAINTEXT://127.0.0.1:1"}, "127.0.0.1:2"),  # both
    ({"listeners": "CLIENT://127.0.0.1:1"}, None),  # no protocol for CLIENT
    ({"listeners": "PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"}, None),  # twice
    ({"listeners": "PLAINTEXT://127.0.0.1"}, None),  # no port
    ({"listeners": "PLAINTEXT://127.0.0.1:1",
      "advertised.listeners": "SSL://h:2"}, None),  # advertises a listener that is not there
    ({"listeners": "X://127.0.0.1:1", "listener.security.protocol.map": "X:TLS"}, None),
    ({"listeners": "SSL://127.0.0.1:1", "inter.broker.listener.name": "OTHER"}, None),
    ({"listener.name.ssl.no.such.setting": "1"}, None),
])
def test_bad_listener_settings(settings: dict[str, str], listen: str | None) -> None:
    with pytest.raises(ConfigError):
        load_config(None, settings, listen=listen)


def test_per_listener_settings_win() -> None:
    raw = {"ssl.client.auth": "none", "listener.name.internal.ssl.client.auth": "required"}
    assert listener_setting(raw, "INTERNAL", "ssl.client.auth") == "required"
    assert listener_setting(raw, "CLIENT", "ssl.client.auth") == "none"
    assert load_config(None, raw).raw == raw  # accepted names


@pytest.mark.parametrize(("rules", "dn", "principal"), [
    # Kafka's SslPrincipalMapperTest cases
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT",
     "CN=kafka-server1,OU=ServiceUsers,O=Org,C=US", "User:kafka-server1"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=duke,OU=JavaSoft,O=Sun",
     "User:CN=duke,OU=JavaSoft,O=Sun"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
     "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Cupertino,ST=CA,C=US", "User:duke@javasoft"),
    ("RULE:^CN=(.*?),OU=(.*?)$/$1/U", "CN=duke,OU=x", "User:DUKE"),
    ("RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L", "cn=Test.Host,o=x", "User:test.host"),
    ("RULE:^CN=(.*)$/a\\/b $1/", "CN=x", "User:a/b x"),  # an escaped slash in the replacement
    (None, "CN=x,O=y", "User:CN=x,O=y"),  # no rules: DEFAULT
])
def test_principal_mapping_rules(rules: str | None, dn: str, principal: str) -> None:
    assert str(map_principal(dn, parse_rules(rules))) == principal


@pytest.mark.parametrize("rules", [
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1", "RULE:^CN=(.*?)$/$1/X", "DEFAULTS", "RULE:([/x/",
])
def test_bad_principal_mapping_rules(rules: str) -> None:
    with pytest.raises(PrincipalMappingError):
        parse_rules(rules)


def test_no_matching_rule_fails() -> None:
    with pytest.raises(PrincipalMappingError):
        map_principal("CN=x", parse_rules("RULE:^CN=y$/y/"))


def test_subject_dn_is_rfc2253() -> None:
    subject = ((("countryName", "US"),), (("organizationName", "Acme, Inc"),),
               (("organizationalUnitName", "a"), ("organizationalUnitName", "b")),
               (("commonName", "#client "),))
    assert subject_dn(subject) == "CN=\\#client\\ ,OU=a+OU=b,O=Acme\\, Inc,C=US"


def _tidelog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tidelog.cli.main", *args],
                          capture_output=True, text=True, timeout=60, check=False)


def test_users_commands(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    assert _tidelog("users", "add", "alice", "--password", "p1", "--data-dir", data).returncode == 0
    assert _tidelog("users", "add", "alice", "--password", "p2", "--mechanism", "SCRAM-SHA-512",
                    "--data-dir", data).returncode == 0
    listed = _tidelog("users", "list", "--data-dir", data).stdout
    assert listed == ("alice\tSCRAM-SHA-256 (iterations=4096), "
                      "SCRAM-SHA-512 (iterations=4096)\n")
    assert _tidelog("users", "remove", "alice", "--mechanism", "SCRAM-SHA-256",
                    "--data-dir", data).returncode == 0
    assert _tidelog("users", "list", "--data-dir", data).stdout.startswith("alice\tSCRAM-SHA-512")
    assert _tidelog("users", "remove", "alice", "--data-dir", data).returncode == 0
    assert _tidelog("users", "list", "--data-dir", data).stdout == ""
    assert _tidelog("users", "remove", "alice", "--data-dir", data).returncode == 1


@pytest.mark.parametrize("settings", [
    ["listeners=SSL://127.0.0.1:0"],  # TLS without a key store
    ["listeners=SSL://127.0.0.1:0", "ssl.keystore.location=/nonexistent.pem"],
    ["listeners=SSL://127.0.0.1:0", "ssl.keystore.type=JKS"],
    ["listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=GSSAPI"],
    ["listeners=SASL_PLAINTEXT://127.0.0.1:0", "ssl.principal.mapping.rules=RULE:x"],
])
def test_bad_security_settings_exit_2(tmp_path: Path, settings: list[str]) -> None:
    args = ["serve", "--data-dir", str(tmp_path / "d"), "--metrics", "off"]
    for setting in settings:
        args += ["--set", setting]
    result = _tidelog(*args)
    assert result.returncode == 2, result.stderr
    assert "tidelog serve:" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(("settings", "named"), [
    (["listeners=SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0"],
     "sasl.mechanism.inter.broker.protocol"),  # Kafka's default, GSSAPI, is not built
    (["listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.mechanism.inter.broker.protocol=PLAIN"],
     "sasl.jaas.config"),  # the broker's own credentials are missing
    (["listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=PLAIN",
      "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256"], "sasl.enabled.mechanisms"),
    (["listeners=A://127.0.0.1:0", "listener.security.protocol.map=A:PLAINTEXT",
      "inter.broker.listener.name=A", "security.inter.broker.protocol=PLAINTEXT"],
     "not both"),
])
def test_cluster_mode_names_a_bad_inter_broker_setting(
    tmp_path: Path, settings: list[str], named: str
) -> None:
    """A cluster broker cannot reach its peers as configured: exit 2 naming the setting, before
    ZooKeeper is contacted (nothing listens on 127.0.0.1:1)."""
    args = ["serve", "--data-dir", str(tmp_path / "d"), "--metrics", "off", "--node-id", "1",
            "--zookeeper", "127.0.0.1:1"]
    for setting in settings:
        args += ["--set", setting]
    result = _tidelog(*args)
    assert result.returncode == 2, result.stderr
    assert named in result.stderr and "Traceback" not in result.stderr
