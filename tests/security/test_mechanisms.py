"""SASL mechanisms and SCRAM credentials, sans-I/O: RFC 7677's test vector, a SCRAM client
written here, PLAIN, every failure as SaslAuthenticationError (also for random and truncated
input), and the credential store file."""

from __future__ import annotations

import base64
import hashlib
import hmac
import stat
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelog.security.mechanisms import create_server
from tidelog.security.plain import PlainServer
from tidelog.security.sasl import SaslAuthenticationError
from tidelog.security.scram import ScramServer
from tidelog.security.scram_credentials import (
    STORE_FILE,
    CredentialCache,
    CredentialStoreError,
    ScramCredential,
    decode_store,
    encode_store,
    make_credential,
    read_store,
    write_store,
)


class Source:
    def __init__(self, users: Mapping[str, Mapping[str, ScramCredential]]) -> None:
        self.users = users

    def credentials(self, username: str) -> Mapping[str, ScramCredential]:
        return self.users.get(username, {})


def test_rfc7677_example() -> None:
    credential = make_credential(
        "SCRAM-SHA-256", "pencil", salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="),
        iterations=4096,
    )
    server = ScramServer("SCRAM-SHA-256", Source({"user": {"SCRAM-SHA-256": credential}}),
                         "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.evaluate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.username == "user"


def scram_client(server: ScramServer, mechanism: str, user: str, password: str,
                 nonce: str = "clientnonce") -> bytes:
    """A SCRAM client (RFC 5802 section 3) against `server`; returns the server-final."""
    hash_name = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    first_bare = f"n={user},r={nonce}"
    server_first = server.evaluate(f"n,,{first_bare}".encode()).decode()
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), base64.b64decode(fields["s"]),
                                 int(fields["i"]))
    client_key = hmac.digest(salted, b"Client Key", hash_name)
    stored_key = hashlib.new(hash_name, client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(stored_key, auth_message, hash_name)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = server.evaluate(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    server_key = hmac.digest(salted, b"Server Key", hash_name)
    expected = hmac.digest(server_key, auth_message, hash_name)
    assert final == b"v=" + base64.b64encode(expected)
    return final


USERS = {
    "alice": {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "wonderland")},
    "bob": {"SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "builder")},
    "a,b=c": {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "odd")},
}


@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("SCRAM-SHA-256", "alice", "wonderland"), ("SCRAM-SHA-512", "bob", "builder"),
])
def test_scram_round_trip(mechanism: str, user: str, password: str) -> None:
    server = ScramServer(mechanism, Source(USERS), "servernonce")
    scram_client(server, mechanism, user, password)
    assert server.username == user
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(b"n,,n=alice,r=again")  # nothing after completion


def test_scram_escaped_user_name() -> None:
    server = ScramServer("SCRAM-SHA-256", Source(USERS), "servernonce")
    scram_client(server, "SCRAM-SHA-256", "a=2Cb=3Dc", "odd")
    assert server.username == "a,b=c"


@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("SCRAM-SHA-256", "alice", "wrong"),  # wrong password
    ("SCRAM-SHA-256", "nobody", "wonderland"),  # unknown user: same exchange, fails at the end
    ("SCRAM-SHA-256", "bob", "builder"),  # bob has no SCRAM-SHA-256 credential
])
def test_scram_refusals_happen_at_the_proof(mechanism: str, user: str, password: str) -> None:
    server = ScramServer(mechanism, Source(USERS), "servernonce")
    # The first step answers as for anyone (a salt and iterations), so it reveals nothing.
    assert server.evaluate(f"n,,n={user},r=abc".encode()).startswith(b"r=abcservernonce,s=")
    with pytest.raises(SaslAuthenticationError):
        scram_client(ScramServer(mechanism, Source(USERS), "s"), mechanism, user, password)


@pytest.mark.parametrize("first", [
    b"p=tls-unique,,n=alice,r=abc",  # channel binding
    b"n,,n=alice",  # no nonce
    b"n,,r=abc",  # no user
    b"n,a=bob,n=alice,r=abc",  # authzid of someone else
    b"n,,n=al=ice,r=abc",  # bad escape
    b"n,,m=ext,n=alice,r=abc",  # mandatory extension
    b"n,,n=alice,r=abc,tokenauth=true",  # delegation token
    b"\xff\xfe",  # not UTF-8
    b"",
])
def test_scram_bad_first_messages(first: bytes) -> None:
    with pytest.raises(SaslAuthenticationError):
        ScramServer("SCRAM-SHA-256", Source(USERS), "s").evaluate(first)


