"""Run the differential sessions against two running brokers and print the differences.

    python -m tests.differential.run --kafka 127.0.0.1:9092 --tidelog 127.0.0.1:9093 \
        [--json report.json] [--only SESSION-PREFIX] [--show EXCHANGE]

Prints every difference as a table (exchange, field path, Kafka value, Tidelog value, and the
verdict from known.KNOWN when the difference is documented), then the totals line
``differential: N exchanges, D differences (K known)``. Exit status 0 when the differences are
exactly the documented ones, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from .compare import BrokerMasks, Difference, render
from .harness import Broker, ExchangeResult, run_sessions
from .known import KNOWN, Known, lookup
from .scripts import sessions


@dataclass
class Report:
    results: list[ExchangeResult]
    seconds: float
    partial: bool = False

    @property
    def differences(self) -> list[Difference]:
        return [d for r in self.results for d in r.differences]

    @property
    def found(self) -> set[tuple[str, str, str, str]]:
        return {d.key for d in self.differences}

    @property
    def new(self) -> list[Difference]:
        """Differences nobody documented (a regression, or a new script)."""
        return [d for d in self.differences if lookup(d.key) is None]

    @property
    def gone(self) -> list[Known]:
        """Documented differences that did not happen (fixed, or changed shape); only
        entries naming an exchange that ran, and none at all for a partial run (--only)."""
        if self.partial:
            return [k for k in KNOWN.values() if k.exchange in {r.name for r in self.results}
                    and not any(lookup(key) is k for key in self.found)]
        exchanges = {r.name for r in self.results}
        used = {id(lookup(key)) for key in self.found}
        return [
            k
            for k in KNOWN.values()
            if id(k) not in used and any(fnmatchcase(e, k.exchange) for e in exchanges)
        ]

    @property
    def known_count(self) -> int:
        return sum(1 for d in self.differences if lookup(d.key) is not None)

    def totals(self) -> str:
        return (
            f"differential: {len(self.results)} exchanges, {len(self.differences)} differences "
            f"({self.known_count} known)"
        )

    def table(self) -> str:
        rows = [("exchange", "field", "kafka", "tidelog", "verdict")]
        for d in self.differences:
            known = lookup(d.key)
            verdict = "NEW" if known is None else known.verdict
            rows.append((d.exchange, d.path, render(d.kafka), render(d.tidelog), verdict))
        for k in self.gone:
            rows.append((k.exchange, k.path, k.kafka, k.tidelog, "GONE (documented, not seen)"))
        widths = [min(max(len(r[i]) for r in rows), 60) for i in range(5)]
        lines = []
        for row in rows:
            lines.append(
                "  ".join(_cut(cell, widths[i]).ljust(widths[i]) for i, cell in enumerate(row))
            )
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "exchanges": len(self.results),
            "differences": len(self.differences),
            "known": self.known_count,
            "new": [d.key for d in self.new],
            "gone": [k.key for k in self.gone],
            "seconds": round(self.seconds, 2),
            "results": [
                {
                    "name": r.name,
                    "api_key": r.api_key,
                    "version": r.version,
                    "kafka": r.kafka,
                    "tidelog": r.tidelog,
                    "differences": [
                        {
                            "path": d.path,
                            "kafka": render(d.kafka),
                            "tidelog": render(d.tidelog),
                            "verdict": _verdict(d),
                        }
                        for d in r.differences
                    ],
                }
                for r in self.results
            ],
        }


def _verdict(difference: Difference) -> str:
    known = lookup(difference.key)
    return "NEW" if known is None else known.verdict


def _cut(text: str, width: int) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 3] + "..."


def compare_brokers(
    kafka: str, tidelog: str, token: str | None = None, only: str | None = None
) -> Report:
    token = token or f"d{secrets.token_hex(3)}"
    now_ms = int(time.time() * 1000)
    started = time.monotonic()
    results = run_sessions(
        sessions(token),
        Broker("kafka", kafka, BrokerMasks(now_ms)),
        Broker("tidelog", tidelog, BrokerMasks(now_ms)),
        only=only,
        token=token,
    )
    return Report(results, time.monotonic() - started, partial=only is not None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.differential.run")
    parser.add_argument("--kafka", required=True, help="Apache Kafka bootstrap HOST:PORT")
    parser.add_argument("--tidelog", required=True, help="Tidelog bootstrap HOST:PORT")
    parser.add_argument("--json", type=Path, help="write the full report (raw answers too)")
    parser.add_argument("--only", help="run only the sessions whose name starts with this")
    parser.add_argument("--show", help="print both raw answers of the exchanges matching this")
    parser.add_argument("--token", help="name prefix of the topics and groups (default random)")
    args = parser.parse_args(argv)
    report = compare_brokers(args.kafka, args.tidelog, args.token, args.only)
    print(report.table())
    if args.show:
        for r in report.results:
            if args.show in r.name:
                print(f"\n== {r.name} (api {r.api_key} v{r.version})")
                print("kafka:  ", json.dumps(r.kafka, default=str))
                print("tidelog:", json.dumps(r.tidelog, default=str))
    if args.json:
        args.json.write_text(json.dumps(report.to_json(), indent=1, default=str))
    print(report.totals() + f" in {report.seconds:.1f}s")
    if report.new or report.gone:
        print(f"{len(report.new)} new, {len(report.gone)} documented but not seen")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
