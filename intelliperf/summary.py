"""The pull request's body: a Markdown summary of a report, written for the reviewer.

`render_summary` says what was slow and where (the bottleneck and its hot lines), what the rewrite
gained and how that was measured (the speedup with its interval, the formula's metric before and
after, the validation of the outputs), what else was tried (one row per attempt) and the diff. It
renders report fields only and works on any report: diagnosis only, a loop that found nothing, or
one without device or selection.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from formulas.registry import FormulaRegistrationError, get
from intelliperf.contract.report import (
    Attempt,
    BestResult,
    BufferComparison,
    Diagnosis,
    JudgeCheck,
    LaunchComparison,
    Report,
    SourceLocation,
    Speedup,
    ValidationResult,
)
from intelliperf.errors import SpecError
from intelliperf.tracking.against_base import KernelMove

__all__ = ["format_number", "render_summary"]

REASON_WIDTH = 120
MAX_LOCATIONS = 5
MAX_DIFF_CHARS = 40_000
"""GitHub refuses pull request bodies over 65,536 characters; the full diff is in the PR anyway."""


# --- formatting helpers ---------------------------------------------------------------------


def _cell(text: object) -> str:
    """One Markdown table cell: no newlines, pipes escaped, no stray HTML."""
    flat = " ".join(str(text).split())
    return html.escape(flat, quote=False).replace("|", "\\|")


def _plain(text: str) -> str:
    """Free text in a paragraph: HTML-looking parts (`vector<float>`) shown as written."""
    return html.escape(text, quote=False)


def _code(text: str) -> str:
    """An inline code span that survives backticks in the text."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _fence(body: str, lang: str) -> str:
    """A fenced block whose fence is longer than any backtick run inside."""
    longest = max((len(run) for run in re.findall(r"`{3,}", body)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{body.rstrip()}\n{ticks}"


def _table(header: list[str], rows: list[list[str]], align: str = "") -> str:
    """A Markdown table; `align` holds one of l/r per column (left when missing)."""
    marks = [("---:" if align[i : i + 1] == "r" else "---") for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(marks) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _ns(ns: float) -> str:
    """A duration given in nanoseconds, in the unit that reads best."""
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if abs(ns) >= scale:
            return f"{ns / scale:,.3g} {unit}" if ns / scale < 1000 else f"{ns / scale:,.0f} {unit}"
    return f"{ns:,.0f} ns"


def moves_table(moves: Sequence[KernelMove], dashboard_url: str | None = None) -> str:
    """A tracking comment's Markdown: the kernels that moved against the base branch, slowest change first,
    or a sentence that none did."""
    moved = sorted((m for m in moves if m.moved), key=lambda m: -m.change)
    link = f"\n\n[Each kernel's history on the dashboard]({dashboard_url})" if dashboard_url else ""
    if not moved:
        return (
            f"No kernel's time moved beyond the noise against the base branch ({len(moves)} compared).{link}"
        )
    rows = [
        f"| `{m.kernel.replace('`', '')}` | {_ns(m.base_ns)} | {_ns(m.head_ns)} | "
        f"{m.change:+.1%} | {m.low:+.1%} to {m.high:+.1%} | {'slower' if m.change > 0 else 'faster'} |"
        for m in moved
    ]
    header = "| kernel | base | this PR | change | 95% interval | |\n|---|---:|---:|---:|---:|---|"
    return (
        f"{len(moved)} of {len(moves)} kernels moved beyond the noise against the base branch:\n\n"
        + header
        + "\n"
        + "\n".join(rows)
        + link
    )


def format_number(value: float) -> str:
    """A metric's value as every surface shows it (summary, terminal, dashboard): whole numbers with
    thousands separated by commas, others to 4 significant digits."""
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.4g}"


def _change(before: float, after: float) -> str:
    if before == 0:
        return "—"
    return f"{(after - before) / before:+.1%}"


def _first_line(text: str | None, width: int = REASON_WIDTH) -> str:
    line = next((part.strip() for part in (text or "").splitlines() if part.strip()), "")
    return line if len(line) <= width else line[: width - 1] + "…"


# --- what the report is about -------------------------------------------------------------------


def _formula_title(name: str) -> str:
    """The formula's title ("Shared-memory bank conflicts"), or its name when it is not installed."""
    try:
        return get(name).title
    except (SpecError, FormulaRegistrationError, ImportError):
        return name


def _demangled(report: Report, kernel: str) -> str:
    return next((k.demangled for k in report.kernels if k.name == kernel), kernel)


def _focus(report: Report) -> Diagnosis | None:
    """The selected diagnosis; without a selection (diagnosis only) the main bottleneck found."""
    if report.selected is not None:
        wanted = (report.selected.kernel, report.selected.formula)
    elif report.optimization is not None and report.optimization.kernel and report.optimization.formula:
        wanted = (report.optimization.kernel, report.optimization.formula)
    else:
        rank = {k.name: k.rank for k in report.kernels}
        present = sorted(
            report.bottlenecks, key=lambda d: (rank.get(d.kernel, len(rank) + 1), -d.estimated_saving_ns)
        )
        return present[0] if present else None
    return report.diagnosis_for(*wanted)


def _target(report: Report, focus: Diagnosis | None) -> tuple[str, str] | None:
    """(formula name, kernel mangled name) the summary is about."""
    if report.selected is not None:
        return report.selected.formula, report.selected.kernel
    if focus is not None:
        return focus.formula, focus.kernel
    opt = report.optimization
    if opt is not None and opt.formula and opt.kernel:
        return opt.formula, opt.kernel
    return None


# --- sections -----------------------------------------------------------------------------------


def _title(report: Report, target: tuple[str, str] | None) -> str:
    where = ""
    if target is not None:
        formula, kernel = target
        where = f"{_plain(_formula_title(formula))} in {_code(_demangled(report, kernel))}"
    if report.best is not None:
        return f"## IntelliPerf: {where or 'kernel'} — {report.best.speedup.median:.2f}x faster"
    if report.optimization is None:
        return f"## IntelliPerf diagnosis: {where}" if where else "## IntelliPerf diagnosis: no bottleneck"
    suffix = f" for {where}" if where else ""
    return f"## IntelliPerf: no validated improvement{suffix}"


def _outcome(report: Report) -> str | None:
    opt = report.optimization
    if opt is None:
        return "Diagnosis only: the optimization loop did not run."
    if opt.status == "success" and report.best is not None:
        return None
    tried = f" after {len(report.attempts)} attempt(s)" if report.attempts else ""
    code = f" (exit code {opt.exit_code})" if opt.exit_code is not None else ""
    return f"**Outcome: {opt.status}**{tried}{code}: {_plain(opt.note)}"


def _location(loc: SourceLocation) -> str:
    head = f"{_code(f'{loc.file}:{loc.line}')} ({loc.share:.0%} of the excess)"
    if not loc.code:
        return head
    body = "\n".join(f"{'>' if line.hot else ' '} {line.line:5d} | {line.text}" for line in loc.code)
    return f"{head}\n\n{_fence(body, 'cuda')}"


def _bottleneck(report: Report, focus: Diagnosis | None) -> str:
    if focus is None:
        if report.diagnoses:
            return "### Bottleneck\n\nNo bottleneck found by the formulas run."
        return "### Bottleneck\n\nNo kernel was diagnosed."
    parts = [
        "### Bottleneck",
        f"**{_plain(_formula_title(focus.formula))}** ({_code(focus.formula)}) in "
        f"{_code(_demangled(report, focus.kernel))}: severity **{focus.severity}**, estimated saving "
        f"{_ns(focus.estimated_saving_ns)} per launch ({focus.estimated_saving_fraction:.0%} of the "
        "kernel's time).",
        _plain(focus.summary),
    ]
    if focus.locations:
        parts.append("**Hot lines**")
        parts += [_location(loc) for loc in focus.locations[:MAX_LOCATIONS]]
        hidden = len(focus.locations) - MAX_LOCATIONS
        if hidden > 0:
            parts.append(f"… and {hidden} more line(s).")
    return "\n\n".join(parts)


def _regions(report: Report) -> str | None:
    profile = report.intra_kernel
    if profile is None or not profile.regions:
        return None
    rows = [
        [
            _plain(region.kind),
            f"{_plain(profile.file)}:{region.line}",
            _code(region.text) if region.text else "",
            f"{region.share:.0%}",
            f"{region.cycles_per_warp:,.0f}",
        ]
        for region in profile.regions
    ]
    table = _table(["region", "line", "code", "share of cycles", "cycles per warp"], rows, "lllrr")
    return (
        f"### Where {_code(profile.kernel)}'s cycles go\n\n"
        f"Measured inside the kernel with Proton's instrumentation ({profile.launches} launch(es), "
        f"{profile.warps_per_program} warp(s) per program).\n\n{table}\n\n{_plain(profile.note)}."
    )


def _isolated_rows(validation: ValidationResult | None) -> list[list[str]]:
    """The replay timer's speedups (the kernels alone on one captured launch), as table rows."""
    rows = []
    if validation is not None:
        for label, speedup in (
            ("Kernel alone, L2 flushed (replayed launch)", validation.isolated_speedup),
            ("Kernel alone, L2 warm (replayed launch)", validation.isolated_speedup_warm),
        ):
            if speedup is not None:
                rows.append([label, f"{speedup.median:.2f}x ({speedup.low:.2f}x to {speedup.high:.2f}x)"])
    return rows


def _speedup(speedup: Speedup, validation: ValidationResult | None = None) -> str:
    kernel_time = f"{_ns(speedup.reference_ns)} → {_ns(speedup.candidate_ns)}"
    rows = [
        ["Speedup (median)", f"**{speedup.median:.2f}x**"],
        ["95% interval", f"{speedup.low:.2f}x to {speedup.high:.2f}x"],
        ["Verdict", speedup.verdict + ("" if speedup.significant else " (not significant)")],
        ["Kernel time per run (reference → candidate)", kernel_time],
        ["Runs", f"{speedup.runs} each"],
    ]
    if speedup.reference_wall_s is not None and speedup.candidate_wall_s is not None:
        wall = f"{_ns(speedup.reference_wall_s * 1e9)} → {_ns(speedup.candidate_wall_s * 1e9)}"
        rows.append(["Application wall time (reference → candidate)", wall])
    rows += _isolated_rows(validation)
    parts = ["### Speedup", _table(["measure", "value"], rows)]
    if speedup.method:
        parts.append(f"<sub>{_plain(' '.join(speedup.method.split()))}</sub>")
    if speedup.flagged_for_review:
        parts.append(
            "> [!WARNING]\n> Over 10x faster: a human should review this result before merging "
            "(a rewrite that skips work can look this fast)."
        )
    return "\n\n".join(parts)


def _metric(best: BestResult) -> str:
    row = [
        _cell(best.metric_name),
        format_number(best.metric_before),
        format_number(best.metric_after),
        _change(best.metric_before, best.metric_after),
    ]
    table = _table(["metric", "before", "after", "change"], [row], "lrrr")
    return f"### Bottleneck metric\n\n{table}"


def _worst_launch(result: ValidationResult) -> LaunchComparison | None:
    def badness(launch: LaunchComparison) -> tuple[bool, float, float]:
        outputs = [b for b in launch.buffers if b.role == "output"]
        rel = max((b.max_rel_error or 0.0 for b in outputs), default=0.0)
        abs_ = max((b.max_abs_error or 0.0 for b in outputs), default=0.0)
        return (not launch.passed, rel, abs_)

    return max(result.launches, key=badness, default=None)


def _buffer_row(b: BufferComparison) -> list[str]:
    def err(x: float | None) -> str:
        return "—" if x is None else f"{x:.3g}"

    return [
        str(b.param),
        _cell(b.dtype),
        f"{b.bytes:,}",
        err(b.max_abs_error),
        err(b.max_rel_error),
        err(b.bound_use),
    ]


def bounds_text(result: ValidationResult) -> str:
    """The tolerances a verdict was reached with, in words (terminal and Markdown summary)."""
    parts = []
    if result.atol is not None and result.rtol is not None:
        parts.append(f"atol {result.atol:g}, rtol {result.rtol:g}, plus rounding")
    if result.calibration_runs:
        noise = result.noise_max or 0.0
        spread = (
            f", noise up to {noise:.3g} (alpha {result.alpha:g})" if noise and result.alpha else ", no noise"
        )
        parts.append(f"{result.calibration_runs} reference runs{spread}")
    if result.bound_use is not None:
        parts.append(f"worst element at {result.bound_use:.3g} of its bound")
    return "; ".join(parts)


def _validation(result: ValidationResult) -> str:
    if result.judge == "unittest":
        verdict = "passed" if result.passed else f"failed: {_plain(_first_line(result.reason))}"
        return f"### Validation\n\nJudged by the project's own tests (`--unittest_command`): {verdict}."
    verdict = "passed" if result.passed else f"failed ({result.failure}): {_plain(result.reason or '')}"
    line = f"Outputs {verdict} on {result.launches_compared} launch(es)"
    bounds = bounds_text(result)
    if bounds:
        line += f" ({bounds})"
    parts = ["### Validation", line + "."]
    if result.checks:
        parts.append(_checks(result.checks))
    worst = _worst_launch(result)
    outputs = [b for b in worst.buffers if b.role == "output"] if worst else []
    if worst is not None and outputs:
        parts.append(f"Output buffers of the worst launch ({worst.launch + 1}):")
        header = ["param", "type", "bytes", "max abs error", "max rel error", "bound use"]
        parts.append(_table(header, [_buffer_row(b) for b in outputs], "llrrrr"))
    return "\n\n".join(parts)


CHECK_TITLES = {
    "end_to_end": "the program end to end",
    "isolated": "each launch on the reference's own inputs",
    "prefilled_nan": "outputs filled with NaN before every launch",
    "fresh_inputs": "fresh inputs, outputs filled with random bytes",
    "launch_pattern": "streams, CUDA graphs and persisting-L2 limit as the reference's",
    "replay": "the kernel replayed alone on the captured inputs",
    "timing_agreement": "in-application speedup within 2x of a replayed one",
    "revalidated": "each launch judged again after timing",
    "timed_launches": "the timed launches asked for the work that was judged",
}


def _checks(checks: list[JudgeCheck]) -> str:
    """One line per check Accordo ran: what it checks and how it ended (why, when not passed)."""
    lines = []
    for check in checks:
        why = f": {_plain(_first_line(check.detail))}" if check.detail and check.outcome != "passed" else ""
        lines.append(f"- {CHECK_TITLES[check.name]}: **{check.outcome}**{why}")
    return "Checks:\n\n" + "\n".join(lines)


def _seconds(attempt: Attempt) -> tuple[str, str]:
    work = sum(v for k, v in attempt.seconds.items() if k != "llm")
    llm = attempt.seconds.get("llm")
    return (f"{work:.1f}" if attempt.seconds else "—", "—" if llm is None else f"{llm:.1f}")


def _attempt_row(attempt: Attempt, best: int | None) -> list[str]:
    speedup = attempt.speedup
    tokens = "—"
    if attempt.tokens_in is not None or attempt.tokens_out is not None:
        tokens = f"{attempt.tokens_in or 0:,} / {attempt.tokens_out or 0:,}"
    work, llm = _seconds(attempt)
    return [
        f"{attempt.index}{' ★' if attempt.index == best else ''}",
        str(attempt.round),
        attempt.status,
        _cell(_first_line(attempt.reason)),
        "—" if speedup is None else f"{speedup.median:.2f}x",
        "—" if attempt.metric_after is None else format_number(attempt.metric_after),
        tokens,
        work,
        llm,
    ]


def _attempts(report: Report) -> str:
    best = report.best.attempt if report.best is not None else None
    header = ["#", "round", "status", "reason", "speedup", "metric after", "tokens in / out", "s", "LLM s"]
    rows = [_attempt_row(a, best) for a in report.attempts]
    table = _table(header, rows, "rrllrrrrr")
    allowed = report.optimization.attempts_allowed if report.optimization else 0
    of = f" of {allowed} allowed" if allowed else ""
    return f"### Attempts\n\n{len(report.attempts)} attempt(s){of}; ★ marks the one kept.\n\n{table}"


def _diff(report: Report) -> str | None:
    if not report.diff:
        return None
    diff = report.diff
    note = ""
    if len(diff) > MAX_DIFF_CHARS:
        diff = diff[:MAX_DIFF_CHARS].rsplit("\n", 1)[0]
        note = "\n\nThe diff is cut short here; the pull request's changes hold all of it."
    files = report.best.files if report.best is not None else []
    listed = f"Files changed: {', '.join(_code(f) for f in files)}\n\n" if files else ""
    return f"### Diff\n\n{listed}{_fence(diff, 'diff')}{note}"


def _footer(report: Report) -> str:
    device = f"{_plain(report.device.name)} ({report.device.arch})" if report.device else "device unknown"
    return f"---\n<sub>IntelliPerf {_plain(report.intelliperf_version)} · {device}</sub>"


# --- the document -------------------------------------------------------------------------------


def render_summary(report: Report) -> str:
    """The pull request body for `report`, as Markdown."""
    focus = _focus(report)
    sections: list[str | None] = [
        _title(report, _target(report, focus)),
        _outcome(report),
        _bottleneck(report, focus),
        _regions(report),
    ]
    if report.best is not None:
        attempt = report.best_attempt
        sections += [
            _speedup(report.best.speedup, attempt.validation if attempt else None),
            _metric(report.best),
        ]
        if attempt is not None and attempt.validation is not None:
            sections.append(_validation(attempt.validation))
    if report.attempts:
        sections.append(_attempts(report))
    sections += [_diff(report), _footer(report)]
    return "\n\n".join(s for s in sections if s) + "\n"