def test_scram_final_message_must_echo_the_nonce_and_binding() -> None:
    for final in (b"c=biws,r=abcWRONG,p=AAAA", b"c=eSws,r=abcs,p=AAAA", b"c=biws,r=abcs",
                  b"c=biws,r=abcs,p=!!!"):
        server = ScramServer("SCRAM-SHA-256", Source(USERS), "s")
        server.evaluate(b"n,,n=alice,r=abc")
        with pytest.raises(SaslAuthenticationError):
            server.evaluate(final)


@given(st.binary(max_size=300), st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]),
       st.booleans())
def test_random_tokens_only_fail_as_authentication_errors(token: bytes, mechanism: str,
                                                          after_first: bool) -> None:
    server = create_server(mechanism, Source(USERS), "s")
    try:
        if after_first and mechanism != "PLAIN":
            server.evaluate(b"n,,n=alice,r=abc")
        server.evaluate(token)
    except SaslAuthenticationError:
        return
    assert not server.complete or mechanism != "PLAIN"


@given(st.integers(min_value=0, max_value=200))
def test_truncated_final_messages_fail_cleanly(cut: int) -> None:
    server = ScramServer("SCRAM-SHA-256", Source(USERS), "s")
    server.evaluate(b"n,,n=alice,r=abc")
    final = b"c=biws,r=abcs,p=" + base64.b64encode(b"\x01" * 32)
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(final[:cut])


@pytest.mark.parametrize(("token", "ok"), [
    (b"\x00alice\x00wonderland", True),
    (b"alice\x00alice\x00wonderland", True),  # authzid = authcid
    (b"\x00bob\x00builder", True),  # PLAIN against a SCRAM-SHA-512-only user
    (b"\x00alice\x00wrong", False),
    (b"\x00nobody\x00wonderland", False),
    (b"bob\x00alice\x00wonderland", False),  # authzid of someone else
    (b"\x00alice\x00", False),
    (b"\x00alice", False),
    (b"\x00\x00x", False),
    (b"\x00\xff\x00x", False),
])
def test_plain(token: bytes, ok: bool) -> None:
    server = PlainServer(Source(USERS))
    if ok:
        assert server.evaluate(token) == b""
        assert server.complete
    else:
        with pytest.raises(SaslAuthenticationError):
            server.evaluate(token)
        assert not server.complete


def test_store_round_trip_and_atomic_file(tmp_path: Path) -> None:
    write_store(tmp_path, USERS)
    path = tmp_path / STORE_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_store(tmp_path) == USERS
    assert b"wonderland" not in path.read_bytes()  # only salted keys
    assert decode_store(encode_store(USERS)) == USERS
    assert not list(tmp_path.glob("*.tmp"))
    assert read_store(tmp_path / "missing") == {}


@pytest.mark.parametrize("data", [b"", b"{}", b'{"version": 2, "users": {}}', b"\xff",
                                  b'{"version": 1, "users": {"a": {"MD5": {}}}}',
                                  b'{"version": 1, "users": {"a": {"SCRAM-SHA-256": {}}}}'])
def test_malformed_store(data: bytes) -> None:
    with pytest.raises(CredentialStoreError):
        decode_store(data)


def test_credential_cache_sees_new_users(tmp_path: Path) -> None:
    cache = CredentialCache(tmp_path)
    assert cache.lookup("alice", "SCRAM-SHA-256") is None
    write_store(tmp_path, {"alice": USERS["alice"]})
    assert cache.lookup("alice", "SCRAM-SHA-256") == USERS["alice"]["SCRAM-SHA-256"]
    write_store(tmp_path, {"alice": USERS["alice"], "bob": USERS["bob"]})
    assert cache.credentials("bob") == USERS["bob"]


def test_credential_parameters_are_checked() -> None:
    with pytest.raises(CredentialStoreError):
        make_credential("SCRAM-SHA-1", "x")
    with pytest.raises(CredentialStoreError):
        make_credential("SCRAM-SHA-256", "x", iterations=100)
