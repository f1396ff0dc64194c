"""Bootstrap SCRAM users from the broker's config (`tidelog.scram.bootstrap.users`, KIP-900's
--add-scram syntax): the first start adds them, a later start never puts back a password that
was changed meanwhile, a bad value stops `tidelog serve` with exit status 2 naming the setting.
Shown with confluent-kafka over SASL_PLAINTEXT."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tidelog.security.scram_bootstrap import (
    BootstrapUser,
    missing_credentials,
    parse_bootstrap_users,
)
from tidelog.security.scram_credentials import CredentialStoreError, make_credential

from .conftest import StartSecure, tidelog
from .tls_sasl_clients import ROUNDTRIPS, Security, values

SETTING = "tidelog.scram.bootstrap.users"


def test_parses_kafka_storage_add_scram_syntax() -> None:
    text = ('SCRAM-SHA-512=[name=admin,password=admin-secret];'
            ' SCRAM-SHA-256=[name="al,ice",password="p]w;\\"x",iterations=8192]')
    assert parse_bootstrap_users(text) == [
        BootstrapUser("SCRAM-SHA-512", "admin", "admin-secret"),
        BootstrapUser("SCRAM-SHA-256", "al,ice", 'p]w;"x', 8192),
    ]
    assert parse_bootstrap_users("") == []


@pytest.mark.parametrize("text", [
    "SCRAM-SHA-1=[name=a,password=s3cret-pw]",  # not a SCRAM mechanism Kafka has
    "SCRAM-SHA-256=[name=a]",  # no password
    "SCRAM-SHA-256=[password=s3cret-pw]",  # no name
    "SCRAM-SHA-256=[name=a,password=s3cret-pw,iterations=10]",  # under RFC 7677's minimum
    'SCRAM-SHA-256=[name=a,password="s3cret-pw]',  # unterminated quote
    "SCRAM-SHA-256=[name=a,password=s3cret-pw] junk",
])
def test_bad_values_are_refused_without_echoing_the_password(text: str) -> None:
    with pytest.raises(CredentialStoreError) as refused:
        parse_bootstrap_users(text)
    assert "tidelog.scram.bootstrap.users" in str(refused.value) or "iterations" in str(
        refused.value)
    assert "s3cret-pw" not in str(refused.value)


def test_only_missing_credentials_are_added() -> None:
    users = parse_bootstrap_users(
        "SCRAM-SHA-256=[name=a,password=x];SCRAM-SHA-512=[name=a,password=x]")
    store = {"a": {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "rotated")}}
    added = missing_credentials(users, store)
    assert list(added) == ["a"] and list(added["a"]) == ["SCRAM-SHA-512"]
    assert added["a"]["SCRAM-SHA-512"].matches_password(b"x")


def test_first_start_adds_the_users_and_a_later_start_keeps_a_rotated_password(
    secure_broker: StartSecure, tmp_path: Path
) -> None:
    settings = {SETTING: "SCRAM-SHA-512=[name=admin,password=first-secret]",
                "sasl.enabled.mechanisms": "SCRAM-SHA-512"}
    broker = secure_broker(["SASL_PLAINTEXT"], settings, users={})
    admin = Security("SASL_PLAINTEXT", "SCRAM-SHA-512", "admin", "first-secret")
    assert ROUNDTRIPS["confluent"](broker.bootstrap("SASL_PLAINTEXT"), "boot", admin, 3) == \
        values("boot", 3)
    data_dir = broker.process.data_dir
    broker.process.stop()
    # The password is changed offline; the same bootstrap setting must not put it back.
    tidelog("users", "add", "admin", "--password", "second-secret", "--mechanism",
            "SCRAM-SHA-512", "--data-dir", str(data_dir))
    again = secure_broker(["SASL_PLAINTEXT"], settings, users={}, data_dir=data_dir)
    rotated = Security("SASL_PLAINTEXT", "SCRAM-SHA-512", "admin", "second-secret")
    assert ROUNDTRIPS["confluent"](again.bootstrap("SASL_PLAINTEXT"), "boot2", rotated, 3) == \
        values("boot2", 3)


def test_a_bad_value_stops_the_broker_naming_the_setting(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tidelog.cli.main", "serve", "--data-dir", str(tmp_path / "d"),
         "--metrics", "off", "--set", f"{SETTING}=SCRAM-SHA-256=[name=a]"],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert SETTING in done.stderr and "Traceback" not in done.stderr
