"""benchmarks/trace_overhead.py on the CPU machine: its probe libraries build here (CUDA's headers and CUPTI,
no GPU) and their stats line reaches the benchmark's reader, the launch callback's figures included (a probe
whose CUPTI calls fail, with no driver here, reports the failures instead of crashing)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from benchmarks.trace_overhead import CONDITIONS, CUDA_HOME, SETTINGS_LIBS, build, profiler_env, run_once

needs_cuda = pytest.mark.skipif(
    shutil.which("g++") is None or not (CUDA_HOME / "bin" / "nvcc").is_file(),
    reason="needs g++ and CUDA's nvcc, headers and CUPTI",
)


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build(tmp_path_factory.mktemp("probe"), None, {}, with_profiler=False)


def load(library: Path, initialize: bool) -> list[str]:
    call = ".InitializeInjection()" if initialize else ""
    return [sys.executable, "-c", f"import ctypes; ctypes.CDLL({str(library)!r}){call}"]


@needs_cuda
def test_build_makes_the_probes_and_their_application_not_the_profiler(
    libs: dict[str, Path],
) -> None:
    assert libs["nocupti"].is_file() and libs["probe"].is_file()
    assert (libs["probe"].parent / "probe_app").is_file()
    assert not libs["profiler"].exists()


@needs_cuda
@pytest.mark.parametrize("variant", ["nocupti", "probe"])
def test_a_loaded_probe_reports_its_stats_line(libs: dict[str, Path], variant: str, tmp_path: Path) -> None:
    sample = run_once(load(libs[variant], initialize=False), tmp_path, {})
    assert sample["errors"] == 0
    assert sample["launches_seen"] == 0 and sample["toggles"] == 0 and sample["event_pairs"] == 0
    assert sample["event_ms"] == 0.0 and sample["records"] == 0
    assert sample["cupti_overhead_ms"] == {}
    assert "messages" not in sample


@needs_cuda
def test_a_launch_callback_that_cupti_refuses_is_reported(libs: dict[str, Path], tmp_path: Path) -> None:
    env = {"PROBE_STAGE": "callback", "PROBE_SAMPLE": "100", "PROBE_TIMER": "events"}
    sample = run_once(load(libs["probe"], initialize=True), tmp_path, env)
    assert sample["errors"] >= 1
    assert any(m.startswith("probe: subscribe failed: CUPTI_ERROR") for m in sample["messages"])
    assert sample["launches_seen"] == 0 and sample["event_pairs"] == 0


def test_the_profilers_stats_and_messages_reach_the_reader(tmp_path: Path) -> None:
    """The native profiler's lines on stderr, by the prefix it writes (profiler.trace.MESSAGE_PREFIX): its
    stats line is kept apart from its other messages."""
    stats = "intelliperf-profiler: trace stats: set-up 4.000 ms; 5 kernel records in 1 buffers"
    other = "intelliperf-profiler: CUPTI dropped 3 kernel activity records"
    script = f"import sys; print({stats!r}, file=sys.stderr); print({other!r}, file=sys.stderr)"
    sample = run_once([sys.executable, "-c", script], tmp_path, {})
    assert sample["profiler_stats"] == [stats] and sample["messages"] == [other]


def test_the_old_sources_sampled_condition_gets_the_sampled_settings_file(tmp_path: Path) -> None:
    """profiler_sampled_old runs --old-native's library with profiler_sampled's settings, through the settings
    file; profiler_old keeps the ACCORDO_* variables of sources from before the settings file."""
    lib, settings = CONDITIONS["profiler_sampled_old"]
    assert lib in SETTINGS_LIBS and settings == CONDITIONS["profiler_sampled"][1]
    env = profiler_env(lib, tmp_path / "old.so", tmp_path, settings)
    assert env["CUDA_INJECTION64_PATH"] == str(tmp_path / "old.so")
    lines = (tmp_path / "settings").read_text().splitlines()
    assert {"mode=trace", "sample_first=1000", "sample_every=64"} <= set(lines)
    old = profiler_env("profiler_old", tmp_path / "old.so", tmp_path)
    assert old["ACCORDO_MODE"] == "trace" and not any(v == str(tmp_path / "settings") for v in old.values())


@needs_cuda
def test_a_module_callback_that_cupti_refuses_is_reported(libs: dict[str, Path], tmp_path: Path) -> None:
    """PROBE_MODULES subscribes to module loads even where no activity or launch callback is asked for."""
    sample = run_once(
        load(libs["probe"], initialize=True), tmp_path, {"PROBE_STAGE": "none", "PROBE_MODULES": "1"}
    )
    assert sample["errors"] >= 1
    assert any(m.startswith("probe: subscribe failed: CUPTI_ERROR") for m in sample["messages"])
    assert "modules" not in sample and "module_ms" not in sample


@pytest.mark.parametrize("modules", [0, 3])
def test_the_module_loads_reach_the_reader(tmp_path: Path, modules: int) -> None:
    """The probe's module figures become MiB and ms; a run that loaded no module (or hashed none) has none."""
    line = {
        key: 0 for key in ("ctor", "init0", "dlopen", "attrs", "reg", "enable", "init1", "exit0", "flush")
    }
    line |= {"finalize": 0, "exit1": 0, "dtor": 0, "records": 0, "buffers": 0, "errors": 0, "launches": 0}
    line |= {"toggles": 0, "toggle_ns": 0, "event_pairs": 0, "event_ms": 0.0, "overhead_ns": {}}
    line |= {"modules": modules, "module_bytes": 3 * 2**20, "module_functions": 1234, "module_ns": 2_500_000}
    script = f"import sys; print('probe: ' + {json.dumps(line)!r}, file=sys.stderr)"
    sample = run_once([sys.executable, "-c", script], tmp_path, {})
    if modules == 0:
        assert not {"modules", "module_mib", "module_functions", "module_ms"} & sample.keys()
    else:
        assert (sample["modules"], sample["module_mib"], sample["module_functions"]) == (3, 3.0, 1234)
        assert sample["module_ms"] == 2.5


def test_each_run_gets_the_cpu_time_of_its_own_processes(tmp_path: Path) -> None:
    """run_once's user_ms is the child's own: a busy run's CPU time is not counted again in the next run."""
    busy = [
        sys.executable,
        "-c",
        "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass",
    ]
    idle = [sys.executable, "-c", "import time; time.sleep(0.3)"]
    first, second = run_once(busy, tmp_path, {}), run_once(idle, tmp_path, {})
    assert first["user_ms"] + first["sys_ms"] >= 250 and first["minflt"] > 0
    assert second["user_ms"] < 200 and second["wall_ms"] >= 300
