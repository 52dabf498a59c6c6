"""The `intelliperf` command. Thin: it turns options into a JobSpec and hands it to the engine."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError as PydanticValidationError
from rich.console import Console
from rich.markup import escape

from intelliperf import __version__
from intelliperf.contract import Application, JobSpec, LlmSettings, Report, Tolerances
from intelliperf.errors import IntelliPerfError, SpecError, plain_message

app = typer.Typer(
    name="intelliperf",
    help="Find the GPU kernel that costs the most, tell why and on which line, and fix it.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # Click's plain help: every option's whole name and default at any terminal width (rich's table cut
    # --accordo_absolute_tolerance at 80 columns)
    rich_markup_mode=None,
)
# Off a terminal (CI logs, pipes) rich would wrap at 80 columns and split messages mid-sentence.
stdout = Console(width=None if sys.stdout.isatty() else 160)
stderr = Console(stderr=True, soft_wrap=True)

RUN_HELP = """Diagnose the hottest kernels of an application, then have an LLM fix the worst bottleneck.

Every rewrite is built, validated against the original by Accordo and timed on the GPU; the best
validated one is reported (with -l, written back). -f diagnoseOnly stops after the diagnosis.

Example: intelliperf run -f bankConflict -b make -p examples/transpose_bank -- ./bin/transpose
"""


def _spec_from_options(
    command: list[str],
    *,
    build_command: str | None,
    instrument_command: str | None,
    project_directory: Path,
    formula: str,
    top_n: int,
    num_attempts: int,
    candidates: int,
    tolerance: float | None,
    model: str,
    provider: str,
    api_base: str | None,
    kernel: str | None,
    in_place: bool,
    unittest_command: str | None = None,
    gpu_vendor: str = "nvidia",
    compare_files: list[str] | None = None,
) -> JobSpec:
    if not command:
        raise SpecError("no application given: put its command after `--`, e.g. `-- ./bin/app arg`")
    tolerances = Tolerances(atol=tolerance) if tolerance is not None else Tolerances()
    try:
        spec = JobSpec(
            project_directory=str(project_directory),
            build_command=build_command,
            instrument_command=instrument_command,
            applications=[Application(command=command, output_files=compare_files or [])],
            formula=formula,
            kernel=kernel,
            top_n=top_n,
            num_attempts=num_attempts,
            candidates_per_round=candidates,
            tolerances=tolerances,
            llm=LlmSettings(model=model, provider=provider, api_base=api_base),
            in_place=in_place,
            unittest_command=unittest_command,
            gpu={"vendor": gpu_vendor},
        )
    except PydanticValidationError as exc:
        raise SpecError(_explain_validation(exc)) from None
    from intelliperf.spec_checks import check_spec  # the formulas load only for a command that runs a job

    check_spec(spec)
    return spec


def _local_vendor() -> str:
    """The vendor of this machine's GPUs when they are all of one (the one device probe); else nvidia."""
    from intelliperf.gpu.probe import probe_gpus

    found = {gpu.vendor for gpu in probe_gpus()}
    return found.pop() if len(found) == 1 else "nvidia"


def _explain_validation(exc: PydanticValidationError) -> str:
    problems = [
        f"{'.'.join(str(p) for p in err['loc'])}: {plain_message(err['msg'])}" for err in exc.errors()
    ]
    return "invalid options: " + "; ".join(problems)


def check_writable(path: Path | None, option: str) -> None:
    """Refuse, before any GPU work, an output path the run could not write at its end."""
    if path is None:
        return
    folder = path.parent
    if path.is_dir():
        raise SpecError(f"{option} {path} is a directory; name a file")
    if not folder.is_dir():
        raise SpecError(
            f"{option} {path}: the folder {folder} does not exist",
            hint="create it first, or name a file in an existing folder",
        )
    if not os.access(folder, os.W_OK):
        raise SpecError(f"{option} {path}: the folder {folder} is not writable")


def _fail(error: IntelliPerfError) -> typer.Exit:
    stderr.print(f"[bold red]error:[/bold red] {escape(str(error))}", highlight=False, markup=True)
    return typer.Exit(code=error.exit_code)


