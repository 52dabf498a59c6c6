from __future__ import annotations

from rich.console import Console

from intelliperf.console import render_report, render_validation
from intelliperf.contract.report import (
    Attempt,
    BestResult,
    BufferComparison,
    DeviceInfo,
    Diagnosis,
    JudgeCheck,
    LaunchComparison,
    Optimization,
    RankedKernel,
    Report,
    Selection,
    SourceLine,
    SourceLocation,
    Speedup,
    ValidationResult,
)
from intelliperf.summary import render_summary
from tests.support.reports import make_diagnosis

KERNEL = "_Z9transposePfPKfii"
DEMANGLED = "transpose(float*, float const*, int, int)"
DIFF = """\
--- a/transpose.cu
+++ b/transpose.cu
@@ -40,3 +40,3 @@
-    __shared__ float tile[32][32];
+    __shared__ float tile[32][33];
"""


def speedup(median: float = 2.06, flagged: bool = False) -> Speedup:
    return Speedup(
        median=median,
        low=median - 0.05,
        high=median + 0.04,
        significant=True,
        verdict="faster",
        reference_ns=1_234_000,
        candidate_ns=1_234_000 / median,
        runs=30,
        flagged_for_review=flagged,
        reference_wall_s=2.5,
        candidate_wall_s=2.1,
        method="CUDA events around each launch, interleaved runs, median ratio, bootstrap 95% interval",
    )


def validation(result: Speedup | None) -> ValidationResult:
    def out(abs_err: float, rel_err: float) -> BufferComparison:
        return BufferComparison(
            param=0,
            role="output",
            dtype="float32",
            bytes=4 << 20,
            passed=True,
            max_abs_error=abs_err,
            max_rel_error=rel_err,
            bound_use=abs_err / 1e-6,
        )

    source = BufferComparison(param=1, role="input", dtype="float32", bytes=4 << 20, passed=True)
    return ValidationResult(
        kernel=KERNEL,
        passed=True,
        launches_compared=2,
        launches=[
            LaunchComparison(launch=0, passed=True, buffers=[out(1e-9, 2e-9), source]),
            LaunchComparison(launch=1, passed=True, buffers=[out(3e-7, 4e-6), source]),
        ],
        speedup=result,
        atol=1e-6,
        rtol=1e-5,
        calibration_runs=3,
        noise_max=2.5e-7,
        alpha=0.01,
        bound_use=0.3,
    )


def diagnosis() -> Diagnosis:
    code = [
        SourceLine(line=41, text="    int x = threadIdx.x;"),
        SourceLine(line=42, text="    tile[threadIdx.x][threadIdx.y] = in[y * n + x];", hot=True),
        SourceLine(line=43, text="    __syncthreads();"),
    ]
    return make_diagnosis(
        KERNEL,
        saving_ns=600_000,
        saving_fraction=0.48,
        summary="32-way bank conflicts on shared stores",
        reasoning="wavefronts per request 32.0 > 1.5",
        locations=[SourceLocation(file="src/transpose.cu", line=42, share=0.97, code=code)],
    )


def attempts() -> list[Attempt]:
    return [
        Attempt(
            index=1,
            status="build_failed",
            reason="error: expected ';' | near tile\nsecond line of compiler output",
            tokens_in=1500,
            tokens_out=400,
            seconds={"llm": 8.0, "build": 2.0},
        ),
        Attempt(
            index=2,
            round=2,
            status="not_faster",
            reason="x" * 300,
            validation=validation(speedup(median=1.0)),
            metric_before=1000.0,
            metric_after=10.0,
            seconds={"llm": 7.5, "build": 2.0, "validate": 3.0, "measure": 4.0},
        ),
        Attempt(
            index=3,
            round=3,
            status="success",
            diff=DIFF,
            validation=validation(speedup()),
            metric_before=1000.0,
            metric_after=0.0,
            tokens_in=2100,
            tokens_out=650,
            seconds={"llm": 9.0, "build": 2.0, "validate": 3.0, "measure": 4.0, "counters": 6.0},
        ),
    ]


