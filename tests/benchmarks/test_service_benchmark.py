"""benchmarks/service.py at a tiny size: the real parts (PostgreSQL, Redis, uvicorn, a Celery worker) and the
JSON the issue asks for."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from benchmarks import service as bench

KEYS = {
    "machine",
    "clients",
    "submit_per_s",
    "post_p50_ms",
    "post_p99_ms",
    "get_p50_ms",
    "get_p99_ms",
    "dispatch_p99_ms",
    "database",
    "broker",
    "server_workers",
    "requests",
    "errors",
}


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_percentile_is_linear_between_ranks() -> None:
    assert bench.percentile([], 50) is None
    assert bench.percentile([3.0], 99) == 3.0
    assert bench.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert bench.percentile(list(map(float, range(101))), 99) == 99.0


def test_trials_pool_into_one_phase_whose_percentiles_see_every_stall() -> None:
    calm = bench.LoadResult(
        requests=100,
        statuses={201: 100},
        latencies_ms=[2.0] * 100,
        elapsed_s=1.0,
        client_cpu_s=0.1,
        server_cpu_s=0.2,
        postgres_cpu_s=0.05,
        cpu_busy=0.4,
        ids=["a"],
    )
    stalled = bench.LoadResult(requests=100, errors=1, statuses={201: 99, 500: 1},
                               latencies_ms=[2.0] * 97 + [300.0] * 3, elapsed_s=1.0, client_cpu_s=0.1,
                               server_cpu_s=0.3, postgres_cpu_s=None, cpu_busy=0.6, ids=["b"])  # fmt: skip
    pooled = bench.LoadResult.pooled([calm, stalled])
    assert (pooled.requests, pooled.errors, pooled.statuses) == (200, 1, {201: 199, 500: 1})
    assert pooled.elapsed_s == 2.0 and pooled.ids == ["a", "b"]
    assert pooled.server_cpu_s == pytest.approx(0.5) and pooled.cpu_busy == 0.5
    assert pooled.postgres_cpu_s is None  # one trial could not measure it: no partial sum
    assert calm.percentile(99) == 2.0 and pooled.percentile(99) == pytest.approx(300.0)
    assert pooled.per_s == pytest.approx(199 / 2.0)


@pytest.mark.timeout(90)
@pytest.mark.alone  # Redis database 13 is the benchmark's, and it measures the machine's load
def test_a_tiny_run_writes_the_figures(tmp_path: Path) -> None:
    if not (_listening(5432) and _listening(6379)):
        pytest.fail(
            "PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) must listen (.ci/run starts them)"
        )
    out = tmp_path / "service.json"
    argv = ["--out", str(out), "--clients", "5", "--requests", "20", "--rate", "100", "--duration-s", "5"]
    argv += ["--dispatch-jobs", "3", "--dispatch-rate", "20", "--server-workers", "1", "--redis-db", "13"]
    argv += ["--latency-trials", "2", "--speed-probe-s", "1"]
    argv += [
        "--fleet-workers",
        "12",
        "--fleet-jobs",
        "4",
        "--fleet-events-per-s",
        "40",
        "--fleet-readers",
        "2",
    ]
    argv += ["--fleet-duration-s", "3", "--fleet-heartbeat-s", "1", "--fleet-connections", "8"]
    assert bench.main([*argv, "--logs", str(tmp_path / "logs")]) == 0
    result = json.loads(out.read_text())
    assert result.keys() >= KEYS
    assert result["clients"] == 5 and result["server_workers"] == 1
    # what it really used, not a default written in: the port it served on, the database it made
    port = result["api_url"].rsplit(":", 1)[1]
    assert f"--port {port} " in result["server"] and port.isdigit()
    assert "127.0.0.1:5432, fresh database intelliperf_bench_" in result["database"]
    assert result["broker"].endswith("(127.0.0.1:6379, db 13)")
    assert result["machine"].startswith(socket.gethostname())
    assert result["fleet_workers"] == 12 and result["fleet_jobs"] == 4
    assert result["fleet_events_written"] >= 80 and result["fleet_events_delivered_to_readers"] > 0
    assert (result["fleet_events_lost"], result["fleet_events_duplicated"], result["fleet_errors"]) == (
        0,
        0,
        0,
    )
    speed = result["machine_cpu_speed"]
    assert speed["processes"] == os.cpu_count()
    assert 0 < speed["loops_per_chunk_min"] <= speed["loops_per_chunk_median"] <= speed["loops_per_chunk_max"]
    assert speed["fastest_over_slowest"] >= 1
    assert result["errors"] == 0, result["phases"]
    assert result["submit_per_s"] > 0
    phases = result["phases"]
    for name in ("post_saturated", "get_saturated"):
        assert phases[name]["requests"] == 20 and phases[name]["p99_ms"] >= phases[name]["p50_ms"] > 0
    for name in ("post_at_rate", "get_at_rate"):  # two trials of 20, pooled
        assert phases[name]["requests"] == 40 and phases[name]["p99_ms"] >= phases[name]["p50_ms"] > 0
        assert [t["p99_ms"] > 0 for t in phases[name]["trials"]] == [True, True]
        assert all(t["server_cpu_ms_per_request"] > 0 for t in phases[name]["trials"])
    assert result["dispatch_jobs"] == result["dispatch_started"] == 3
    assert 0 < result["dispatch_p50_ms"] <= result["dispatch_p99_ms"]
    # the worker ran each job: its clone of a refused repository failed
    assert sum(result["dispatch_outcomes"].values()) == 3
    assert all(key.startswith("failed:") for key in result["dispatch_outcomes"]), result["dispatch_outcomes"]