# The options `run` and `submit` share: one declaration each.
BuildCommand = Annotated[
    str | None, typer.Option("-b", "--build_command", help="Command that builds the application")
]
InstrumentCommand = Annotated[
    str | None,
    typer.Option("-i", "--instrument_command", help="Build command with line info (default: -b)"),
]
ProjectDirectory = Annotated[
    Path, typer.Option("-p", "--project_directory", help="Project root; commands run there")
]
Formula = Annotated[
    str,
    typer.Option(
        "-f", "--formula", help="A formula's name (`intelliperf formulas` lists them), diagnoseOnly or auto"
    ),
]
TopN = Annotated[int, typer.Option("--top_n", help="Kernels to diagnose, hottest first")]
NumAttempts = Annotated[int, typer.Option("--num_attempts", help="Replies of the model to try, at most")]
Candidates = Annotated[
    int, typer.Option("--candidates", help="Best-of-N: replies per round, asked with the same prompt")
]
Tolerance = Annotated[
    float | None,
    typer.Option(
        "-t", "--accordo_absolute_tolerance", help="Validation absolute tolerance", show_default="1e-06"
    ),
]
UnittestCommand = Annotated[
    str | None,
    typer.Option(
        "--unittest_command",
        help="Judge rewrites by the project's own tests (a shell command, exit 0 = correct) instead of "
        "Accordo: rewrites may then change data layouts and host code",
    ),
]
Model = Annotated[str, typer.Option("-m", "--model", help="LLM model")]
Provider = Annotated[str, typer.Option("-r", "--provider", help="LLM provider (LiteLLM prefix)")]
ApiBase = Annotated[str | None, typer.Option("--api_base", help="OpenAI-compatible endpoint")]
OutputFile = Annotated[Path | None, typer.Option("-o", "--output_file", help="Write the JSON report here")]
SummaryFile = Annotated[
    Path | None, typer.Option("--summary_file", help="Write the Markdown summary (the PR body) here")
]
Kernel = Annotated[str | None, typer.Option("-k", "--kernel", help="Only kernels matching this regex")]
Replay = Annotated[
    Path | None,
    typer.Option("--replay", help="Use a profile recorded on a GPU machine instead of the GPU"),
]
CompareFile = Annotated[
    list[str] | None,
    typer.Option(
        "--compare_file",
        metavar="PATH",
        help="A file the application writes (relative to the project), compared between the original "
        "and each rewrite with Accordo's tolerances, beside --unittest_command's verdict (repeatable)",
    ),
]


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": False},
    help=RUN_HELP,
    options_metavar="[OPTIONS] -- COMMAND [ARGS]...",
)
def run(
    ctx: typer.Context,
    build_command: BuildCommand = None,
    instrument_command: InstrumentCommand = None,
    project_directory: ProjectDirectory = Path("."),
    formula: Formula = "auto",
    top_n: TopN = 10,
    num_attempts: NumAttempts = 10,
    candidates: Candidates = 1,
    tolerance: Tolerance = None,
    unittest_command: UnittestCommand = None,
    model: Model = "gpt-4o",
    provider: Provider = "openai",
    api_base: ApiBase = None,
    output_file: OutputFile = None,
    summary_file: SummaryFile = None,
    in_place: Annotated[
        bool, typer.Option("-l", "--in_place", help="Write the best validated rewrite back into the project")
    ] = False,
    kernel: Kernel = None,
    replay: Replay = None,
    compare_file: CompareFile = None,
    reproducer_dir: Annotated[
        Path | None,
        typer.Option(
            "--reproducer_dir",
            help="Save the best rewrite's reproducer here (run it with intelliperf replay)",
        ),
    ] = None,
    gpu_vendor: Annotated[
        str | None,
        typer.Option(
            "--gpu_vendor",
            help="nvidia or amd (default: the vendor of this machine's GPU, nvidia when it has none or both)",
        ),
    ] = None,
    counter_store: Annotated[
        Path | None,
        typer.Option(
            "--counter_store",
            help="A folder of counters kept from earlier runs: a kernel whose code hash, launch shapes and "
            "source files are unchanged is diagnosed from them without a counter pass; this run's are added",
        ),
    ] = None,
) -> None:
    progress = None
    try:
        spec = _spec_from_options(
            list(ctx.args),
            build_command=build_command,
            instrument_command=instrument_command,
            project_directory=project_directory,
            formula=formula,
            top_n=top_n,
            num_attempts=num_attempts,
            candidates=candidates,
            tolerance=tolerance,
            model=model,
            provider=provider,
            api_base=api_base,
            kernel=kernel,
            in_place=in_place,
            unittest_command=unittest_command,
            gpu_vendor=gpu_vendor or (_local_vendor() if replay is None else "nvidia"),
            compare_files=compare_file,
        )
        check_writable(output_file, "-o/--output_file")
        check_writable(summary_file, "--summary_file")
        if replay is not None and not replay.is_dir():
            raise SpecError(f"--replay {replay}: no such folder", hint="name a folder that holds a recording")
        if counter_store is not None and counter_store.exists() and not counter_store.is_dir():
            raise SpecError(f"--counter_store {counter_store}: not a folder")
        from intelliperf.console import ConsoleProgress, render_report
        from intelliperf.engine.counter_store import CounterStore, project_commit
        from intelliperf.engine.entry import run_spec

        progress = ConsoleProgress(stderr)
        store = (
            None
            if counter_store is None
            else CounterStore(counter_store, counter_store, commit=project_commit(project_directory))
        )
        report = run_spec(
            spec,
            project_directory,
            progress=progress,
            replay=replay,
            reproducer_dir=reproducer_dir,
            counter_store=store,
        )
        progress.close()
        render_report(report, stdout)
        if output_file is not None:
            output_file.write_text(report.model_dump_json(indent=2))
            stderr.print(f"report written to {output_file}", highlight=False)
        if summary_file is not None:
            from intelliperf.summary import render_summary

            summary_file.write_text(render_summary(report))
            stderr.print(f"summary written to {summary_file}", highlight=False)
        if report.optimization is not None and report.optimization.status == "aborted":
            stderr.print(
                f"[bold red]error:[/bold red] {escape(report.optimization.note or '')}", highlight=False
            )
            raise typer.Exit(code=report.optimization.exit_code or 1)
    except IntelliPerfError as error:
        raise _fail(error) from None
    finally:
        if progress is not None:
            progress.close()


