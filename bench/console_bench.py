"""Web console benchmark (issue 15, docs/benchmarks.md "Web console"): browsing a 10 M-record
partition through the API, and rendering 1,000 messages of 1 KiB in Chromium.

    PYTHONPATH=src .venv/bin/python bench/console_bench.py browse [--records 10000000]
        [--requests 20] [--data-dir DIR]
    PYTHONPATH=src .venv/bin/python bench/console_bench.py render [--runs 20]

browse: a fresh `tidelog serve` (or the one kept in --data-dir: the partition is built once),
one topic of one partition filled with `--records` small JSON records (about 40 bytes) through
the broker's produce path by pre-built Produce frames on a raw socket (bench/broker_raw.py's
fast path: one 10,000-record batch encoded once, its timestamps and CRC patched per frame, so
record n has timestamp T0 + n ms), then `tidelog console` in front of it; each kind of page
(100 messages from a random offset, from a random timestamp, newest, oldest) is requested
`--requests` times through HTTP, signed in, as the browser does. Reported per kind: min,
median, p95, max (ms, end to end), and that every page held the 100 expected offsets.

render: a fresh broker and console, a topic of 1,000 JSON messages of 1 KiB, then
console/web/e2e/render.bench.mjs in headless Chromium (`--runs` loads of the 1,000 rows, each
timed from the API's answer to the next paint). Needs the built frontend (scripts/build-console)
and Debian's chromium.

Both stop on their own deadline (the machine is shared): the fill at 90 s, each phase at 60 s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker_bench import Server, start_broker  # a sibling script, not a package

from tidelog.records.batch import CRC_START, crc32c
from tidelog.records.builder import NewRecord, build_batch

REPO = Path(__file__).resolve().parent.parent
TOPIC = "console-bench-10m"
PER_BATCH = 10_000
T0 = 1_700_000_000_000  # record n's timestamp is T0 + n ms
PASSWORD = "bench"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "min": round(min(values), 1),
            "median": round(statistics.median(values), 1),
            "p95": round(percentile(values, 0.95), 1), "max": round(max(values), 1)}


# --- the 10 M partition ------------------------------------------------------------------------
def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _frame(topic: str, batch: bytes, correlation: int) -> bytes:
    """A Produce v9 request (acks=1) carrying `batch` for partition 0, size prefix included."""
    name = topic.encode()
    body = (
        struct.pack(">hhih", 0, 9, correlation, 5) + b"bench" + b"\x00"
        + b"\x00" + struct.pack(">hi", 1, 30_000)
        + _uvarint(2) + _uvarint(len(name) + 1) + name
        + _uvarint(2) + struct.pack(">i", 0) + _uvarint(len(batch) + 1) + batch
        + b"\x00" + b"\x00" + b"\x00"
    )  # fmt: skip
    return struct.pack(">i", len(body)) + body


def fill(host: str, port: int, topic: str, records: int, deadline_s: float = 90.0) -> float:
    """Produce `records` records (batches of 10,000, 8 requests in flight); returns seconds."""
    template = build_batch([NewRecord(value=json.dumps({"id": i, "kind": "event", "ok": i % 2 == 0})
                                      .encode(), timestamp_ms=T0 + i) for i in range(PER_BATCH)],
                           now_ms=T0)
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    reader = sock.makefile("rb", buffering=1 << 20)
    frames = records // PER_BATCH
    sent = answered = 0
    start = time.perf_counter()
    while answered < frames:
        while sent < frames and sent - answered < 8:
            batch = bytearray(template)
            base = T0 + sent * PER_BATCH
            struct.pack_into(">qq", batch, 27, base, base + PER_BATCH - 1)
            struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[CRC_START:]))
            sock.sendall(_frame(topic, bytes(batch), sent))
            sent += 1
        size = struct.unpack(">i", reader.read(4))[0]
        answer = reader.read(size)
        if len(answer) != size:
            raise RuntimeError("the broker closed the connection")
        answered += 1
        if time.perf_counter() - start > deadline_s:
            raise RuntimeError(f"fill passed its {deadline_s:.0f} s deadline at "
                               f"{answered * PER_BATCH:,} records")
    sock.close()
    return time.perf_counter() - start


def end_offset(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-probe"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1])
    finally:
        consumer.close()


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)


# --- the console -------------------------------------------------------------------------------
class Console:
    def __init__(self, bootstrap: str, tmp: Path) -> None:
        config = tmp / "console.toml"
        config.write_text(f'password = "{PASSWORD}"\naudit_log = "{tmp / "audit.jsonl"}"\n')
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tidelog.cli.main", "console", "--bootstrap", bootstrap,
             "--listen", "127.0.0.1:0", "--config", str(config)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode()
        if "tidelog console on" not in line:
            self.stop()
            raise RuntimeError(f"console did not start: {line!r}")
        self.url = line.rsplit(" ", 1)[1].strip()

    def client(self) -> httpx.Client:
        client = httpx.Client(base_url=self.url, timeout=60)
        csrf = client.get("/api/session").json()["csrf_token"]
        r = client.post("/api/session", json={"user": "bench", "password": PASSWORD},
                        headers={"X-CSRF-Token": csrf})
        r.raise_for_status()
        client.headers["X-CSRF-Token"] = r.json()["csrf_token"]
        return client

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(15)


def browse(args: argparse.Namespace) -> dict[str, object]:
    tmp = Path(tempfile.mkdtemp(prefix="console-bench-"))
    data_dir = Path(args.data_dir) if args.data_dir else tmp / "data"
    broker = start_broker(data_dir)
    console: Console | None = None
    result: dict[str, object] = {"records": args.records}
    try:
        bootstrap = broker.address
        have = 0
        try:
            have = end_offset(bootstrap, TOPIC)
        except Exception:  # no such topic yet
            have = 0
        if have < args.records:
            if have == 0:
                create_topic(bootstrap, TOPIC)
            seconds = fill(broker.host, broker.port, TOPIC, args.records - have)
            result["fill_s"] = round(seconds, 1)
            result["fill_records_per_s"] = round((args.records - have) / seconds)
        total = end_offset(bootstrap, TOPIC)
        result["partition_records"] = total
        console = Console(bootstrap, tmp)
        client = console.client()
        rng = random.Random(7)
        path = f"/api/topics/{TOPIC}/messages"
        kinds = {
            "offset": lambda: (lambda o: ({"start": "offset", "offset": o}, o))(
                rng.randrange(total - 100)),
            "timestamp": lambda: (lambda o: ({"start": "timestamp", "timestamp": T0 + o}, o))(
                rng.randrange(total - 100)),
            "newest": lambda: ({"start": "newest"}, total - 100),
            "oldest": lambda: ({"start": "oldest"}, 0),
        }
        client.get(path, params={"partition": 0, "limit": 1})  # the console's first clients
        deadline = time.monotonic() + 60
        for kind, make in kinds.items():
            times: list[float] = []
            for _ in range(args.requests):
                params, first = make()
                began = time.perf_counter()
                r = client.get(path, params={"partition": 0, "limit": 100, **params})
                times.append((time.perf_counter() - began) * 1000)
                r.raise_for_status()
                offsets = [m["offset"] for m in r.json()["messages"]]
                if offsets != list(range(first, first + 100)):
                    raise RuntimeError(f"{kind}: page from {first} held {offsets[:3]}...")
                if time.monotonic() > deadline:
                    raise RuntimeError("browse phase passed its 60 s deadline")
            result[kind] = summary(times)
        client.close()
    finally:
        if console is not None:
            console.stop()
        broker.stop()
        if not args.data_dir:
            shutil.rmtree(tmp, ignore_errors=True)
    return result


def render(args: argparse.Namespace) -> dict[str, object]:
    tmp = Path(tempfile.mkdtemp(prefix="console-bench-"))
    broker: Server = start_broker(tmp / "data")
    console: Console | None = None
    try:
        topic = "console-bench-1k"
        create_topic(broker.address, topic)
        producer = Producer({"bootstrap.servers": broker.address, "linger.ms": 5})
        pad = "x" * 1000
        for i in range(1000):
            value = json.dumps({"id": i, "user": {"name": f"user-{i}", "tags": ["a", "b"]},
                                "pad": pad})[:1024].encode()
            producer.produce(topic, value.ljust(1024, b" "), key=f"k{i}".encode(), partition=0)
        if producer.flush(30):
            raise RuntimeError("produce did not finish")
        del producer  # closed now, not after the broker stopped
        console = Console(broker.address, tmp)
        env = {**os.environ, "CONSOLE_URL": console.url, "CONSOLE_PASSWORD": PASSWORD,
               "TOPIC": topic, "LIMIT": "1000", "RUNS": str(args.runs)}
        done = subprocess.run(["node", "e2e/render.bench.mjs"], cwd=REPO / "console/web",
                              env=env, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-2000:])
        times = json.loads(done.stdout.strip().splitlines()[-1])["render_ms"]
        return {"messages": 1000, "value_bytes": 1024, "render_ms": summary(times)}
    finally:
        if console is not None:
            console.stop()
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    b = sub.add_parser("browse")
    b.add_argument("--records", type=int, default=10_000_000)
    b.add_argument("--requests", type=int, default=20)
    b.add_argument("--data-dir", help="keep the broker's data here (the partition is built once)")
    r = sub.add_parser("render")
    r.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    began = time.time()
    result = browse(args) if args.what == "browse" else render(args)
    result["load_average"] = [round(x, 1) for x in os.getloadavg()]
    result["seconds"] = round(time.time() - began, 1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
