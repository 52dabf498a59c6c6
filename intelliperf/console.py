"""What the terminal shows: a live stage display while passes run, then the table of top kernels."""

from __future__ import annotations

import time

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from intelliperf.contract import Diagnosis, IntraKernelProfile, Report
from intelliperf.contract.report import Attempt, Speedup, ValidationResult
from intelliperf.summary import bounds_text

__all__ = ["ConsoleProgress", "attempts_table", "kernel_table", "render_report", "render_validation"]


class ConsoleProgress:
    """Prints each stage as it starts (with a spinner on a terminal) and its result when it ends."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._status = None
        self._started: dict[str, float] = {}

    def start(self, stage: str, detail: str = "") -> None:
        self._started[stage] = time.perf_counter()
        text = f"[bold]{stage}[/bold] {detail}"
        if self.console.is_terminal:
            self._status = self.console.status(text)
            self._status.start()
        else:
            self.console.print(f"… {stage}: {detail}", highlight=False)

    def done(self, stage: str, detail: str = "") -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
        elapsed = time.perf_counter() - self._started.pop(stage, time.perf_counter())
        self.console.print(
            f"[green]✓[/green] {stage}: {detail} [dim]({elapsed:.1f} s)[/dim]", highlight=False
        )

    def note(self, message: str) -> None:
        self.console.print(f"  {message}", highlight=False)

    def close(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


def _short(name: str, width: int = 48) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _main_bottleneck(diagnoses: list[Diagnosis]) -> Diagnosis | None:
    present = [d for d in diagnoses if d.present]
    return max(present, key=lambda d: d.estimated_saving_ns) if present else None


def kernel_table(report: Report) -> Table:
    table = Table(title="Top kernels", header_style="bold")
    for column, justify in [
        ("#", "right"),
        ("kernel", "left"),
        ("launches", "right"),
        ("total", "right"),
        ("share", "right"),
        ("bottleneck", "left"),
        ("severity", "left"),
        ("est. saving", "right"),
        ("hot line", "left"),
    ]:
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for kernel in report.kernels:
        mine = [d for d in report.diagnoses if d.kernel == kernel.name]
        main = _main_bottleneck(mine)
        hot = ""
        if main and main.locations:
            loc = main.locations[0]
            hot = f"{loc.file.rsplit('/', 1)[-1]}:{loc.line}"
        severity_style = {"high": "red", "medium": "yellow", "low": "cyan"}.get(
            main.severity if main else "", ""
        )
        table.add_row(
            str(kernel.rank),
            _short(kernel.demangled),
            str(kernel.launches),
            f"{kernel.total_ns / 1e6:.2f} ms",
            f"{kernel.share:.0%}",
            main.formula if main else ("—" if mine else ("library" if kernel.library else "not profiled")),
            f"[{severity_style}]{main.severity}[/]" if main else "",
            f"{main.estimated_saving_fraction:.0%}" if main else "",
            hot,
        )
    return table


def regions_table(profile: IntraKernelProfile) -> Table:
    table = Table(
        title=f"Where {profile.kernel}'s cycles go (Proton, {profile.launches} launch(es))",
        header_style="bold",
    )
    for column, justify in (("region", "left"), ("line", "right"), ("code", "left"), ("share", "right"),
                            ("cycles/warp", "right")):  # fmt: skip
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for region in profile.regions:
        table.add_row(
            region.kind,
            str(region.line),
            region.text[:60],
            f"{region.share:.0%}",
            f"{region.cycles_per_warp:,.0f}",
        )
    return table


def render_report(report: Report, console: Console) -> None:
    # kernels by the demangled names the table shows (diagnoses carry the mangled one)
    shown = {kernel.name: kernel.demangled for kernel in report.kernels}
    if report.device:
        console.print(f"Device: {report.device.name} ({report.device.arch})", highlight=False)
    console.print(kernel_table(report))
    for diagnosis in report.bottlenecks:
        name = escape(_short(shown.get(diagnosis.kernel, diagnosis.kernel), 60))
        console.print(
            f"[bold]{diagnosis.formula}[/bold] in {name}: {escape(diagnosis.summary)}", highlight=False
        )
        for loc in diagnosis.locations[:1]:
            for line in loc.code:
                marker = ">" if line.hot else " "
                console.print(f"  {marker} {line.line:5d} | {line.text}", highlight=False, markup=False)
    if report.intra_kernel is not None and report.intra_kernel.regions:
        console.print(regions_table(report.intra_kernel))
    if report.selected:
        name = shown.get(report.selected.kernel, report.selected.kernel)
        console.print(f"Selected: {report.selected.formula} on {name} — {report.selected.why}", markup=False)
    elif not report.bottlenecks and report.diagnoses:
        console.print("[green]No bottleneck found by the formulas run.[/green]")
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
    if report.attempts:
        console.print(attempts_table(report.attempts))
    _render_outcome(report, console)


_STATUS_STYLE = {"success": "green", "not_faster": "yellow", "no_metric_gain": "yellow"}


def _first_line(text: str | None, width: int = 80) -> str:
    line = next((part.strip() for part in (text or "").splitlines() if part.strip()), "")
    return _short(line, width)


def _metric_change(before: float | None, after: float | None) -> str:
    if before is None and after is None:
        return ""
    return f"{'?' if before is None else f'{before:.4g}'} → {'?' if after is None else f'{after:.4g}'}"


def attempts_table(attempts: list[Attempt]) -> Table:
    """One row per reply of the model: what became of it, why, what it gained, how long it took."""
    table = Table(title="Attempts", header_style="bold")
    for column in ("#", "status", "reason", "speedup", "metric", "seconds"):
        table.add_column(column, justify="right" if column in ("#", "speedup", "seconds") else "left")
    for attempt in attempts:
        style = _STATUS_STYLE.get(attempt.status, "red")
        speedup = attempt.speedup
        table.add_row(
            str(attempt.index),
            f"[{style}]{attempt.status}[/]",
            escape(_first_line(attempt.reason)),
            "" if speedup is None else f"{speedup.median:.2f}x",
            _metric_change(attempt.metric_before, attempt.metric_after),
            f"{sum(attempt.seconds.values()):.1f}" if attempt.seconds else "",
        )
    return table


def _render_outcome(report: Report, console: Console) -> None:
    """The loop's verdict: its status and note, and the kept result with its interval and metric."""
    opt = report.optimization
    if opt is not None:
        style = "green" if opt.status == "success" else "yellow" if opt.status == "exhausted" else "red"
        console.print(f"Optimization: [bold {style}]{opt.status}[/] — {escape(opt.note)}", highlight=False)
    best = report.best
    if best is not None:
        s = best.speedup
        console.print(
            f"Best: attempt {best.attempt}, [bold]{s.median:.2f}x[/bold] (95% interval {s.low:.2f} to "
            f"{s.high:.2f}, {s.verdict}); {escape(best.metric_name)} "
            f"{_metric_change(best.metric_before, best.metric_after)}",
            highlight=False,
        )
        if s.flagged_for_review:
            console.print("[bold yellow]over 10x faster: a human should review this result[/bold yellow]")