SUBMIT_HELP = """Run the job on an IntelliPerf service instead of this machine, and follow it.

The project (-p) is packed as the GitHub Action packs it (the files git keeps) and posted with the job
the options make, as `intelliperf run` makes it; the job's events are followed live, then its table is
printed and the report written. Exit code: the job's (0 succeeded; the engine's code when it failed, as
`run` would exit; 1 another failure; 13 the service could not be reached or refused the job).

The service and token: --service/--token, else INTELLIPERF_SERVICE_URL/INTELLIPERF_TOKEN, else the
[service] table (url, token) of ~/.config/intelliperf/config.toml (or $INTELLIPERF_CONFIG).

Example: intelliperf submit -p examples/transpose_bank -f diagnoseOnly
    --replay tests/fixtures/gpu/transpose_bank/original -- ./bin/transpose
"""


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": False},
    help=SUBMIT_HELP,
    options_metavar="[OPTIONS] -- COMMAND [ARGS]...",
)
def submit(
    ctx: typer.Context,
    build_command: BuildCommand = None,
    instrument_command: InstrumentCommand = None,
    project_directory: ProjectDirectory = Path("."),
    formula: Formula = "auto",
    top_n: TopN = 10,
    num_attempts: NumAttempts = 10,
    candidates: Candidates = 1,
    tolerance: Tolerance = None,
    unittest_command: UnittestCommand = None,
    model: Model = "gpt-4o",
    provider: Provider = "openai",
    api_base: ApiBase = None,
    output_file: OutputFile = None,
    summary_file: SummaryFile = None,
    kernel: Kernel = None,
    replay: Annotated[
        Path | None,
        typer.Option(
            "--replay",
            help="A profile recorded on a GPU machine (any folder: uploaded with the project): the job is "
            "diagnosed from it, on any worker",
        ),
    ] = None,
    compare_file: CompareFile = None,
    gpu_vendor: Annotated[
        str, typer.Option("--gpu_vendor", help="nvidia or amd: which workers run it")
    ] = "nvidia",
    gpu_arch: Annotated[
        str | None, typer.Option("--gpu_arch", help="The GPU architecture to run on (sm_90, gfx942)")
    ] = None,
    service: Annotated[str | None, typer.Option("--service", help="The service's URL")] = None,
    token: Annotated[str | None, typer.Option("--token", help="An API token for the service")] = None,
    priority: Annotated[int | None, typer.Option("--priority", min=0, max=9, help="0 (lowest) to 9")] = None,
    no_follow: Annotated[
        bool, typer.Option("--no-follow", help="Print the job's id and exit 0 once it is queued")
    ] = False,
    timeout_minutes: Annotated[
        float, typer.Option("--timeout-minutes", min=0.1, help="Cancel the job if it has not ended by then")
    ] = 360.0,
    track: Annotated[
        bool,
        typer.Option(
            "--track",
            help="Measure and diagnose only, file the kernels' times under the project's git checkout "
            "(origin, commit, branch) and print those that moved against --base-branch",
        ),
    ] = False,
    base_branch: Annotated[
        str, typer.Option("--base-branch", help="With --track: the branch to compare with")
    ] = "main",
) -> None:
    from intelliperf.contract import TrackSettings
    from intelliperf.submit import (
        exit_code_of,
        git_checkout,
        llm_key,
        pack_with_replay,
        resolve_service,
        submit_job,
        tracking_of,
    )

    try:
        url, secret = resolve_service(service, token)
        check_writable(output_file, "-o/--output_file")
        check_writable(summary_file, "--summary_file")
        archive, replay_folder, files = pack_with_replay(project_directory, replay)
        spec = _spec_from_options(
            list(ctx.args),
            build_command=build_command,
            instrument_command=instrument_command,
            project_directory=Path("."),  # the archive is the project
            formula=formula,
            top_n=top_n,
            num_attempts=num_attempts,
            candidates=candidates,
            tolerance=tolerance,
            model=model,
            provider=provider,
            api_base=api_base,
            kernel=kernel,
            in_place=False,
            unittest_command=unittest_command,
            gpu_vendor=gpu_vendor,
            compare_files=compare_file,
        )
        updates: dict[str, object] = {"replay": replay_folder}
        if track:
            if formula not in ("auto", "diagnoseOnly"):
                raise SpecError(
                    f"--track measures and diagnoses only; leave -f/--formula out, not {formula!r}"
                )
            updates |= {
                "formula": "diagnoseOnly",
                "repository": git_checkout(project_directory),
                "track": TrackSettings(base_branch=base_branch),
            }
        if gpu_arch is not None:
            updates["gpu"] = spec.gpu.model_copy(update={"arch": gpu_arch})
        spec = JobSpec.model_validate({**spec.model_dump(), **updates})
        stderr.print(f"… packed {files} files of {project_directory} ({len(archive) / 2**20:.2f} MiB)")
        key = llm_key(spec)
        submission = submit_job(
            spec,
            archive,
            url=url,
            token=secret,
            secrets={"llm_key": key} if key else {},
            follow=not no_follow,
            timeout_s=timeout_minutes * 60,
            on_line=lambda line: stderr.print(line, highlight=False, markup=False),
            priority=priority,
        )
    except PydanticValidationError as exc:
        raise _fail(SpecError(_explain_validation(exc))) from None
    except IntelliPerfError as error:
        raise _fail(error) from None
    job = submission.job
    if not submission.followed:
        stdout.print(job["id"], highlight=False)
        return
    _show_job(job, submission.report, output_file, summary_file)
    if track and job.get("status") == "succeeded":
        try:
            compared = tracking_of(url, secret, str(job["id"]))
        except IntelliPerfError as error:
            raise _fail(error) from None
        stdout.print(compared["comment"], highlight=False, markup=False)
        for kernel, why in compared["not_compared"].items():
            stdout.print(f"not compared: {kernel}: {why}", highlight=False, markup=False)
    raise typer.Exit(code=exit_code_of(job))


