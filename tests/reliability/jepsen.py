"""The mixed-nemesis run (issue 16): ZooKeeper and 3 or 5 brokers, each in its own network
namespace (netns.py), a client namespace running jepsen_workload.py, and a seeded schedule of
faults mixed at random; then heal, wait for full ISRs, read everything, stop the brokers, and
check (jepsen_checker.py) the history and the replicas' logs.

    result = run(Path("out"), seed=7, seconds=300, brokers=3)
    result.analysis.ok(), result.report_path

Nemeses (each applied for a few seconds, then healed, then a quiet spell):
  kill           SIGKILL a broker (the partition leader half the time), restart it at heal
  pause          SIGSTOP a broker past the ZooKeeper session timeout, SIGCONT at heal
  isolate        one broker cut from everyone (ZooKeeper, brokers, clients)
  leader-zk      a broker cut from ZooKeeper only: clients and peers still reach it
  majority       brokers split into a minority and a majority (ZooKeeper with the majority)
  asymmetric     a broker's packets to everyone dropped; what it receives still arrives
  bridge         two halves that only one broker sees both of
  zk-isolated    ZooKeeper cut from every broker
  loss           10% or 30% of a broker's packets dropped at random, both ways (nftables)
  slow           a broker's outgoing link shaped to 200 kbit/s (tc tbf: packets queue)
  disk-full      a broker's data directory (its own size-limited tmpfs) filled: ENOSPC
  fsync-eio      a broker's fsync/fdatasync fail with EIO (LD_PRELOAD shim); at heal the
                 broker is restarted, as an operator replaces a failed disk (a log whose fsync
                 failed stays offline until then, as Kafka's log dir does)
A quarter of the faults come with a second one of another kind at the same time.
Not here: `tc netem` delay (this kernel has no sch_netem: "Specified qdisc kind is unknown";
`slow` queues packets instead of delaying each by a fixed time).

Writes, in the output directory: history.jsonl (every operation), faults.json, report.txt (the
counts, the seed, the faults with recovery times) and timeline.png (acknowledged sends per
second with each fault shaded), plus each process's log.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reliability.disk_faults import BrokerDisks
from reliability.jepsen_checker import MUST_BE_ZERO, Analysis, analyse
from reliability.netns import Network
from tidelog.cluster.zookeeper_server import (
    DEBIAN_ZOOKEEPER_JAR,
    JVM_OPTIONS,
    MAIN_CLASS,
    ZooKeeperConfig,
)

ZK_PORT = 2181
BROKER_PORT = 9092
SESSION_TIMEOUT_MS = 3000
TOPIC = "jepsen"
PARTITIONS = 3
REPLICATION_FACTOR = 3
WORKLOAD = Path(__file__).with_name("jepsen_workload.py")
NEMESES = ("kill", "pause", "isolate", "leader-zk", "majority", "asymmetric", "bridge",
           "zk-isolated", "loss", "slow", "disk-full", "fsync-eio")
DISK_NEMESES = {"disk-full", "fsync-eio"}
TOGETHER = 0.25  # the share of faults that come with a second one of another kind
FAULT_S = (4.0, 9.0)  # how long one fault lasts (uniform)
QUIET_S = (4.0, 7.0)  # healed time between faults

METADATA = r"""
import json, sys
from confluent_kafka.admin import AdminClient
admin = AdminClient({"bootstrap.servers": sys.argv[1], "log_level": 0})
try:
    topic = admin.list_topics(sys.argv[2], timeout=5).topics[sys.argv[2]]
    print(json.dumps({str(p): [m.leader, list(m.isrs)] for p, m in topic.partitions.items()}))
except Exception as error:
    print(json.dumps({"error": str(error)}))
"""

CREATE = r"""
import sys, time
from confluent_kafka.admin import AdminClient, NewTopic
admin = AdminClient({"bootstrap.servers": sys.argv[1], "log_level": 0})
deadline = time.monotonic() + 90
while True:
    try:
        admin.create_topics([NewTopic(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                                      config={"min.insync.replicas": "2"})])[sys.argv[2]].result(20)
        break
    except Exception as error:
        if "already exists" in str(error):
            break
        if time.monotonic() > deadline:
            raise
        time.sleep(0.5)
