"""OAUTHBEARER (RFC 7628) with JWT validation (RFC 7519/7515), as Kafka's
OAuthBearerValidatorCallbackHandler (KIP-768) does it, against keys from a JWKS file.

Client message: `n,[a=authzid],` 0x01 `auth=Bearer <jwt>` 0x01 [key=value 0x01]* 0x01; the
answer to a valid token is empty. A token is accepted only if:
- its header's `alg` is RS256/384/512, PS256/384/512 or ES256/384/512 (never `none` or HMAC:
  unsecured JWS is refused) and its signature verifies with the JWKS key named by `kid`
  (or the only key when the token names none);
- `exp` is present and not past (`sasl.oauthbearer.clock.skew.seconds` of slack), `nbf` and
  `iat` are not in the future;
- `iss` equals `sasl.oauthbearer.expected.issuer` and `aud` contains
  `sasl.oauthbearer.expected.audience`, when those are set;
- the principal claim (`sasl.oauthbearer.sub.claim.name`, default `sub`) is a non-empty
  string: the principal is `User:<it>`. An authzid, if sent, must equal it.
Time is passed in (`now_ms`). A failure raises SaslAuthenticationError at once (Kafka first
answers an error JSON and fails on the client's next message; the client sees the same
refusal).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tidelog.errors import TidelogError
from tidelog.security.sasl import SaslAuthenticationError, SingleMessageServer

MAX_JWT_BYTES = 16 * 1024
_HASHES = {"256": "SHA256", "384": "SHA384", "512": "SHA512"}


class JwksError(TidelogError):
    """The JWKS document is unusable (a config error)."""


@dataclass(frozen=True, slots=True)
class JwtValidator:
    keys: Mapping[str, Any]  # kid -> a cryptography public key ("" for a key without kid)
    expected_audience: str | None = None
    expected_issuer: str | None = None
    principal_claim: str = "sub"
    clock_skew_s: int = 30

    def validate(self, token: str, now_ms: int) -> str:
        """The principal name of a valid token; SaslAuthenticationError otherwise."""
        parts = token.split(".")
        if len(parts) != 3 or len(token) > MAX_JWT_BYTES:
            raise SaslAuthenticationError("OAUTHBEARER: not a signed JWT (3 parts)")
        header = _json_part(parts[0], "header")
        claims = _json_part(parts[1], "payload")
        signature = _b64url(parts[2], "signature")
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm[:2] not in ("RS", "PS", "ES") or (
            algorithm[2:] not in _HASHES
        ):
            raise SaslAuthenticationError(f"OAUTHBEARER: algorithm {algorithm!r} refused")
        kid = header.get("kid")
        key = self.keys.get(kid) if isinstance(kid, str) else (
            next(iter(self.keys.values())) if len(self.keys) == 1 else None
        )
        if key is None:
            raise SaslAuthenticationError(f"OAUTHBEARER: no key {kid!r} in the JWKS")
        _verify(key, algorithm, f"{parts[0]}.{parts[1]}".encode("ascii"), signature)
        self._check_claims(claims, now_ms)
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal:
            raise SaslAuthenticationError(
                f"OAUTHBEARER: claim {self.principal_claim!r} missing or not a string"
            )
        return principal

    def _check_claims(self, claims: Mapping[str, Any], now_ms: int) -> None:
        now_s = now_ms / 1000
        expires = claims.get("exp")
        if not isinstance(expires, (int, float)) or isinstance(expires, bool):
            raise SaslAuthenticationError("OAUTHBEARER: no exp claim")
        if expires + self.clock_skew_s < now_s:
            raise SaslAuthenticationError("OAUTHBEARER: token expired")
        for name in ("nbf", "iat"):
            value = claims.get(name)
            if isinstance(value, (int, float)) and value - self.clock_skew_s > now_s:
                raise SaslAuthenticationError(f"OAUTHBEARER: {name} is in the future")
        if self.expected_issuer is not None and claims.get("iss") != self.expected_issuer:
            raise SaslAuthenticationError("OAUTHBEARER: unexpected issuer")
        if self.expected_audience is not None:
            audience = claims.get("aud")
            audiences = audience if isinstance(audience, list) else [audience]
            if self.expected_audience not in audiences:
                raise SaslAuthenticationError("OAUTHBEARER: unexpected audience")


class OAuthBearerServer(SingleMessageServer):
    mechanism = "OAUTHBEARER"

    def __init__(self, validator: JwtValidator, now_ms: Callable[[], int]) -> None:
        super().__init__()
        self._validator = validator
        self._now_ms = now_ms

    def evaluate(self, token: bytes) -> bytes:
        self._refuse_after_completion()
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("OAUTHBEARER: message is not UTF-8") from None
        gs2, separator, rest = message.partition("\x01")
        gs2_parts = gs2.split(",")
        if not separator or len(gs2_parts) != 3 or gs2_parts[0] not in ("n", "y") or (
            gs2_parts[1] and not gs2_parts[1].startswith("a=")
        ):
            raise SaslAuthenticationError("OAUTHBEARER: bad gs2 header")
        if not rest.endswith("\x01\x01"):
            raise SaslAuthenticationError("OAUTHBEARER: message not terminated")
        fields = dict(item.partition("=")[::2] for item in rest[:-2].split("\x01") if item)
        scheme, _, jwt = fields.get("auth", "").partition(" ")
        if scheme.lower() != "bearer" or not jwt:
            raise SaslAuthenticationError("OAUTHBEARER: no Bearer token")
        principal = self._validator.validate(jwt.strip(), self._now_ms())
        if gs2_parts[1] and gs2_parts[1][2:] != principal:
            raise SaslAuthenticationError("OAUTHBEARER: authzid is not the token's principal")
        self._accept(principal)
        return b""


def load_jwks(document: bytes) -> dict[str, Any]:
    """A JWKS (`{"keys": [...]}`, RSA and EC public keys) -> kid -> public key."""
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    curves = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(), "P-521": ec.SECP521R1()}
    try:
        entries = json.loads(document)["keys"]
        keys: dict[str, Any] = {}
        for entry in entries:
            if entry.get("use", "sig") != "sig":
                continue
            kid = str(entry.get("kid", ""))
            if entry["kty"] == "RSA":
                numbers = rsa.RSAPublicNumbers(_int(entry["e"]), _int(entry["n"]))
                keys[kid] = numbers.public_key()
            elif entry["kty"] == "EC":
                point = ec.EllipticCurvePublicNumbers(
                    _int(entry["x"]), _int(entry["y"]), curves[entry["crv"]]
                )
                keys[kid] = point.public_key()
    except (ValueError, KeyError, TypeError, SaslAuthenticationError) as error:
        raise JwksError(f"unusable JWKS: {error}") from None
    if not keys:
        raise JwksError("the JWKS has no signing key")
    return keys


def _verify(key: Any, algorithm: str, signed: bytes, signature: bytes) -> None:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils

    hash_algorithm = getattr(hashes, _HASHES[algorithm[2:]])()
    try:
        if algorithm.startswith("ES") and isinstance(key, ec.EllipticCurvePublicKey):
            half = len(signature) // 2
            der = utils.encode_dss_signature(
                int.from_bytes(signature[:half], "big"), int.from_bytes(signature[half:], "big")
            )
            key.verify(der, signed, ec.ECDSA(hash_algorithm))
        elif algorithm.startswith("RS") and isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, signed, padding.PKCS1v15(), hash_algorithm)
        elif algorithm.startswith("PS") and isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, signed,
                       padding.PSS(padding.MGF1(hash_algorithm), padding.PSS.DIGEST_LENGTH),
                       hash_algorithm)
        else:
            raise SaslAuthenticationError(f"OAUTHBEARER: {algorithm} does not fit the key")
    except (InvalidSignature, ValueError):
        raise SaslAuthenticationError("OAUTHBEARER: bad signature") from None


def _b64url(text: str, what: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise SaslAuthenticationError(f"OAUTHBEARER: {what} is not base64url") from None


def _json_part(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(_b64url(text, what))
    except ValueError:
        raise SaslAuthenticationError(f"OAUTHBEARER: {what} is not JSON") from None
    if not isinstance(value, dict):
        raise SaslAuthenticationError(f"OAUTHBEARER: {what} is not a JSON object")
    return value


def _int(text: str) -> int:
    return int.from_bytes(_b64url(text, "key"), "big")