def _show_job(
    job: dict[str, object],
    report: dict[str, object] | None,
    output_file: Path | None,
    summary_file: Path | None,
) -> None:
    """The finished job as `run` shows its own: the report's table, then the job's line; the files."""
    from intelliperf.console import render_report

    parsed = Report.model_validate(report) if report is not None else None
    if parsed is not None:
        render_report(parsed, stdout)
    line = f"job {job['id']}: {job['status']}" + (f" ({job['outcome']})" if job.get("outcome") else "")
    if job.get("speedup"):
        line += f", speedup {float(job['speedup']):.3g}x"  # type: ignore[arg-type]
    if job.get("pr_url"):
        line += f", pull request {job['pr_url']}"
    stdout.print(line, highlight=False)
    if job.get("error"):
        stderr.print(f"[bold red]error:[/bold red] {escape(str(job['error']))}", highlight=False, markup=True)
    if output_file is not None and report is not None:
        output_file.write_text(json.dumps(report, indent=2))
        stderr.print(f"report written to {output_file}", highlight=False)
    if summary_file is not None and parsed is not None:
        from intelliperf.summary import render_summary

        summary_file.write_text(render_summary(parsed))
        stderr.print(f"summary written to {summary_file}", highlight=False)


VALIDATE_HELP = """Check a candidate build of a kernel against the reference build, then time both.

Both commands must run the same host program; the kernel's buffers are captured before and after
every launch and compared. Exit code 0: correct; 1: rejected (the reason is printed).

Example: intelliperf validate -k block_sum --reference "bin/ref" --candidate "bin/fixed_good"
"""