def render_validation(result: ValidationResult, console: Console) -> None:
    """The verdict, the per-buffer comparison of the first failing (or the last) launch, the speedup."""
    if result.passed:
        console.print(
            f"[bold green]PASS[/bold green] {result.kernel}: {result.launches_compared} launches match the "
            f"reference ({bounds_text(result)})",
            highlight=False,
        )
    else:
        console.print(f"[bold red]FAIL[/bold red] ({result.failure}) {result.reason}", highlight=False)
    if result.checks:
        colors = {"passed": "green", "failed": "red", "skipped": "yellow"}
        ran = ", ".join(f"{c.name} [{colors[c.outcome]}]{c.outcome}[/]" for c in result.checks)
        console.print(f"checks: {ran}", highlight=False)
        for check in result.checks:
            if check.outcome == "skipped":
                console.print(f"  {check.name} skipped: {escape(check.detail or '')}", highlight=False)
    shown = next(
        (x for x in result.launches if not x.passed), result.launches[-1] if result.launches else None
    )
    if shown is not None and shown.buffers:
        table = Table(title=f"Launch {shown.launch + 1}", header_style="bold")
        columns = ("param", "role", "type", "bytes", "result", "max abs err", "max rel err", "bound use")
        for column in (*columns, "first bad"):
            table.add_column(column, justify="right" if column not in ("role", "type", "result") else "left")
        for b in shown.buffers:
            table.add_row(
                str(b.param),
                b.role,
                b.dtype,
                f"{b.bytes:,}",
                "[green]ok[/green]" if b.passed else "[red]fail[/red]",
                "" if b.max_abs_error is None else f"{b.max_abs_error:.3g}",
                "" if b.max_rel_error is None else f"{b.max_rel_error:.3g}",
                "" if b.bound_use is None else f"{b.bound_use:.3g}",
                "" if b.first_mismatch is None else str(b.first_mismatch),
            )
        console.print(table)
    speedup = result.speedup
    if speedup is not None:
        console.print(
            f"speedup [bold]{speedup.median:.3f}x[/bold] (95% interval {speedup.low:.3f} to "
            f"{speedup.high:.3f}, {speedup.runs} runs each): {speedup.verdict}; kernel time "
            f"{speedup.reference_ns / 1e3:,.1f} µs → {speedup.candidate_ns / 1e3:,.1f} µs per run",
            highlight=False,
        )
        if speedup.flagged_for_review:
            console.print("[bold yellow]over 10x faster: a human should review this result[/bold yellow]")
    render_isolated_speedups(result.isolated_speedup, result.isolated_speedup_warm, console)
    if result.reproducer is not None:
        console.print(
            f"reproducer: {escape(result.reproducer)} (intelliperf replay {escape(result.reproducer)})"
        )


def render_isolated_speedups(cold: Speedup | None, warm: Speedup | None, console: Console) -> None:
    """The replay timer's speedups: the kernels alone on one captured launch."""
    for label, speedup in (("L2 flushed", cold), ("L2 warm", warm)):
        if speedup is not None:
            console.print(
                f"kernel alone ({label}): [bold]{speedup.median:.3f}x[/bold] (95% interval "
                f"{speedup.low:.3f} to {speedup.high:.3f}, {speedup.runs} launches each); "
                f"{speedup.reference_ns / 1e3:,.2f} µs → {speedup.candidate_ns / 1e3:,.2f} µs per launch",
                highlight=False,
            )
