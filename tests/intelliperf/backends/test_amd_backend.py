"""The AMD backend: the same formulas, fed by rocprofv3 counters through the AMD table, decide as they do
from Nsight Compute recordings. rocprofv3 is a stand-in serving hand-made fixtures built from its documented
format (tests/fixtures/amd/rocprofv3/README.md): this is the AMD path as far as it can run without AMD
hardware, which it has not run on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from formulas.selection import formulas_for, metrics_for
from intelliperf.contract import DeviceInfo, JobSpec
from intelliperf.contract.profile import Quantity
from intelliperf.engine.job import check_optimizable
from intelliperf.errors import ProfileError, SpecError
from intelliperf.gpu.amd.backend import AmdBackend
from intelliperf.gpu.amd.counters import COUNTER_GROUPS, counters_for, kernel_quantities
from intelliperf.gpu.backend import rank_kernels
from intelliperf.gpu.nvidia.backend import NvidiaBackend
from intelliperf.gpu.registry import backend_class, vendors
from tests.recorded import main_profile
from tests.support.fake_rocprof import install_fake_rocprofv3

HIP_SOURCE = """#include <hip/hip_runtime.h>

// a transpose through LDS whose column reads conflict
__global__ void lds_transpose(float* out,
                              const float* in) {
    __shared__ float tile[32][32];
}
"""
MI300X = DeviceInfo(vendor="amd", name="AMD Instinct MI300X", arch="gfx942", sm_count=304, warp_size=64)
LDS = "lds_transpose(float*, float const*)"
SCATTER = "scatter_add(float*, int const*, float const*, int)"
SAXPY = "saxpy(int, float, float const*, float*)"
STRIDED = "strided_copy(float*, float const*, int)"


def verdicts(profile) -> dict[str, tuple[bool, bool]]:  # type: ignore[no-untyped-def]
    """formula -> (decided, present)."""
    return {f.name: ((d := f.evaluate(profile)).decided, d.present) for f in formulas_for("auto")}


@pytest.fixture
def amd_profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    log = install_fake_rocprofv3(tmp_path, monkeypatch)
    backend = AmdBackend(device=MI300X, record=tmp_path / "record")
    timing = backend.time_kernels(["true"], cwd=tmp_path, timeout_s=60)
    kernels = rank_kernels(timing.kernels)
    profiles = backend.collect(
        ["true"], cwd=tmp_path, kernels=kernels, metrics=metrics_for(formulas_for("auto")), timeout_s=60
    )
    return {"profiles": profiles, "kernels": kernels, "log": log, "record": tmp_path / "record"}


def test_the_same_formulas_decide_the_same_way_from_nvidia_recordings_and_amd_counter_tables(
    amd_profiles: dict,
) -> None:
    profiles = amd_profiles["profiles"]
    nvidia_conflicts, amd_conflicts = verdicts(main_profile("transpose_bank")), verdicts(profiles[LDS])
    assert nvidia_conflicts["bankConflict"] == amd_conflicts["bankConflict"] == (True, True)
    nvidia_divergent, amd_divergent = verdicts(main_profile("divergent_lanes")), verdicts(profiles[SCATTER])
    assert nvidia_divergent["branchDivergence"] == amd_divergent["branchDivergence"] == (True, True)
    nvidia_strided, amd_strided = verdicts(main_profile("strided_copy")), verdicts(profiles[STRIDED])
    assert nvidia_strided["memoryAccess"] == amd_strided["memoryAccess"] == (True, True)
    # scattered atomics are the atomics formula's business, not uncoalesced loads and stores
    nvidia_scatter = verdicts(main_profile("scatter_atomic"))
    assert nvidia_scatter["memoryAccess"] == amd_divergent["memoryAccess"] == (True, False)
    nvidia_clean, amd_clean = verdicts(main_profile("clean_saxpy")), verdicts(profiles[SAXPY])
    for formula in ("bankConflict", "branchDivergence", "memoryAccess"):
        assert nvidia_clean[formula] == amd_clean[formula] == (True, False)
    assert not any(present for _, present in amd_clean.values())


def test_what_amd_cannot_measure_yet_is_undecided_and_named_never_zero(amd_profiles: dict) -> None:
    lds = amd_profiles["profiles"][LDS]
    by_name = {f.name: f.evaluate(lds) for f in formulas_for("auto")}
    for name in ("registerPressure", "memoryLocality", "atomicContention"):
        assert not by_name[name].decided and not by_name[name].present, name
    assert by_name["memoryAccess"].decided
    assert Quantity.LOCAL_BYTES_LOADED in by_name["registerPressure"].summary
    assert "l2_atomics_busiest_slice" in by_name["atomicContention"].summary
    assert Quantity.LOCAL_BYTES_LOADED not in lds.metrics and Quantity.DRAM_BUSY_PCT not in lds.metrics


def test_amd_quantities_follow_the_documented_expressions(amd_profiles: dict) -> None:
    """From the fixture's first dispatch of lds_transpose: LDS active 4,194,304 cycles, 2,097,152 of them in
    bank conflicts; GPU busy 898,800 cycles summed over the MI300X's 8 XCDs of 38 CUs; lane counts from
    SQ_THREAD_CYCLES_VALU. strided_copy: 32,768 wavefront instructions through the TA sent 2,097,152
    thread-requests, where 16 each are ideal (rocprof-compute's Coalescing, 25%)."""
    profiles = amd_profiles["profiles"]
    lds, scatter, strided = profiles[LDS].metrics, profiles[SCATTER].metrics, profiles[STRIDED].metrics
    assert (
        lds[Quantity.SHARED_ACCESS_UNITS] == 4194304 and lds[Quantity.SHARED_ACCESS_UNITS_EXCESS] == 2097152
    )
    assert lds[Quantity.SHARED_ACCESS_UNITS_IDEAL] == 4194304 - 2097152
    assert lds[Quantity.SHARED_PIPE_BUSY_PCT] == pytest.approx(100 * 4194304 / (898800 / 8 * 304))
    assert lds[Quantity.ACTIVE_THREADS_PER_INSTRUCTION] == pytest.approx(64)
    assert scatter[Quantity.ACTIVE_THREADS_PER_INSTRUCTION] == pytest.approx(20)
    assert Quantity.ATOMIC_INSTRUCTIONS_NO_RETURN not in scatter  # TCP counts requests, not instructions
    assert lds[Quantity.BLOCK_SIZE] == 32 * 8 and lds[Quantity.GRID_SIZE] == (4096 * 1024) / (32 * 8)
    assert lds[Quantity.REGISTERS_PER_THREAD] == 16
    assert lds[Quantity.KERNEL_TIME_NS] == 51000  # the median of its four dispatches
    assert (
        strided[Quantity.GLOBAL_SECTORS] == 2097152 and strided[Quantity.GLOBAL_SECTORS_IDEAL] == 16 * 32768
    )
    assert strided[Quantity.GLOBAL_SECTORS_EXCESS] == 2097152 - 16 * 32768
    # scatter_add: 64 requests for each of its 16,384 atomic instructions are left out, as are the atomics
    assert scatter[Quantity.GLOBAL_SECTORS] == scatter[Quantity.GLOBAL_SECTORS_IDEAL] == 16 * 2 * 16384
    assert strided[Quantity.L2_BUSY_PCT] == pytest.approx(77, abs=1e-3)  # TCC_BUSY_sum / (16 x GRBM)
    assert strided[Quantity.L1_BUSY_PCT] == pytest.approx(60, abs=1e-3)  # TCP_GATE_EN2_sum / _EN1_sum


def test_the_counter_pass_runs_one_rocprofv3_pass_per_needed_group_on_the_top_kernels(
    amd_profiles: dict,
) -> None:
    calls = [json.loads(line) for line in amd_profiles["log"].read_text().splitlines()]
    assert "--kernel-trace" in calls[0]
    passes = [c for c in calls if "--pmc" in c]
    assert len(passes) == len(COUNTER_GROUPS)
    assert all(c[c.index("--kernel-iteration-range") + 1] == "[1]" for c in passes)
    assert (amd_profiles["record"] / "trace").is_dir() and (amd_profiles["record"] / "counters").is_dir()
    assert counters_for([Quantity.SHARED_PIPE_BUSY_PCT]) == [COUNTER_GROUPS[0]]
    assert counters_for([Quantity.GLOBAL_SECTORS]) == [COUNTER_GROUPS[2], COUNTER_GROUPS[3]]
    assert counters_for([Quantity.LOCAL_BYTES_LOADED]) == []


def test_a_quantity_whose_counters_are_missing_is_left_out() -> None:
    found = kernel_quantities({"SQ_LDS_IDX_ACTIVE": 10.0}, MI300X)
    assert found == {Quantity.SHARED_ACCESS_UNITS: 10.0}
    without_cus = kernel_quantities(
        {"SQ_LDS_IDX_ACTIVE": 10.0, "GRBM_GUI_ACTIVE": 5.0}, MI300X.model_copy(update={"sm_count": None})
    )
    assert Quantity.SHARED_PIPE_BUSY_PCT not in without_cus


def test_cycles_are_per_xcd_and_an_unknown_xcd_count_leaves_the_utilizations_out() -> None:
    """rocprofv3 sums GRBM_GUI_ACTIVE over a GPU's XCDs; rocprof-compute divides it by their number."""
    counters = {
        "SQ_ACTIVE_INST_VALU": 38.0 * 100,
        "GRBM_GUI_ACTIVE": 8 * 200.0,
        "TCC_BUSY_sum": 16 * 8 * 50.0,
    }
    mi300x = kernel_quantities(counters, MI300X)  # 304 CUs: 8 XCDs of 38
    assert mi300x[Quantity.ISSUE_BUSY_PCT] == pytest.approx(100 * 3800 / (200 * 304))
    one_xcd = kernel_quantities(counters, MI300X.model_copy(update={"sm_count": 38}))  # a CPX partition
    assert one_xcd[Quantity.ISSUE_BUSY_PCT] == pytest.approx(100 * 3800 / (1600 * 38))
    mi308x = kernel_quantities(counters, MI300X.model_copy(update={"sm_count": 80}))  # 4 XCDs of 20
    assert Quantity.ISSUE_BUSY_PCT not in mi308x
    assert mi308x[Quantity.L2_BUSY_PCT] == mi300x[Quantity.L2_BUSY_PCT] == pytest.approx(100 * 50 / 200)
    mi250x = MI300X.model_copy(update={"arch": "gfx90a", "sm_count": 110})  # one XCD, 32 L2 channels
    assert kernel_quantities(counters, mi250x)[Quantity.L2_BUSY_PCT] == pytest.approx(
        100 * 6400 / (32 * 1600)
    )


def test_an_architecture_without_a_counter_table_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake_rocprofv3(tmp_path, monkeypatch)
    backend = AmdBackend(device=MI300X.model_copy(update={"arch": "gfx1100"}))
    kernels = rank_kernels(backend.time_kernels(["true"], cwd=tmp_path, timeout_s=60).kernels)
    with pytest.raises(ProfileError, match="no counter table for gfx1100"):
        backend.collect(
            ["true"], cwd=tmp_path, kernels=kernels, metrics=[Quantity.SHARED_ACCESS_UNITS], timeout_s=60
        )


def test_backends_are_found_by_vendor() -> None:
    assert backend_class("nvidia") is NvidiaBackend and backend_class("amd") is AmdBackend
    assert {"nvidia", "amd"} <= set(vendors())
    with pytest.raises(SpecError, match="no GPU backend for vendor 'intel'"):
        backend_class("intel")


def test_an_amd_optimization_needs_the_projects_tests_as_its_judge() -> None:
    spec = JobSpec.model_validate(
        {"applications": [{"command": ["./app"]}], "build_command": "make", "gpu": {"vendor": "amd"}}
    )
    with pytest.raises(SpecError, match="--unittest_command"):
        check_optimizable(spec)
    check_optimizable(spec.model_copy(update={"unittest_command": "make test"}))
    check_optimizable(spec.model_copy(update={"formula": "diagnoseOnly"}))
    check_optimizable(spec.model_copy(update={"gpu": spec.gpu.model_copy(update={"vendor": "nvidia"})}))


def test_intelliperf_run_on_an_amd_node_diagnoses_through_rocprofv3(tmp_path: Path) -> None:
    """The CLI as a user runs it on a node whose only GPU tools are amd-smi and rocprofv3 (stand-ins
    serving the documented formats): the one probe finds the MI300X, the vendor's backend is chosen
    without being asked for, and the report holds the AMD table's verdicts."""
    import os
    import subprocess
    import sys

    from tests.support.fake_rocprof import FAKE_ROCPROFV3, ROCPROF_FIXTURES

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = (
        Path(__file__).resolve().parents[2] / "fixtures" / "amd" / "smi" / "amd_smi_static_mi300x.json"
    ).read_text()
    for name, text in (
        ("rocprofv3", FAKE_ROCPROFV3),
        ("amd-smi", f"#!{sys.executable}\nimport sys\nsys.stdout.write({smi!r})\n"),
    ):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTELLIPERF_")}
    env.update(
        PATH=str(bin_dir),
        FAKE_ROCPROF_FIXTURES=str(ROCPROF_FIXTURES),
        FAKE_ROCPROF_LOG=str(tmp_path / "calls.jsonl"),
    )
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "lds_transpose.hip").write_text(HIP_SOURCE)
    report_file = tmp_path / "report.json"
    run = subprocess.run(
        [sys.executable, "-m", "intelliperf", "run", "-f", "diagnoseOnly", "-p", str(project),
         "-o", str(report_file), "--", sys.executable, "-c", "pass"],
        cwd=Path(__file__).resolve().parents[3], env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "rocprofv3 --kernel-trace" in run.stderr and "rocprofv3 on 4 kernel(s)" in run.stderr
    report = json.loads(report_file.read_text())
    assert report["device"]["vendor"] == "amd" and report["device"]["arch"] == "gfx942"
    present = {(d["kernel"], d["formula"]) for d in report["diagnoses"] if d["present"]}
    assert present == {(SCATTER, "branchDivergence"), (LDS, "bankConflict"), (STRIDED, "memoryAccess")}
    assert any("rocprofv3 counts per kernel" in w for w in report["warnings"])
    conflicts = next(d for d in report["diagnoses"] if d["present"] and d["kernel"] == LDS)
    [where] = conflicts["locations"]
    assert (where["file"], where["line"]) == ("src/lds_transpose.hip", 4)
    assert any(line["hot"] and "lds_transpose" in line["text"] for line in where["code"])
    divergent = next(d for d in report["diagnoses"] if d["present"] and d["kernel"] == SCATTER)
    assert divergent["locations"] == []  # no scatter_add in the project: no file is guessed
    assert not any("Nsight Compute" in w for w in report["warnings"])
    optimize = subprocess.run(
        [sys.executable, "-m", "intelliperf", "run", "-b", "make", "-p", str(tmp_path), "--", "./app"],
        cwd=Path(__file__).resolve().parents[3], env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert optimize.returncode == SpecError.exit_code and "--unittest_command" in optimize.stderr


def test_on_amd_the_projects_tests_judge_and_the_vendors_timing_pass_times_the_rewrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Accordo times CUDA launches only: on AMD the unittest judge's speedup comes from rocprofv3's kernel
    trace, interleaved, with Accordo's statistics. The stand-in rocprofv3 makes the rewritten tree's kernels
    twice as fast."""
    import sys

    from accordo.validate import ValidationOptions
    from intelliperf.engine.job import judge_for
    from intelliperf.engine.unittest_judge import UnittestJudge
    from tests.intelliperf.engine.test_unittest_judge import target

    install_fake_rocprofv3(tmp_path, monkeypatch)
    reference, candidate = tmp_path / "reference", tmp_path / "candidate"
    reference.mkdir()
    candidate.mkdir()
    (candidate / "kernels_faster_by").write_text("2")
    lds = next(k for k in rank_kernels(AmdBackend(device=MI300X).time_kernels(
        ["true"], cwd=reference, timeout_s=60).kernels) if k.name == LDS)  # fmt: skip
    judge = UnittestJudge(
        lds,
        [sys.executable, "-c", "pass"],
        "true",
        reference,
        ValidationOptions(timeout_s=60, runs=5, min_runs=2),
        timing=AmdBackend(device=MI300X),
    )
    said: list[str] = []
    checked = judge.check(candidate, said.append)
    assert checked.passed
    timed = judge.time(candidate, said.append, checked)
    speedup = timed.speedup
    assert speedup is not None and timed.passed
    assert speedup.median == pytest.approx(2.0, rel=1e-3) and speedup.verdict == "faster"
    assert speedup.runs == 2 and "rocprofv3 --kernel-trace" in speedup.method
    assert speedup.reference_ns == pytest.approx(211000)  # lds_transpose's four dispatches in the fixture
    assert judge.candidate_kernel(candidate).name == LDS
    amd_spec = JobSpec.model_validate(
        {"applications": [{"command": ["./app"]}], "unittest_command": "make test", "gpu": {"vendor": "amd"}}
    )
    assert isinstance(judge_for(target(), reference, amd_spec).timing, AmdBackend)  # type: ignore[union-attr]
    nvidia_spec = amd_spec.model_copy(update={"gpu": amd_spec.gpu.model_copy(update={"vendor": "nvidia"})})
    assert judge_for(target(), reference, nvidia_spec).timing is None  # type: ignore[union-attr]
