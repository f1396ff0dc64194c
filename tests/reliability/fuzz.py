"""Coverage-guided fuzzing of every decoder with atheris (libFuzzer), one subprocess per target.

    PYTHONPATH=tests .venv/bin/python -m reliability.fuzz --runs 200000        # CI size
    scripts/soak-fuzz                                                          # 20 million

The parent writes each target's seed corpus (fuzz_targets.SEEDS) to <work>/<target>/corpus,
then runs `python -m reliability.fuzz --child <target>` with its share of the executions
(atheris.Fuzz() never returns: libFuzzer exits after -runs=N). The child instruments Tidelog and
kio for coverage, then calls the target on each input: a typed Tidelog error is a normal
outcome; any other exception, a crash of the C decoder, a timeout or an RSS above the limit
makes libFuzzer stop, write the input to <work>/<target>/crash-*, and exit non-zero.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

RSS_LIMIT_MB = 1024
MAX_LEN = 16384
TIMEOUT_S = 60  # per input


@dataclass
class FuzzResult:
    target: str
    runs: int
    seconds: float
    returncode: int
    corpus: int
    output: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.runs > 0

    def line(self) -> str:
        rate = self.runs / self.seconds if self.seconds else 0.0
        status = "ok" if self.ok else f"FAILED (exit {self.returncode})"
        return (f"{self.target:18} {self.runs:>10} runs {self.seconds:7.1f}s "
                f"{rate:8.0f} exec/s corpus {self.corpus:5}  {status}")


def write_seeds(target: str, corpus: Path) -> int:
    from reliability.fuzz_targets import SEEDS

    corpus.mkdir(parents=True, exist_ok=True)
    count = 0
    for seed in SEEDS[target]():
        (corpus / hashlib.sha1(seed).hexdigest()).write_bytes(seed)
        count += 1
    return count


def write_captured(work: Path, targets: list[str], log: bool) -> int:
    """Frames of real clients (capture.py) into the request and produce corpora."""
    from reliability.capture import capture_frames

    frames = capture_frames()
    for target in ("request", "produce"):
        if target not in targets:
            continue
        corpus = work / target / "corpus"
        corpus.mkdir(parents=True, exist_ok=True)
        for frame in frames:
            if target == "produce" and frame[:2] != b"\x00\x00":
                continue
            (corpus / ("client-" + hashlib.sha1(frame).hexdigest())).write_bytes(frame)
    if log:
        print(f"captured {len(frames)} request frames from real clients", flush=True)
    return len(frames)


def _child(target: str, runs: int, corpus: Path, artifacts: Path, max_time: int) -> None:
    import atheris

    with atheris.instrument_imports(include=["tidelog", "kio"]):
        import tidelog.cluster.zk_payloads
        import tidelog.coordinator.records
        import tidelog.protocol.codec
        import tidelog.protocol.fetch_client
        import tidelog.protocol.wire
        import tidelog.records.batch
        import tidelog.records.columnar
        import tidelog.records.record
        import tidelog.storage.producer_state  # noqa: F401
    from reliability.fuzz_targets import EXPECTED, TARGETS

    function = TARGETS[target]
    if target == "request":
        from tidelog.protocol.codec import prepare

        prepare()  # load every schema now, as the broker does at start-up

    def one_input(data: bytes) -> None:
        try:
            function(data)
        except EXPECTED:
            pass

    args = [sys.argv[0], f"-runs={runs}", f"-rss_limit_mb={RSS_LIMIT_MB}",
            f"-max_len={MAX_LEN}", f"-timeout={TIMEOUT_S}", f"-artifact_prefix={artifacts}/",
            "-print_final_stats=1", str(corpus)]
    if max_time:
        args.insert(1, f"-max_total_time={max_time}")
    atheris.Setup(args, one_input)
    atheris.Fuzz()


def run_target(target: str, runs: int, work: Path, max_time: int = 0) -> FuzzResult:
    directory = work / target
    corpus = directory / "corpus"
    if not corpus.exists() or not any(corpus.iterdir()):
        write_seeds(target, corpus)
    tests_dir = Path(__file__).resolve().parent.parent
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tests_dir), *filter(None, [env.get("PYTHONPATH")])])
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-m", "reliability.fuzz", "--child", target, "--runs", str(runs),
         "--work", str(work), "--max-time", str(max_time)],
        capture_output=True, text=True, env=env, errors="replace",
        timeout=max(600, max_time * 2 + 600),
    )
    seconds = time.monotonic() - started
    output = completed.stdout + completed.stderr
    done = re.search(r"stat::number_of_executed_units: (\d+)", output) or re.search(
        r"Done (\d+) runs", output)
    return FuzzResult(target, int(done.group(1)) if done else 0, seconds, completed.returncode,
                      sum(1 for _ in corpus.iterdir()), output)


def run_all(runs: int, work: Path, targets: list[str], jobs: int, max_time: int = 0,
            log: bool = True) -> list[FuzzResult]:
    """`runs` executions split evenly over `targets`, `jobs` targets at a time."""
    from concurrent.futures import ThreadPoolExecutor

    share = max(1, runs // len(targets))
    for target in targets:  # seeds in this process (Hypothesis draws the request bodies)
        corpus = work / target / "corpus"
        if not corpus.exists() or not any(corpus.iterdir()):
            write_seeds(target, corpus)
    if {"request", "produce"} & set(targets) and os.environ.get("TIDELOG_FUZZ_CAPTURE") != "0":
        write_captured(work, targets, log)
    with ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(lambda t: run_target(t, share, work, max_time), targets))
    if log:
        for result in results:
            print(result.line(), flush=True)
        total = sum(r.runs for r in results)
        print(f"{'total':18} {total:>10} runs", flush=True)
    return results


def main() -> None:
    from reliability.fuzz_targets import TARGETS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int,
                        default=int(os.environ.get("TIDELOG_FUZZ_RUNS", "200000")),
                        help="executions in total, split evenly over the targets")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--max-time", type=int, default=0, help="seconds per target (0: none)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        directory = args.work / args.child
        _child(args.child, args.runs, directory / "corpus", directory, args.max_time)
        return
    import tempfile

    work = args.work or Path(tempfile.mkdtemp(prefix="tidelog-fuzz-"))
    print(f"fuzzing {args.runs} executions over {args.targets} in {work}", flush=True)
    results = run_all(args.runs, work, args.targets.split(","), args.jobs, args.max_time)
    failed = [r for r in results if not r.ok]
    for result in failed:
        print(f"--- {result.target} ---\n{result.output[-6000:]}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
