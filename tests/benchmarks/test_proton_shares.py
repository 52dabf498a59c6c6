"""Proton's region shares against the warp-state sampler, on profiles recorded on the GPU machine: the Triton
examples' Proton profiles beside source pages with warp-state samples of the uninstrumented kernels (H100),
and one launch of each instrumented kernel measured by Proton and the sampler at once (H200,
tests/fixtures/gpu/proton_same_launch)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.ncu.source import instructions_from_cuda_sass
from benchmarks.proton import SAME_LAUNCH_PAGE, SAME_LAUNCH_RAW, resident_warp_cycles
from benchmarks.proton_shares import (
    CLOCK_READ,
    SAMPLES,
    function_span,
    instrumented_spans,
    record_order,
    region_spans,
    same_launch_accuracy,
    sampled_instructions,
    sampled_lines,
    share_errors,
)
from formulas.base import is_toolkit_file
from intelliperf.gpu.proton import HATCHET, META, scope_metrics
from tests.recorded import BY_NAME, EXAMPLES, RECORDED, ROOT

SAME_LAUNCH = RECORDED / "proton_same_launch"
RECORDINGS = sorted((path.parent.name, path.name) for path in SAME_LAUNCH.glob("*/*") if path.is_dir())


def compare(name: str, variant: str, app: str) -> dict[str, dict[str, float]]:
    folder = RECORDED / name / variant
    meta = json.loads((folder / "proton.json").read_text())
    scopes = scope_metrics(json.loads((folder / "proton.hatchet").read_text())[0], meta["kernel"])
    shares = {region: m["cycles"] / scopes["kernel"]["cycles"] for region, m in scopes.items()}
    source = (EXAMPLES / name / app).read_text()
    def_line = next(r["line"] for r in meta["regions"] if r["kind"] == "kernel")
    samples = sampled_lines((folder / "source_cuda_sass.csv").read_text(), meta["kernel"])
    return share_errors(
        shares, samples, region_spans(source, meta["regions"]), app, function_span(source, def_line)
    )


def test_the_atomic_kernel_spends_its_time_on_the_atomic_by_both_measures() -> None:
    regions = compare("triton_atomic", "original", "triton_bins.py")
    assert set(regions) == {"load@L24", "load@L25", "atomic@L26"}
    atomic = regions["atomic@L26"]
    assert atomic["sampled"] > 0.99 and atomic["proton"] > 0.98 and atomic["error"] < 0.02


def test_a_loop_region_takes_the_samples_of_every_line_of_its_body() -> None:
    """triton_few_warps' grid-stride loop (one launch measured by Proton and the sampler at once, H200): the
    loop's region holds its body's load and store, so its samples are at least theirs together."""
    accuracy, *_ = same_launch("triton_few_warps", "original")
    shares = accuracy["shares"]
    assert isinstance(shares, dict)
    inside = sum(r["sampled"] for name, r in shares.items() if name != "loop@L24")
    assert shares["loop@L24"]["sampled"] > inside and shares["loop@L24"]["sampled"] == pytest.approx(
        1.0, abs=0.02
    )


def test_a_loads_latency_is_proton_s_and_its_consumer_s_for_the_sampler() -> None:
    """The spilling softmax: Proton puts 29% in the row load's scope, the sampler 1%: its warps wait on
    the loaded row at the reduction that uses it. What the share error measures includes this."""
    regions = compare("triton_spill", "original", "softmax_rows.py")
    load = regions["load@L23"]
    assert load["proton"] > 0.25 and load["sampled"] < 0.05 and load["error"] > 0.2


def test_samples_count_once_and_only_for_the_kernel(tmp_path: Path) -> None:
    page = (RECORDED / "triton_strided" / "fixed" / "source_cuda_sass.csv").read_text()
    by_line = sampled_lines(page, "scale_elements")
    assert by_line and all(v >= 0 for v in by_line.values())
    assert sampled_lines(page, "no_such_kernel") == {}


def test_an_inlined_toolkit_instruction_counts_at_the_users_line_once() -> None:
    """atomicAdd's instructions are listed under sm_20_atomic_functions.hpp before the user's line that
    calls it: their samples count at the user's line, and every sample of the kernel counts once."""
    page = (RECORDED / "source_views" / "atomic_reduction" / "source_cuda_sass.csv").read_text()
    kernel = "atomic_sum(const float *, float *, int)"
    by_line = sampled_lines(page, kernel)
    assert not [file for file, _ in by_line if is_toolkit_file(file)]
    instructions = instructions_from_cuda_sass(page)[kernel].values()
    assert sum(by_line.values()) == sum(i.metrics[SAMPLES] for i in instructions)
    (source,) = {file for file, _ in by_line}
    assert by_line[(source, 51)] == 817100.0  # the atomicAdd's line, with the inlined body's samples