def report(**overrides: object) -> Report:
    data: dict[str, object] = {
        "intelliperf_version": "0.1.0",
        "device": DeviceInfo(name="NVIDIA H200", arch="sm_90"),
        "application": ["./bin/transpose"],
        "project_directory": "/tmp/project",
        "formula_requested": "auto",
        "kernels": [
            RankedKernel(
                rank=1,
                name=KERNEL,
                demangled=DEMANGLED,
                launches=2,
                total_ns=2_468_000,
                mean_ns=1_234_000,
                median_ns=1_234_000,
                share=0.9,
            )
        ],
        "diagnoses": [diagnosis()],
        "selected": Selection(
            kernel=KERNEL, formula="bankConflict", estimated_saving_ns=600_000, why="hottest"
        ),
        "attempts": attempts(),
        "optimization": Optimization(
            status="success", note="attempt 3 is correct and faster", attempts_allowed=10
        ),
        "best": BestResult(
            attempt=3,
            speedup=speedup(),
            metric_name="excessive shared-memory wavefronts",
            metric_before=1000.0,
            metric_after=0.0,
            files=["src/transpose.cu"],
        ),
        "diff": DIFF,
    }
    data.update(overrides)
    return Report.model_validate(data)


def failed_report() -> Report:
    return report(
        best=None,
        diff=None,
        optimization=Optimization(
            status="exhausted", note="10 attempts, none both correct and faster", attempts_allowed=10
        ),
    )