@app.command(help=VALIDATE_HELP)
def validate(
    kernel: Annotated[str, typer.Option("-k", "--kernel", help="Kernel name, mangled name or regex")],
    reference: Annotated[str, typer.Option("--reference", help="Command that runs the reference")],
    candidate: Annotated[str, typer.Option("--candidate", help="Command that runs the candidate")],
    atol: Annotated[float, typer.Option("--atol", min=0, help="Absolute tolerance")] = 1e-6,
    rtol: Annotated[float, typer.Option("--rtol", min=0, help="Relative tolerance")] = 1e-5,
    runs: Annotated[int, typer.Option("--runs", min=2, help="Timing runs per side (interleaved)")] = 10,
    calibration_runs: Annotated[
        int, typer.Option("--calibration-runs", min=1, help="Reference runs that measure its own noise")
    ] = 3,
    noise_runs: Annotated[
        int,
        typer.Option("--noise-runs", min=2, help="Reference runs in all when the calibration runs disagree"),
    ] = 24,
    alpha: Annotated[
        float,
        typer.Option(
            "--alpha", min=1e-9, max=0.5, help="Chance per output that a rerun of the reference would fail"
        ),
    ] = 0.01,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="Seconds per application run")] = 120.0,
    dtype: Annotated[
        str, typer.Option("--dtype", help="Element type of every buffer (default: from the signature)")
    ] = "auto",
    cwd: Annotated[Path | None, typer.Option("--cwd", help="Working directory of both commands")] = None,
    no_timing: Annotated[bool, typer.Option("--no-timing", help="Check correctness only")] = False,
    timer: Annotated[
        str,
        typer.Option(
            "--timer", help="Kernel-time instrument: events (CUDA events around each launch) or cupti"
        ),
    ] = "events",
    output_file: Annotated[
        Path | None, typer.Option("-o", "--output_file", help="Write the JSON result here")
    ] = None,
    reproducer: Annotated[
        Path | None,
        typer.Option(
            "--reproducer",
            help="Save the timed launch with both kernels here (run it with intelliperf replay)",
        ),
    ] = None,
) -> None:
    import shlex

    from accordo.signature import kernel_pattern
    from accordo.validate import ValidationOptions
    from accordo.validate import validate as run_validation
    from intelliperf.console import render_validation
    from intelliperf.gpu.device import query_device
    from intelliperf.settings import get_settings

    try:
        try:
            options = ValidationOptions(
                atol=atol,
                rtol=rtol,
                runs=runs,
                calibration_runs=calibration_runs,
                noise_runs=noise_runs,
                alpha=alpha,
                timeout_s=timeout,
                element_type=dtype,
                measure=not no_timing,
                timer=timer,  # type: ignore[arg-type]
                capture_budget_bytes=get_settings().capture_budget_bytes,
            )
            reference_cmd, candidate_cmd = shlex.split(reference), shlex.split(candidate)
            kernel_pattern(kernel)
        except ValueError as exc:
            raise SpecError(str(exc)) from None
        if not reference_cmd or not candidate_cmd:
            raise SpecError("--reference and --candidate must not be empty")
        check_writable(output_file, "-o/--output_file")
        query_device(vendor="nvidia")  # validate runs Accordo (CUDA): say so before building anything
        result = run_validation(
            kernel,
            reference_cmd,
            candidate_cmd,
            cwd=cwd,
            options=options,
            progress=lambda message: stderr.print(f"… {message}", highlight=False),
            library=_build_native_library(),
            reproducer_dir=reproducer,
        )
    except IntelliPerfError as error:
        raise _fail(error) from None
    except ValueError as error:
        raise _fail(SpecError(str(error))) from None
    render_validation(result, stdout)
    if output_file is not None:
        output_file.write_text(result.model_dump_json(indent=2))
        stderr.print(f"result written to {output_file}", highlight=False)
    if not result.passed:
        raise typer.Exit(code=1)


