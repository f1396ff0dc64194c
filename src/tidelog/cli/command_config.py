"""`--command-config FILE`: Kafka client properties (as Kafka's tools take them) translated to
librdkafka settings, so one file serves `kafka-acls.sh` and `tidelog acls` alike.

Java properties syntax (`key=value` or `key: value`, `#`/`!` comments, `\\` line
continuations). Translated: `bootstrap.servers`, `client.id`, `security.protocol`,
`sasl.mechanism`, `sasl.jaas.config` (PlainLoginModule / ScramLoginModule `username` and
`password`), PEM `ssl.truststore.location` / `ssl.keystore.location`,
`ssl.endpoint.identification.algorithm`. Other Java-only keys are refused by name rather than
silently ignored (a security setting that does nothing is worse than an error).
"""

from __future__ import annotations

import re
from pathlib import Path

import click

MAX_FILE_BYTES = 1024 * 1024

_PASS_THROUGH = {"bootstrap.servers", "client.id", "security.protocol", "sasl.mechanism"}
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def read_properties(path: Path) -> dict[str, str]:
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise click.BadParameter(f"cannot read {path}: {error.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise click.BadParameter(f"{path} is larger than {MAX_FILE_BYTES} bytes")
    properties: dict[str, str] = {}
    logical = ""
    for raw_line in data.decode("utf-8", "replace").splitlines():
        line = raw_line.strip() if not logical else raw_line.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)", logical)
        if match:
            properties[match.group(1)] = match.group(2).strip()
        logical = ""
    return properties


def to_librdkafka(properties: dict[str, str]) -> dict[str, str]:
    """Kafka client properties -> librdkafka configuration (see the module doc)."""
    config: dict[str, str] = {}
    for key, value in properties.items():
        if key in _PASS_THROUGH:
            config[key] = value
        elif key == "sasl.jaas.config":
            options = dict(_JAAS_OPTION.findall(value))
            if "username" in options:
                config["sasl.username"] = options["username"]
            if "password" in options:
                config["sasl.password"] = options["password"]
        elif key == "ssl.truststore.location":
            config["ssl.ca.location"] = value
        elif key == "ssl.keystore.location":
            # a PEM keystore holds the private key and the certificate chain
            config["ssl.certificate.location"] = value
            config["ssl.key.location"] = value
        elif key in ("ssl.key.password", "ssl.keystore.password"):
            if value:
                config["ssl.key.password"] = value
        elif key == "ssl.endpoint.identification.algorithm":
            config[key] = value or "none"
        elif key in ("ssl.truststore.type", "ssl.keystore.type"):
            if value.upper() != "PEM":
                raise click.BadParameter(f"{key}={value}: only PEM stores are supported")
        elif key == "ssl.truststore.password":
            continue  # PEM trust stores have no password
        else:
            raise click.BadParameter(f"--command-config: unsupported client property {key!r}")
    return config
