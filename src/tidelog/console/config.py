"""Console settings: command-line options over an optional TOML file.

    bootstrap = "127.0.0.1:9092"
    listen = "127.0.0.1:8080"
    password = "secret"          # optional sign-in when the cluster has no SASL
    metrics = ["http://127.0.0.1:9644/metrics"]
    audit_log = "console-audit.jsonl"
    timeout = 10.0
    [client]                     # extra librdkafka settings (the seat for SASL)
    "security.protocol" = "PLAINTEXT"
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ConsoleConfigError(ValueError):
    pass


@dataclass
class ConsoleConfig:
    bootstrap: str = "127.0.0.1:9092"
    listen: str = "127.0.0.1:8080"
    password: str | None = None
    metrics: list[str] = field(default_factory=list)
    audit_log: Path = Path("tidelog-console-audit.jsonl")
    timeout: float = 10.0
    metrics_interval: float = 5.0
    client: dict[str, str] = field(default_factory=dict)


def load_console_config(path: Path | None, **overrides: Any) -> ConsoleConfig:
    values: dict[str, Any] = {}
    if path is not None:
        try:
            values = tomllib.loads(path.read_text("utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise ConsoleConfigError(f"{path}: {error}") from None
    values.update({k: v for k, v in overrides.items() if v is not None})
    known = set(ConsoleConfig.__dataclass_fields__)
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConsoleConfigError(f"unknown console settings: {', '.join(unknown)}")
    config = ConsoleConfig(**values)
    try:
        if isinstance(config.metrics, str):
            config.metrics = [config.metrics]
        config.metrics = [str(url) for url in config.metrics]
        config.audit_log = Path(config.audit_log)
        config.timeout = float(config.timeout)
        config.metrics_interval = float(config.metrics_interval)
        config.client = {str(k): str(v) for k, v in dict(config.client).items()}
        if config.password is not None:
            config.password = str(config.password)
    except (TypeError, ValueError) as error:
        raise ConsoleConfigError(f"bad console setting: {error}") from None
    if config.timeout <= 0 or config.metrics_interval <= 0:
        raise ConsoleConfigError("timeout and metrics_interval must be positive")
    return config