def same_launch(name: str, variant: str) -> tuple[dict[str, object], str, str, str]:
    """(accuracy, kernel, the kernel's file, the recorded page) of one same-launch recording."""
    folder = SAME_LAUNCH / name / variant
    example = BY_NAME[name]
    source = (EXAMPLES / name / example["app" if variant == "original" else "fixed_app"]).read_text()
    kernel = json.loads((folder / META).read_text())["kernel"]
    page = (folder / SAME_LAUNCH_PAGE).read_text()
    accuracy = same_launch_accuracy(
        scope_metrics(json.loads((folder / HATCHET).read_text())[0], kernel),
        page,
        source,
        kernel,
        resident_warp_cycles((folder / SAME_LAUNCH_RAW).read_text()),
    )
    return accuracy, kernel, source, page


def test_every_triton_example_was_recorded_both_ways() -> None:
    triton = {e["name"] for e in BY_NAME.values() if e.get("language") == "triton"}
    assert sorted((name, v) for name in triton for v in ("fixed", "original")) == RECORDINGS


@pytest.mark.parametrize(("name", "variant"), RECORDINGS)
def test_each_clock_read_in_the_instrumented_kernel_is_one_of_the_runners_records(
    name: str, variant: str
) -> None:
    """What lets a sample be given to a region: the k-th clock read in address order is the k-th record."""
    _, kernel, source, page = same_launch(name, variant)
    instructions = sampled_instructions(page, kernel)
    clocks = [sass for _, sass, _ in instructions if CLOCK_READ in sass]
    assert clocks and len(clocks) == len(record_order(source, kernel))
    addresses = [address for address, _, _ in instructions]
    assert addresses == sorted(set(addresses)) and sum(s for _, _, s in instructions) > 1000


@pytest.mark.parametrize(("name", "variant"), RECORDINGS)
def test_the_result_file_is_what_the_recordings_give(name: str, variant: str) -> None:
    """benchmarks/results/proton.json's accuracy columns, recomputed from the recorded launch."""
    result = json.loads((ROOT / "benchmarks" / "results" / "proton.json").read_text())
    row = next(r for r in result["examples"] if (r["example"], r["variant"]) == (name, variant))
    accuracy, *_ = same_launch(name, variant)
    assert accuracy == {key: row[key] for key in accuracy}
    assert accuracy["error"] is not None and set(accuracy["shares"]) == {  # type: ignore[arg-type]
        r["name"] for r in json.loads((SAME_LAUNCH / name / variant / META).read_text())["regions"]
    } - {"kernel"}


def test_the_atomic_holds_the_atomic_kernels_time_by_both_measures_of_one_launch() -> None:
    accuracy, *_ = same_launch("triton_atomic", "original")
    atomic = accuracy["shares"]["atomic@L26"]  # type: ignore[index]
    assert atomic["proton"] > 0.95 and atomic["sampled"] > 0.95 and atomic["error"] < 0.01


def test_a_loads_latency_stays_in_its_region_on_the_instrumented_kernel() -> None:
    """The spilling softmax: on the plain kernel the sampler counts the row load's wait at the reduction that
    uses it (1% against Proton's 29%); on the instrumented one it finds that wait inside the load's region, as
    Proton does: where the wait falls is the compiler's, in each binary."""
    accuracy, *_ = same_launch("triton_spill", "original")
    load = accuracy["shares"]["load@L23"]  # type: ignore[index]
    assert load["proton"] > 0.2 and abs(load["proton"] - load["sampled"]) < 0.02