"""


@dataclass
class Fault:
    kind: str
    start: float  # seconds since the workload started
    end: float = 0.0
    detail: str = ""
    recovered_s: float | None = None  # heal -> every partition acknowledged a send again
    stall_s: float = 0.0  # the longest gap between one partition's acks overlapping the fault


@dataclass
class Result:
    seed: int
    brokers: int
    seconds: float
    analysis: Analysis
    faults: list[Fault] = field(default_factory=list)
    report_path: Path = Path()

    def summary(self) -> str:
        counts = " ".join(f"{name}={self.analysis.counts.get(name, 0)}" for name in MUST_BE_ZERO)
        return (f"seed {self.seed}, {self.brokers} brokers, {self.seconds:.0f} s, "
                f"{len(self.faults)} faults; acknowledged={self.analysis.counts['acknowledged']} "
                f"read={self.analysis.counts['read']} {counts}")


class NetnsCluster:
    """ZooKeeper and brokers b1..bN in namespaces; processes started, signalled and stopped by
    PID (`ip netns exec` execs, so a Popen's pid is the process itself)."""

    def __init__(self, net: Network, directory: Path, brokers: int,
                 disks: BrokerDisks | None = None) -> None:
        self.net, self.directory, self.count = net, directory, brokers
        self.disks = disks
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.paused: set[str] = set()

    def broker_address(self, node_id: int) -> str:
        return f"{self.net.address[f'b{node_id}']}:{BROKER_PORT}"

    @property
    def bootstrap(self) -> str:
        return ",".join(self.broker_address(n) for n in range(1, self.count + 1))

    def start_zookeeper(self) -> None:
        zk_dir = self.directory / "zk"
        zk_dir.mkdir(exist_ok=True)
        config = ZooKeeperConfig(data_dir=zk_dir, port=ZK_PORT).render().replace(
            "clientPortAddress=127.0.0.1", f"clientPortAddress={self.net.address['zk']}")
        (zk_dir / "zoo.cfg").write_text(config)
        self.processes["zk"] = self.net.popen(
            "zk", ["java", *JVM_OPTIONS, "-cp", str(DEBIAN_ZOOKEEPER_JAR), MAIN_CLASS,
                   str(zk_dir / "zoo.cfg")],
            stdout=(self.directory / "zk.log").open("ab"), stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)

    def start_broker(self, node_id: int, timeout_s: float = 120) -> None:
        """Start the broker unless it runs already (two heals may both restart one broker)."""
        node = f"b{node_id}"
        running = self.processes.get(node)
        if running is not None and running.poll() is None:
            return
        env = {**os.environ, **(self.disks.broker_env(node) if self.disks else {})}
        process = self.net.popen(node, [
            sys.executable, "-m", "tidelog.cli.main", "serve",
            "--data-dir", str(self.directory / node), "--listen", self.broker_address(node_id),
            "--node-id", str(node_id), "--zookeeper", f"{self.net.address['zk']}:{ZK_PORT}",
            "--metrics", "off",
            "--set", f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
            "--set", "replica.lag.time.max.ms=2000",
            "--set", "default.replication.factor=3",
            "--set", "log.durability=sync",
            "--set", "group.initial.rebalance.delay.ms=0",
        ], stdout=subprocess.PIPE, stderr=(self.directory / f"{node}.log").open("ab"),
            stdin=subprocess.DEVNULL, env=env)
        self.processes[node] = process
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            if not selector.select(timeout_s):
                raise AssertionError(f"{node} did not start within {timeout_s:.0f}s")
        line = process.stdout.readline()
        if not line.startswith(b"tidelog ready on "):
            raise AssertionError(f"{node} did not start: {line!r}; see {node}.log")

    def signal(self, node: str, signum: int) -> None:
        process = self.processes.get(node)
        if process is not None and process.poll() is None:
            process.send_signal(signum)

    def kill(self, node: str) -> None:
        process = self.processes.get(node)
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(30)

    def stop_all(self) -> None:
        for node in list(self.paused):
            self.signal(node, signal.SIGCONT)
        self.paused.clear()
        for node, process in reversed(list(self.processes.items())):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)
            self.processes.pop(node, None)

    def metadata(self) -> dict[str, Any]:
        """partition -> [leader, isr] from one Metadata answer (via the client namespace)."""
        completed = self.net.run("client", [sys.executable, "-c", METADATA, self.bootstrap,
                                            TOPIC], capture_output=True, text=True, timeout=30)
        try:
            return dict(json.loads(completed.stdout.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            return {"error": completed.stderr[-300:]}


def _leaders(cluster: NetnsCluster) -> list[int]:
    answer = cluster.metadata()
    return sorted({int(v[0]) for k, v in answer.items() if k != "error" and int(v[0]) > 0})


def wait_healthy(cluster: NetnsCluster, timeout_s: float) -> None:
    """Every partition with a leader and a full ISR, in one Metadata answer."""
    deadline = time.monotonic() + timeout_s
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        last = cluster.metadata()
        if "error" not in last and len(last) == PARTITIONS and all(
            leader > 0 and len(isr) == REPLICATION_FACTOR for leader, isr in last.values()
        ):
            return
        time.sleep(1)
    raise AssertionError(f"cluster not healthy within {timeout_s:.0f}s: {last}")


class Nemesis:
    """Applies and heals one fault at a time; every choice comes from the seeded rng."""

    def __init__(self, cluster: NetnsCluster, rng: random.Random) -> None:
        self.cluster, self.rng = cluster, rng
        self.net = cluster.net
        self.brokers = [f"b{n}" for n in range(1, cluster.count + 1)]
        self._heal_actions: list[Any] = []

    def _target(self) -> str:
        """The leader of some partition half the time (where faults hurt most), else any."""
        if self.rng.random() < 0.5:
            leaders = _leaders(self.cluster)
            if leaders:
                return f"b{self.rng.choice(leaders)}"
        return self.rng.choice(self.brokers)

    def apply(self, kind: str) -> str:
        net, rng = self.net, self.rng
        if kind == "kill":
            node = self._target()
            self.cluster.kill(node)
            self._heal_actions.append(lambda: self.cluster.start_broker(int(node[1:])))
            return node
        if kind == "pause":
            node = self._target()
            self.cluster.signal(node, signal.SIGSTOP)
            self.cluster.paused.add(node)

            def resume() -> None:
                self.cluster.signal(node, signal.SIGCONT)
                self.cluster.paused.discard(node)

            self._heal_actions.append(resume)
            return node
        if kind == "isolate":
            node = self._target()
            net.isolate(node)
            return node
        if kind == "leader-zk":
            node = self._target()
            net.cut_both(node, "zk")
            return node
        if kind == "majority":
            shuffled = rng.sample(self.brokers, len(self.brokers))
            minority = shuffled[: (len(shuffled) - 1) // 2]
            majority = shuffled[len(minority):]
            for small in minority:
                for other in [*majority, "zk"]:
                    net.cut_both(small, other)
            return f"minority {minority} | majority {majority} + zk"
        if kind == "asymmetric":
            node = self._target()
            for other in self.net.nodes:
                if other != node:
                    net.cut(node, other)
            return f"{node} -> everyone dropped"
        if kind == "bridge":
            shuffled = rng.sample(self.brokers, len(self.brokers))
            bridge, rest = shuffled[0], shuffled[1:]
            half = len(rest) // 2
            left, right = [*rest[:half], "zk"], rest[half:]
            for a in left:
                for b in right:
                    net.cut_both(a, b)
            return f"{left} <- {bridge} -> {right}"
        if kind == "zk-isolated":
            for broker in self.brokers:
                net.cut_both("zk", broker)
            return "zk"
        if kind == "loss":
            node, percent = self._target(), rng.choice((10, 30))
            net.lossy(node, percent)
            return f"{node} {percent}%"
        if kind == "slow":
            node = self._target()
            net.slow(node)
            return node
        if kind in DISK_NEMESES:
            return self._disk_fault(kind)
        raise ValueError(kind)

    def _disk_fault(self, kind: str) -> str:
        disks = self.cluster.disks
        assert disks is not None, "disk nemeses need run() to mount the brokers' disks"
        node = self._target()
        if kind == "disk-full":
            disks.fill(node)
            self._heal_actions.append(lambda: disks.drain(node))
            return node
        disks.fail_fsync(node)

        def replace_disk() -> None:
            disks.restore_fsync(node)
            self.cluster.kill(node)
            self.cluster.start_broker(int(node[1:]))

        self._heal_actions.append(replace_disk)
        return node

    def heal(self) -> None:
        """Network first, then the other faults undone newest first (a broker killed while its
        disk was full restarts after the disk was drained)."""
        self.net.heal()
        actions, self._heal_actions = self._heal_actions, []
        for action in reversed(actions):
            action()


def _run_workload(cluster: NetnsCluster, seconds: float, history: Path) -> subprocess.Popen[str]:
    """jepsen_workload.py in the client namespace; its processes write history/<name>.jsonl."""
    return cluster.net.popen(
        "client", [sys.executable, str(WORKLOAD), cluster.bootstrap, TOPIC, str(PARTITIONS),
                   str(seconds), str(history)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=(cluster.directory / "workload.log").open("ab"), text=True)


def _read_line(process: subprocess.Popen[str], timeout_s: float) -> dict[str, Any]:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            raise AssertionError(f"the workload said nothing within {timeout_s:.0f}s")
    line = process.stdout.readline()
    if not line:
        raise AssertionError("the workload exited early; see workload.log")
    return dict(json.loads(line))


def replica_logs(directory: Path, brokers: int) -> dict[str, dict[int, dict[int, str]]]:
    from replication.harness import replica_log

    return {
        f"b{n}": {
            p: {o: v.decode() for o, v in replica_log(directory / f"b{n}", TOPIC, p).items()}
            for p in range(PARTITIONS)
        }
        for n in range(1, brokers + 1)
    }


def run(directory: Path, *, seed: int, seconds: float, brokers: int = 3,
        nemeses: tuple[str, ...] = NEMESES, progress: bool = False) -> Result:
    if not DEBIAN_ZOOKEEPER_JAR.is_file():
        raise AssertionError(f"{DEBIAN_ZOOKEEPER_JAR} missing: run scripts/setup")
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    nodes = ["zk", *(f"b{n}" for n in range(1, brokers + 1)), "client"]
    faults: list[Fault] = []
    history_dir = directory / "history"
    history_dir.mkdir(exist_ok=True)
    disks = (BrokerDisks(directory, [f"b{n}" for n in range(1, brokers + 1)])
             if DISK_NEMESES & set(nemeses) else None)
    if disks is not None:
        disks.mount()
    try:
        with Network(nodes) as net:
            cluster = NetnsCluster(net, directory, brokers, disks)
            workload: subprocess.Popen[str] | None = None
            try:
                cluster.start_zookeeper()
                for node_id in range(1, brokers + 1):
                    cluster.start_broker(node_id)
                net.run("client", [sys.executable, "-c", CREATE, cluster.bootstrap, TOPIC,
                                   str(PARTITIONS), str(REPLICATION_FACTOR)],
                        check=True, capture_output=True, timeout=120)
                wait_healthy(cluster, 120)
                workload = _run_workload(cluster, seconds, history_dir)
                started = time.monotonic()
                nemesis = Nemesis(cluster, rng)
                time.sleep(rng.uniform(*QUIET_S))
                while time.monotonic() - started < seconds - FAULT_S[1] - 2:
                    kinds = [rng.choice(nemeses)]
                    if len(nemeses) > 1 and rng.random() < TOGETHER:
                        kinds.append(rng.choice([k for k in nemeses if k != kinds[0]]))
                    fault = Fault("+".join(kinds), time.monotonic() - started)
                    fault.detail = "; ".join(nemesis.apply(kind) for kind in kinds)
                    if progress:
                        print(f"  {fault.start:6.1f}s {fault.kind}: {fault.detail}", flush=True)
                    time.sleep(rng.uniform(*FAULT_S))
                    nemesis.heal()
                    fault.end = time.monotonic() - started
                    faults.append(fault)
                    time.sleep(rng.uniform(*QUIET_S))
                finished = _read_line(workload, seconds + 120)  # {"phase": "workload done"}
                assert finished.get("exit_codes") == [0, 0, 0, 0], finished
                wait_healthy(cluster, 120)
                assert workload.stdin is not None
                workload.stdin.write("heal\n")
                workload.stdin.flush()
                done = _read_line(workload, 300)
                assert done.get("done"), done
                wait_healthy(cluster, 60)  # every replica caught up before logs are compared
            finally:
                if workload is not None and workload.poll() is None:
                    workload.kill()
                    workload.wait(10)
                cluster.stop_all()
        history = sorted(
            (json.loads(line) for path in sorted(history_dir.glob("*.jsonl"))
             for line in path.read_text().splitlines() if line),
            key=lambda op: op["t"])
        (directory / "history.jsonl").write_text(
            "".join(json.dumps(op, separators=(",", ":")) + "\n" for op in history))
        analysis = analyse(history, replica_logs(directory, brokers))
    finally:
        if disks is not None:  # after the replicas' logs were read from the tmpfs mounts
            disks.unmount()
    _recovery_times(faults, history)
    result = Result(seed, brokers, seconds, analysis, faults)
    result.report_path = write_report(directory, result, history)
    return result


def _recovery_times(faults: list[Fault], history: list[dict[str, Any]]) -> None:
    acks: dict[int, list[float]] = {}
    for op in history:
        if op["f"] == "send" and op["type"] == "ok":
            acks.setdefault(op["partition"], []).append(op["t"])
    for times in acks.values():
        times.sort()
    for fault in faults:
        resumed = [next((t for t in times if t >= fault.end), None) for times in acks.values()]
        fault.recovered_s = (None if not resumed or None in resumed
                             else round(max(t for t in resumed if t is not None) - fault.end, 3))
        gaps = [b - a for times in acks.values() for a, b in itertools.pairwise(times)
                if b >= fault.start and a <= fault.end]
        fault.stall_s = round(max(gaps, default=0.0), 3)


def write_report(directory: Path, result: Result, history: list[dict[str, Any]]) -> Path:
    faults = [vars(f) for f in result.faults]
    (directory / "faults.json").write_text(json.dumps(faults, indent=1))
    recoveries = sorted(f.recovered_s for f in result.faults if f.recovered_s is not None)
    stalls = sorted(f.stall_s for f in result.faults)
    lines = [
        "Tidelog mixed-nemesis run",
        result.summary(),
        "",
        "counts:",
        *(f"  {name:24} {value}" for name, value in sorted(result.analysis.counts.items())),
        "",
        "recovery (heal -> every partition acknowledges again): "
        + (f"p50 {recoveries[len(recoveries) // 2]:.2f} s, max {recoveries[-1]:.2f} s"
           if recoveries else "none"),
        "longest stall of one partition's acknowledgements overlapping a fault: "
        + (f"p50 {stalls[len(stalls) // 2]:.2f} s, max {stalls[-1]:.2f} s" if stalls else "none"),
        "",
        "faults:",
        *(f"  {f.start:7.1f}-{f.end:7.1f}s {f.kind:12} {f.detail}  (stall {f.stall_s} s, "
          f"all partitions writing {f.recovered_s} s after heal)" for f in result.faults),
    ]
    for name, examples in sorted(result.analysis.examples.items()):
        lines += ["", f"examples of {name}:", *(f"  {e}" for e in examples)]
    report = directory / "report.txt"
    report.write_text("\n".join(lines) + "\n")
    _plot(directory / "timeline.png", result, history)
    return report


def _plot(path: Path, result: Result, history: list[dict[str, Any]]) -> None:
    """Acknowledged, failed and indefinite sends per second, each fault shaded and labelled."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # the plot is a convenience; report.txt has everything
        return
    width = int(max((op["t"] for op in history), default=1)) + 1
    series = {kind: [0] * width for kind in ("ok", "fail", "info")}
    for op in history:
        if op["f"] == "send" and op["type"] in series:
            series[op["type"]][int(op["t"])] += 1
    figure, axes = plt.subplots(figsize=(12, 4))
    for kind, color in (("ok", "tab:green"), ("fail", "tab:red"), ("info", "tab:orange")):
        axes.plot(range(width), series[kind], label=f"send {kind}", color=color, linewidth=1)
    top = max(max(series["ok"], default=1), 1)
    for fault in result.faults:
        axes.axvspan(fault.start, fault.end, color="tab:gray", alpha=0.2)
        axes.text(fault.start, top * 1.02, fault.kind, fontsize=7, rotation=60)
    axes.set_xlabel("seconds")
    axes.set_ylabel("sends per second")
    axes.set_title(f"seed {result.seed}: {result.brokers} brokers, faults shaded", pad=36)
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    """`python -m reliability.jepsen --runs 10 --seconds 1000 --brokers 5` (soak-nemesis)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="soak-nemesis", description="Seeded mixed-nemesis runs; every count must be 0.")
    parser.add_argument("--runs", type=int, default=10, help="how many runs (default 10)")
    parser.add_argument("--seconds", type=float, default=1000, help="each run's length")
    parser.add_argument("--brokers", type=int, choices=(3, 5), default=5)
    parser.add_argument("--seed", type=int, default=None,
                        help="first run's seed (the next runs take seed+1, ...); default random")
    parser.add_argument("--out", type=Path, default=Path("soak-nemesis"),
                        help="directory for each run's history, report and timeline")
    parser.add_argument("--nemeses", default=",".join(NEMESES),
                        help=f"comma-separated subset of {','.join(NEMESES)}")
    args = parser.parse_args(argv)
    first = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    nemeses = tuple(args.nemeses.split(","))
    unknown = set(nemeses) - set(NEMESES)
    if unknown:
        parser.error(f"unknown nemeses {sorted(unknown)}")
    failed = 0
    for number in range(args.runs):
        seed = first + number
        print(f"run {number + 1}/{args.runs}: seed {seed}", flush=True)
        result = run(args.out / f"seed-{seed}", seed=seed, seconds=args.seconds,
                     brokers=args.brokers, nemeses=nemeses, progress=True)
        print(result.summary(), flush=True)
        print(f"  report: {result.report_path}", flush=True)
        failed += not result.analysis.ok()
    print(f"{args.runs - failed}/{args.runs} runs with every count 0")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