def table_rows(markdown: str, heading: str) -> list[str]:
    section = markdown.split(heading, 1)[1].split("\n### ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    return lines[2:]  # past the header and the alignment row


def test_title_names_the_bottleneck_kernel_and_speedup() -> None:
    title = render_summary(report()).splitlines()[0]
    assert title.startswith("## IntelliPerf: ")
    assert "Shared-memory bank conflicts" in title
    assert f"`{DEMANGLED}`" in title
    assert "2.06x faster" in title


def test_speedup_section_shows_interval_times_and_method() -> None:
    text = render_summary(report())
    assert "2.01x to 2.10x" in text
    assert "1.23 ms → 599 µs" in text
    assert "2.5 s → 2.1 s" in text
    assert "<sub>CUDA events around each launch" in text
    assert "[!WARNING]" not in text


def test_flagged_result_warns() -> None:
    flagged = speedup(median=14.0, flagged=True)
    base = report()
    assert base.best is not None
    text = render_summary(report(best=base.best.model_copy(update={"speedup": flagged})))
    assert "[!WARNING]" in text
    assert "human should review" in text


def test_hot_lines_with_code() -> None:
    text = render_summary(report())
    assert "`src/transpose.cu:42` (97% of the excess)" in text
    assert "```cuda" in text
    assert ">    42 |     tile[threadIdx.x][threadIdx.y] = in[y * n + x];" in text
    assert "     41 |     int x = threadIdx.x;" in text
    assert "severity **high**" in text
    assert "600 µs per launch (48%" in text


def test_metric_and_validation() -> None:
    text = render_summary(report())
    (metric_row,) = table_rows(text, "### Bottleneck metric")
    assert metric_row == "| excessive shared-memory wavefronts | 1,000 | 0 | -100.0% |"
    assert "Outputs passed on 2 launch(es) (atol 1e-06, rtol 1e-05, plus rounding" in text
    assert "3 reference runs, noise up to 2.5e-07 (alpha 0.01); worst element at 0.3 of its bound" in text
    # the worst launch is the second one; its output buffer only (the input is not listed)
    assert "worst launch (2)" in text
    (buffer_row,) = table_rows(text, "### Validation")
    assert buffer_row == "| 0 | float32 | 4,194,304 | 3e-07 | 4e-06 | 0.3 |"


def test_the_validation_lists_each_check_accordo_ran_and_why_one_was_skipped() -> None:
    checks = [
        JudgeCheck(name="end_to_end", outcome="passed"),
        JudgeCheck(name="isolated", outcome="passed"),
        JudgeCheck(name="prefilled_nan", outcome="skipped", detail="the kernel overwrites no output whole"),
        JudgeCheck(name="fresh_inputs", outcome="passed", detail="not shown when passed"),
    ]
    runs = attempts()
    runs[2] = runs[2].model_copy(
        update={"validation": validation(speedup()).model_copy(update={"checks": checks})}
    )
    section = render_summary(report(attempts=runs)).split("### Validation", 1)[1].split("\n### ", 1)[0]
    assert (
        "Checks:\n\n- the program end to end: **passed**\n"
        "- each launch on the reference's own inputs: **passed**\n"
        "- outputs filled with NaN before every launch: **skipped**: the kernel overwrites no output whole\n"
        "- fresh inputs, outputs filled with random bytes: **passed**\n"
    ) in section
    assert "not shown when passed" not in section
    assert "Checks:" not in render_summary(report())  # a validation without checks lists none


def test_a_rewrite_judged_by_the_projects_tests_says_so_instead_of_buffer_bounds() -> None:
    by_tests = validation(speedup()).model_copy(update={"judge": "unittest", "launches": []})
    runs = attempts()
    runs[2] = runs[2].model_copy(update={"validation": by_tests})
    text = render_summary(report(attempts=runs))
    section = text.split("### Validation", 1)[1].split("\n### ", 1)[0]
    assert "Judged by the project's own tests (`--unittest_command`): passed." in section
    assert "atol" not in section and "worst launch" not in section


def test_attempts_table_one_row_each_with_escaped_reasons() -> None:
    text = render_summary(report())
    rows = table_rows(text, "### Attempts")
    assert len(rows) == 3
    first, second, third = rows
    assert "error: expected ';' \\| near tile" in first
    assert "second line" not in first
    assert "1,500 / 400" in first
    assert first.endswith("| 2.0 | 8.0 |")  # llm time apart from the rest
    assert "x" * 119 + "…" in second and "x" * 120 not in second
    assert "| 1.00x |" in second
    assert third.startswith("| 3 ★ | 3 | success |")
    assert "| 2.06x | 0 | 2,100 / 650 | 15.0 | 9.0 |" in third
    assert "3 attempt(s) of 10 allowed" in text


def test_diff_and_footer() -> None:
    text = render_summary(report())
    assert "```diff\n--- a/transpose.cu" in text
    assert "+    __shared__ float tile[32][33];\n```" in text
    assert "Files changed: `src/transpose.cu`" in text
    assert text.rstrip().endswith("<sub>IntelliPerf 0.1.0 · NVIDIA H200 (sm_90)</sub>")
    # the order the reviewer reads in
    marks = ["## ", "### Bottleneck\n", "### Speedup", "### Bottleneck metric", "### Validation"]
    marks += ["### Attempts", "### Diff", "\n---\n<sub>"]
    positions = [text.index(mark) for mark in marks]
    assert positions == sorted(positions)


def test_no_best_says_so_and_gives_the_note() -> None:
    text = render_summary(failed_report())
    title = text.splitlines()[0]
    assert "no validated improvement" in title and f"`{DEMANGLED}`" in title
    assert "**Outcome: exhausted** after 3 attempt(s): 10 attempts, none both correct and faster" in text
    assert "### Speedup" not in text and "### Diff" not in text
    assert len(table_rows(text, "### Attempts")) == 3
    assert "★" not in table_rows(text, "### Attempts")[2]


def test_diagnose_only_report_renders() -> None:
    diagnosed = report(selected=None, attempts=[], optimization=None, best=None, diff=None)
    text = render_summary(diagnosed)
    assert text.startswith("## IntelliPerf diagnosis: Shared-memory bank conflicts")
    assert "Diagnosis only" in text
    assert ">    42 |" in text
    assert "### Attempts" not in text


def test_bare_report_renders() -> None:
    bare = report(
        device=None, kernels=[], diagnoses=[], selected=None, attempts=[], optimization=None, best=None
    )
    bare = bare.model_copy(update={"diff": None})
    text = render_summary(bare)
    assert "no bottleneck" in text.splitlines()[0]
    assert "No kernel was diagnosed" in text
    assert "device unknown" in text


def test_markup_in_fields_is_contained() -> None:
    sneaky = DIFF + "+ // ``` fence in the diff\n"
    text = render_summary(report(diff=sneaky))
    assert "````diff" in text and text.count("````") == 2
    named = report(
        kernels=[report().kernels[0].model_copy(update={"demangled": "void k<float>(float*)"})],
        best=None,
        optimization=Optimization(status="aborted", note="build broke: <stderr> | here", exit_code=5),
    )
    text = render_summary(named)
    assert "`void k<float>(float*)`" in text.splitlines()[0]
    assert "(exit code 5): build broke: &lt;stderr&gt; | here" in text


def test_console_shows_the_attempts_and_outcome() -> None:
    console = Console(record=True, width=200)
    render_report(report(), console)
    out = console.export_text()
    assert "Attempts" in out
    for status in ("build_failed", "not_faster", "success"):
        assert status in out
    assert "error: expected ';' | near tile" in out
    assert "1000 → 0" in out
    assert "Optimization: success — attempt 3 is correct and faster" in out
    assert "Best: attempt 3, 2.06x (95% interval 2.01 to 2.10, faster)" in out


def test_console_diagnosis_only_has_no_attempts() -> None:
    console = Console(record=True, width=200)
    render_report(report(attempts=[], optimization=None, best=None, diff=None), console)
    out = console.export_text()
    assert "Attempts" not in out and "Optimization:" not in out
    assert "Top kernels" in out


def test_the_console_shows_the_checks_and_why_one_was_skipped() -> None:
    checks = [
        JudgeCheck(name="end_to_end", outcome="passed"),
        JudgeCheck(name="isolated", outcome="passed"),
        JudgeCheck(name="prefilled_nan", outcome="failed", detail="run with NaN: mismatch"),
    ]
    failed = validation(None).model_copy(
        update={"passed": False, "failure": "mismatch", "reason": "run with NaN: mismatch", "checks": checks}
    )
    console = Console(record=True, width=200)
    render_validation(failed, console)
    text = console.export_text()
    assert "checks: end_to_end passed, isolated passed, prefilled_nan failed" in text
    skipped = [
        *checks[:2],
        JudgeCheck(name="prefilled_nan", outcome="skipped", detail="no output overwritten whole"),
    ]
    console = Console(record=True, width=200)
    render_validation(validation(None).model_copy(update={"checks": skipped}), console)
    assert "  prefilled_nan skipped: no output overwritten whole" in console.export_text()


def test_the_kernels_alone_are_in_the_speedup_table_and_the_checks_have_titles() -> None:
    """The replay timer's speedups (accordo.replay) beside the in-application one, and a title for each of
    the judge's checks."""
    import json
    from pathlib import Path

    from intelliperf.contract import Report
    from intelliperf.contract.report import JudgeCheck
    from intelliperf.summary import CHECK_TITLES

    recorded = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "loop" / "transpose_bank"
    report = Report.model_validate(json.loads((recorded / "report.json").read_text()))
    assert report.best is not None
    best = next(a for a in report.attempts if a.index == report.best.attempt)
    assert best.validation is not None and best.validation.isolated_speedup is not None
    assert "| Kernel alone, L2 flushed (replayed launch) |" in render_summary(report)

    def with_validation(**update: object) -> str:
        validation = best.validation.model_copy(update=update)  # type: ignore[union-attr]
        attempts = [
            a.model_copy(update={"validation": validation}) if a is best else a for a in report.attempts
        ]
        return render_summary(report.model_copy(update={"attempts": attempts}))

    assert "Kernel alone" not in with_validation(isolated_speedup=None, isolated_speedup_warm=None)
    alone = report.best.speedup.model_copy(update={"median": 3.58, "low": 3.5, "high": 3.66})
    names = JudgeCheck.model_fields["name"].annotation.__args__  # type: ignore[union-attr]
    checks = [JudgeCheck(name=name, outcome="passed") for name in names]
    summary = with_validation(isolated_speedup=alone, isolated_speedup_warm=alone, checks=checks)
    assert "| Kernel alone, L2 flushed (replayed launch) | 3.58x (3.50x to 3.66x) |" in summary
    assert "| Kernel alone, L2 warm (replayed launch) | 3.58x (3.50x to 3.66x) |" in summary
    assert set(CHECK_TITLES) == set(names)
    assert "- the kernel replayed alone on the captured inputs: **passed**" in summary