def test_a_region_takes_the_samples_after_its_enter_clock_read_up_to_its_exit_clock_read() -> None:
    """A warp sampled at a program counter has not issued that instruction: samples at the enter record's
    clock read fall before the region, those at its exit record's clock read inside it."""
    clock = f"CS2R.32 R4, {CLOCK_READ}"
    instructions = [
        (0x00, "S2R R0, SR_TID.X", 10),
        (0x10, clock, 1),  # enter kernel
        (0x20, "IMAD R2, R0, 4, R1", 3),
        (0x30, clock, 2),  # enter load
        (0x40, "LDG.E R5, [R2]", 4),
        (0x50, clock, 30),  # exit load: the wait for R5's value shows here
        (0x60, "STG.E [R2], R5", 8),
        (0x70, clock, 2),  # exit kernel
        (0x80, "EXIT", 5),
    ]
    records = [("enter", "kernel"), ("enter", "load@L3"), ("exit", "load@L3"), ("exit", "kernel")]
    spans = instrumented_spans(instructions, records)
    assert spans is not None
    inside = 3 + 2 + 4 + 30 + 8 + 2
    assert spans.inside == pytest.approx(inside / 65)
    assert spans.shares == {"load@L3": pytest.approx(34 / inside)}


def test_clock_reads_that_do_not_pair_with_the_records_give_no_verdict() -> None:
    clock = f"CS2R.32 R4, {CLOCK_READ}"
    three = [(16 * i, clock, 1) for i in range(3)]
    records = [("enter", "kernel"), ("enter", "load@L3"), ("exit", "load@L3"), ("exit", "kernel")]
    assert instrumented_spans(three, records) is None  # a record the compiler removed or duplicated
    four = [(16 * i, clock, 1) for i in range(4)]
    no_kernel_scope = [("enter", "load@L3"), ("exit", "load@L3"), ("enter", "store@L4"), ("exit", "store@L4")]
    assert instrumented_spans(four, no_kernel_scope) is None  # a kernel with an early return
    silent = [(16 * i, clock, 0) for i in range(4)]
    assert instrumented_spans(silent, records) is None


def test_records_follow_program_order_with_loops_around_their_body() -> None:
    source = (EXAMPLES / "triton_atomic" / "triton_bins_fixed.py").read_text()
    assert record_order(source, "bin_sums") == [
        ("enter", "kernel"),
        ("enter", "loop@L24"),
        ("enter", "load@L27"),
        ("exit", "load@L27"),
        ("enter", "load@L28"),
        ("exit", "load@L28"),
        ("exit", "loop@L24"),
        ("enter", "atomic@L30"),
        ("exit", "atomic@L30"),
        ("exit", "kernel"),
    ]
    with pytest.raises(ValueError, match="no function no_such_kernel"):
        record_order(source, "no_such_kernel")


def test_the_sampler_runs_ask_ncu_for_exactly_what_ran_on_the_device(tmp_path: Path) -> None:
    """The commands of benchmarks/proton.py's two sampler runs, as they ran on the H200 for proton.json."""
    from benchmarks.proton import sampler_command

    log, report = tmp_path / "k.log", tmp_path / "k.ncu-rep"
    sampler = ["--warp-sampling-interval", "0", "--import-source", "yes", "--page", "source"]
    sampler += ["--print-source", "cuda,sass", "--csv", "--log-file", str(log)]
    head = ["ncu", "--clock-control", "none", "-k", "regex:^k$", "-c", "1", "--section", "SourceCounters"]
    plain = ["python3", "./a.py", "3"]
    assert sampler_command(plain, "k", log) == [*head, *sampler, *plain]
    runner = ["python3", "runner.py", "out", "k", "--", "./a.py", "1"]
    assert sampler_command(runner, "k", log, metrics=True, report=report) == [
        *head,
        "--metrics",
        "gpu__time_duration.sum,smsp__warps_active.sum",
        *sampler,
        "--export",
        str(report),
        "--force-overwrite",
        *runner,
    ]
