"""Running scripted sessions against two brokers and collecting their differences.

A session is a list of steps run in order on one connection per broker. A step is one request:
its body is a dict, or a function of the session context (``ctx``, a dict per broker holding
values captured from that broker's earlier answers, e.g. a member id), or raw bytes.

- ``compare=True`` steps are the scripted *exchanges*: both answers are masked, compared and
  counted. ``compare=False`` steps only set state (create a topic, wait for a coordinator);
  they may retry until a predicate holds, and their answers are not compared.
- ``capture`` stores values from a broker's own answer into its ``ctx``.
- ``transform`` reshapes the two masked answers before the comparison, for the few APIs whose
  answer legitimately has a different extent (ApiVersions lists more APIs on Kafka).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .compare import BrokerMasks, Difference, diff
from .wire import Connection

Body = dict[str, Any] | bytes | Callable[[dict[str, Any]], dict[str, Any] | bytes]


@dataclass
class Step:
    name: str
    api_key: int
    version: int
    body: Body
    compare: bool = True
    expect_response: bool = True
    response_version: int | None = None  # for a request of a version the schema lacks
    until: Callable[[Any], bool] | None = None  # setup steps: retry until this holds
    capture: Callable[[Any, dict[str, Any]], None] | None = None
    transform: Callable[[Any, Any], tuple[Any, Any]] | None = None
    timeout_s: float = 20.0  # waiting for the answer; a broker that never answers is a finding


@dataclass
class Session:
    name: str
    steps: list[Step]


@dataclass
class ExchangeResult:
    name: str
    api_key: int
    version: int
    kafka: Any
    tidelog: Any
    differences: list[Difference]


@dataclass
class Broker:
    """One side of the comparison."""

    label: str
    bootstrap: str
    masks: BrokerMasks
    ctx: dict[str, Any] = field(default_factory=dict)
    connection: Connection | None = None

    def run(self, step: Step) -> Any:
        if self.connection is None:
            self.connection = Connection(self.bootstrap)
        body = step.body(self.ctx) if callable(step.body) else step.body
        deadline = time.monotonic() + 30.0
        while True:
            raw = self.connection.exchange(
                step.api_key,
                step.version,
                body,
                response_version=step.response_version,
                expect_response=step.expect_response,
                timeout_s=step.timeout_s,
            )
            if step.until is None or step.until(raw) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if step.until is not None and not step.until(raw):
            raise AssertionError(f"{self.label}: setup step {step.name} never succeeded: {raw}")
        if step.capture is not None and isinstance(raw, dict) and "<connection>" not in raw:
            step.capture(raw, self.ctx)
            if "node" in self.ctx:
                self.masks.self_node_id = self.ctx["node"]
        return raw

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def strip_token(data: Any, prefix: str) -> Any:
    """Topic and group names carry the run's token (``<token>-name``); drop it so that
    differences read the same in every run."""
    if isinstance(data, dict):
        return {strip_token(k, prefix): strip_token(v, prefix) for k, v in data.items()}
    if isinstance(data, list):
        return [strip_token(item, prefix) for item in data]
    if isinstance(data, str):
        return data.replace(prefix, "")
    return data


def run_sessions(
    sessions: list[Session],
    kafka: Broker,
    tidelog: Broker,
    only: str | None = None,
    token: str = "",
) -> list[ExchangeResult]:
    results: list[ExchangeResult] = []
    seen: set[str] = set()
    for session in sessions:
        if only is not None and not session.name.startswith((only, "bootstrap")):
            continue
        try:
            for step in session.steps:
                name = f"{session.name}.{step.name}"
                if step.compare:
                    if name in seen:
                        raise ValueError(f"duplicate exchange name {name}")
                    seen.add(name)
                raw_k = kafka.run(step)
                raw_t = tidelog.run(step)
                if not step.compare:
                    continue
                masked_k = kafka.masks.apply(raw_k)
                masked_t = tidelog.masks.apply(raw_t)
                if step.transform is not None:
                    masked_k, masked_t = step.transform(masked_k, masked_t)
                masked_k = strip_token(masked_k, f"{token}-")
                masked_t = strip_token(masked_t, f"{token}-")
                differences = [
                    Difference(name, path, a, b) for path, a, b in diff(masked_k, masked_t)
                ]
                results.append(
                    ExchangeResult(name, step.api_key, step.version, raw_k, raw_t, differences)
                )
        finally:
            kafka.close()
            tidelog.close()
    return results
