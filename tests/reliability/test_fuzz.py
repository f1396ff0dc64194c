"""Coverage-guided fuzzing of every decoder (fuzz.py, fuzz_targets.py): 200,000 executions in
total in CI; TIDELOG_FUZZ_RUNS=20000000 (or scripts/soak-fuzz) for the soak. Plus the
regressions the fuzzer found, as plain tests.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reliability.fuzz import run_all
from reliability.fuzz_targets import EXPECTED, SEEDS, TARGETS

pytest.importorskip("atheris", reason="atheris is in the dev extra: scripts/setup installs it")


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_seeds_decode_or_raise_typed_errors(target: str) -> None:
    """Every seed goes through its target without an untyped exception (no fuzzing)."""
    seeds = list(SEEDS[target]())
    assert seeds
    for seed in seeds:
        try:
            TARGETS[target](seed)
        except EXPECTED:
            pass


def test_the_harness_reports_an_untyped_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A planted bug (fuzz_targets, TIDELOG_FUZZ_SELFTEST) must fail the run with its input."""
    monkeypatch.setenv("TIDELOG_FUZZ_SELFTEST", "1")  # read by the child process
    (tmp_path / "selftest" / "corpus").mkdir(parents=True)
    (tmp_path / "selftest" / "corpus" / "seed").write_bytes(b"abc")
    (result,) = run_all(200_000, tmp_path, ["selftest"], jobs=1, log=False)
    assert not result.ok
    assert "planted untyped error" in result.output
    assert list((tmp_path / "selftest").glob("crash-*"))


def test_fuzz_every_decoder(tmp_path: Path) -> None:
    runs = int(os.environ.get("TIDELOG_FUZZ_RUNS", "200000"))
    results = run_all(runs, tmp_path, sorted(TARGETS), jobs=2)
    failed = [result for result in results if not result.ok]
    assert not failed, "\n".join(
        f"{r.line()}\n{r.output[-4000:]}" for r in failed
    )
    assert sum(r.runs for r in results) >= runs - len(TARGETS)
    assert any(p.name.startswith("client-") for p in (tmp_path / "request" / "corpus").iterdir())
