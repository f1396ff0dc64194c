"""Issue 16's load limits at CI sizes: 500 concurrent connections (each answered before and
after a canary produces and consumes through them) and 2,000 partitions on one broker (one
record each, read back before and after a restart). The canary loses nothing, every partition
keeps its record, and the broker's RSS grows by under 50 MiB. Full sizes (2,000 connections,
10,000 partitions): `scripts/soak-load` (load_limits.py). The connections are held over TLS
too (an SSL listener; `scripts/soak-load --tls` at full size)."""

from __future__ import annotations

from pathlib import Path

from reliability.load_limits import (
    _serve,
    _stop,
    connection_load,
    partition_load,
    tls_material,
)

RSS_GROWTH_MIB = 50


def test_500_connections_and_a_canary(tmp_path: Path) -> None:
    process, host, port, _ = _serve(tmp_path / "data", tmp_path / "broker.log")
    try:
        result = connection_load(host, port, process.pid, 500, 2000)
    finally:
        _stop(process)
    print(result.summary())
    assert result.answered_first == result.answered_last == 500, result.summary()
    assert result.canary_acked == 2000 and result.canary_read == 2000, result.summary()
    assert result.rss_with_connections_mib - result.rss_before_mib < RSS_GROWTH_MIB
    assert process.returncode == 0, (tmp_path / "broker.log").read_text()[-3000:]


def test_500_tls_connections_and_a_canary(tmp_path: Path) -> None:
    """The same over an SSL listener: 500 handshakes held open, each answered twice."""
    arguments, context, tls_port = tls_material(tmp_path / "certs")
    process, host, port, _ = _serve(tmp_path / "data", tmp_path / "broker.log", arguments)
    try:
        result = connection_load(host, port, process.pid, 500, 2000, (context, tls_port))
    finally:
        _stop(process)
    print("TLS:", result.summary())
    assert result.answered_first == result.answered_last == 500, result.summary()
    assert result.canary_acked == 2000 and result.canary_read == 2000, result.summary()
    assert result.rss_with_connections_mib - result.rss_before_mib < RSS_GROWTH_MIB
    assert process.returncode == 0, (tmp_path / "broker.log").read_text()[-3000:]


def test_2000_partitions_survive_a_restart(tmp_path: Path) -> None:
    result = partition_load(tmp_path, 2000)
    print(result.summary())
    assert result.acked == result.read_before_restart == result.read_after_restart == 2000, (
        result.summary())
    assert result.rss_with_partitions_mib - result.rss_before_mib < RSS_GROWTH_MIB
    assert result.rss_after_restart_mib - result.rss_before_mib < RSS_GROWTH_MIB
