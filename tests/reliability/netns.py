"""Network namespaces for fault injection (issue 16, a start): nodes joined by veth pairs to a
bridge that lives in its own hub namespace, so nothing touches the host's network.

    with Network(["zk", "b1", "b2"]) as net:
        process = net.popen("b1", [...])      # runs inside b1's namespace (ip netns exec)
        net.cut("b1", "zk")                   # b1 -> zk packets dropped (one direction)
        net.heal()

Addresses are 10.77.0.<n>/24 inside the namespaces only. Partitions are blackhole routes in the
sender's namespace (no iptables/nft needed): `cut(a, b)` drops a's packets to b, which is an
asymmetric partition; `cut_both` drops both directions; `isolate(a)` cuts a from everyone.
`lossy(a, percent)` drops that share of a's packets, in and out, at random (nftables'
numgen; `tc netem` is missing from this kernel) and `slow(a)` shapes a's outgoing link with a
token bucket (tc tbf), which queues packets: latency in seconds, not netem's fixed delay.
Every namespace is deleted on exit, even after a failure (deleting a namespace destroys its
veth ends; killing the processes inside is the caller's job, by PID).
"""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Sequence
from types import TracebackType
from typing import Any

SUBNET = "10.77.0"


class NamespacesUnavailable(RuntimeError):
    """The kernel (or the lack of root) refuses network namespaces."""


def _ip(*args: str) -> None:
    completed = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if completed.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {completed.stderr.strip()}")


class Network:
    def __init__(self, nodes: Sequence[str]) -> None:
        self.tag = "tl" + secrets.token_hex(3)  # unique per run: parallel runs never collide
        self.nodes = list(nodes)
        self.hub = f"{self.tag}-hub"
        self.address = {node: f"{SUBNET}.{index + 1}" for index, node in enumerate(self.nodes)}
        self._created: list[str] = []
        self._cuts: set[tuple[str, str]] = set()
        self._lossy: set[str] = set()
        self._slow: set[str] = set()

    def namespace(self, node: str) -> str:
        return f"{self.tag}-{node}"

    def __enter__(self) -> Network:
        try:
            self._add_namespace(self.hub)
        except RuntimeError as error:
            raise NamespacesUnavailable(str(error)) from error
        try:
            _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.hub, "link", "set", "br0", "up")
            for index, node in enumerate(self.nodes):
                namespace = self.namespace(node)
                self._add_namespace(namespace)
                hub_end = f"v{index}"
                _ip("-n", self.hub, "link", "add", hub_end, "type", "veth", "peer", "name",
                    "eth0", "netns", namespace)
                _ip("-n", self.hub, "link", "set", hub_end, "master", "br0", "up")
                _ip("-n", namespace, "addr", "add", f"{self.address[node]}/24", "dev", "eth0")
                _ip("-n", namespace, "link", "set", "eth0", "up")
                _ip("-n", namespace, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise
        return self

    def _add_namespace(self, name: str) -> None:
        _ip("netns", "add", name)
        self._created.append(name)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        for name in reversed(self._created):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
        self._created.clear()

    # --- processes ----------------------------------------------------------------------------
    def popen(self, node: str, argv: Sequence[str], **options: Any) -> subprocess.Popen[Any]:
        """`ip netns exec` execs the command: the Popen's pid is the process itself."""
        return subprocess.Popen(["ip", "netns", "exec", self.namespace(node), *argv], **options)

    def run(
        self, node: str, argv: Sequence[str], **options: Any
    ) -> subprocess.CompletedProcess[Any]:
        return subprocess.run(["ip", "netns", "exec", self.namespace(node), *argv], **options)

    # --- nemesis ------------------------------------------------------------------------------
    def cut(self, source: str, target: str) -> None:
        """Drop every packet `source` sends to `target` (one direction)."""
        if (source, target) not in self._cuts:
            _ip("-n", self.namespace(source), "route", "add", "blackhole",
                f"{self.address[target]}/32")
            self._cuts.add((source, target))

    def cut_both(self, first: str, second: str) -> None:
        self.cut(first, second)
        self.cut(second, first)

    def isolate(self, node: str) -> None:
        for other in self.nodes:
            if other != node:
                self.cut_both(node, other)

    def lossy(self, node: str, percent: int) -> None:
        """Drop `percent`% of the node's packets in each direction, each packet at random."""
        if node in self._lossy:
            return
        drop = f"numgen random mod 100 < {percent} drop;"
        rules = (
            "table inet tidelog_nemesis {\n"
            f"  chain in {{ type filter hook input priority 0; {drop} }}\n"
            f"  chain out {{ type filter hook output priority 0; {drop} }}\n"
            "}\n")
        self._exec(node, ["nft", "-f", "-"], rules)
        self._lossy.add(node)

    def slow(self, node: str, rate: str = "200kbit") -> None:
        """A token-bucket link out of the node: packets queue (up to 2 s) behind the rate."""
        if node not in self._slow:
            self._exec(node, ["tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", rate,
                              "burst", "16kb", "latency", "2s"])
            self._slow.add(node)

    def _exec(self, node: str, argv: list[str], stdin: str | None = None) -> None:
        completed = self.run(node, argv, input=stdin, capture_output=True, text=True, timeout=30)
        if completed.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} in {node}: {completed.stderr.strip()}")

    @property
    def partitioned(self) -> bool:
        return bool(self._cuts)

    def heal(self) -> None:
        for source, target in sorted(self._cuts):
            _ip("-n", self.namespace(source), "route", "del", "blackhole",
                f"{self.address[target]}/32")
        self._cuts.clear()
        for node in sorted(self._lossy):
            self._exec(node, ["nft", "delete", "table", "inet", "tidelog_nemesis"])
        self._lossy.clear()
        for node in sorted(self._slow):
            self._exec(node, ["tc", "qdisc", "del", "dev", "eth0", "root"])
        self._slow.clear()