REPLAY_HELP = """Check and time a reproducer with no application: the candidate's kernel is replayed on the
captured launch's inputs and its outputs compared with the reference's, then both kernels are timed on
that launch. A pull request from IntelliPerf links one; `intelliperf validate --reproducer DIR` saves one.
Exit code 0: the candidate's outputs match; 1: they do not.

Example: intelliperf replay ./reproducer
"""


@app.command(help=REPLAY_HELP)
def replay(
    folder: Annotated[
        Path, typer.Argument(help="The reproducer's folder (reproducer.json and two captures)")
    ],
    seconds: Annotated[float, typer.Option("--seconds", min=0.1, help="Length of the timing loop")] = 2.0,
) -> None:
    from accordo.reproducer import check_reproducer
    from intelliperf.console import render_isolated_speedups
    from intelliperf.gpu.device import query_device

    try:
        if not folder.is_dir():
            raise SpecError(f"{folder} is not a folder")
        query_device(vendor="nvidia")
        stderr.print(
            "… replaying the candidate's kernel on the captured inputs, then timing both", highlight=False
        )
        result = check_reproducer(folder, seconds=seconds)
    except IntelliPerfError as error:
        raise _fail(error) from None
    where = f"{result.kernel}, launch {result.launch + 1}"
    if not result.passed:
        stdout.print(
            f"[bold red]FAIL[/bold red] {escape(where)}: {escape(result.reason or '')}", highlight=False
        )
        raise typer.Exit(code=1)
    stdout.print(
        f"[bold green]PASS[/bold green] {escape(where)}: the candidate's kernel writes the reference's "
        "outputs"
    )
    render_isolated_speedups(result.cold, result.warm, stdout)
    if result.timing_problem is not None:
        stdout.print(f"not timed: {escape(result.timing_problem)}", highlight=False)


def _build_native_library() -> Path:
    """Accordo's CUPTI library, built now (and said so) when this version and toolchain have none yet."""
    from profiler.build import cached_library, native_library

    library = cached_library()
    if library is None:
        stderr.print(
            "… building Accordo's CUPTI library (once per version and toolchain, about 15 s; "
            "`intelliperf prepare` builds it ahead)",
            highlight=False,
        )
        library = native_library()
    return library


@app.command(
    help="Build what the GPU passes need ahead of the first job (Accordo's CUPTI library); a container "
    "image runs this when it is built, so no job pays for it."
)
def prepare() -> None:
    try:
        library = _build_native_library()
    except IntelliPerfError as error:
        raise _fail(error) from None
    stdout.print(f"Accordo's CUPTI library: {library}", highlight=False)


@app.command(help="Print the JSON Schema of the job spec or of the report.")
def schema(
    which: Annotated[str, typer.Argument(help="'job' or 'report'")] = "job",
) -> None:
    models = {"job": JobSpec, "report": Report}
    if which not in models:
        raise _fail(SpecError(f"unknown schema {which!r}: choose 'job' or 'report'"))
    stdout.print_json(json.dumps(models[which].model_json_schema()))


@app.command(help="List the formulas and the metrics each one collects.")
def formulas() -> None:
    from formulas.registry import all_formulas

    for name, cls in all_formulas().items():
        units = f"\n  utilization of: {', '.join(cls.units)}" if cls.units else ""
        stdout.print(f"[bold]{name}[/bold] — {cls.title}\n  metrics: {', '.join(cls.metrics)}{units}")


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit")] = False,
) -> None:
    if version:
        stdout.print(__version__)
        raise typer.Exit()


_composed = False


def full_app() -> typer.Typer:
    """The CLI with the service's commands (`serve`, `tokens`) and the worker's (`worker`), added when the
    program runs rather than when this module is imported: the engine's CLI does not load the service or
    the worker, and neither of those loads the other (`serve --worker` is wired here)."""
    global _composed
    if not _composed:
        from service.cli import register as register_service
        from worker.cli import register as register_worker
        from worker.cli import start_local_workers

        register_service(app, start_workers=start_local_workers)
        register_worker(app)
        __import__("intelliperf.mcp_server").mcp_server.register(app)  # `mcp`: its SDK loads when it runs
        _composed = True
    return app


def main() -> None:
    full_app()()
