"""Intra-kernel profiles of Triton kernels: Proton's instrumentation backend, driven from outside the
user's program by ``proton_runner.py`` (which runs their script with scopes in one kernel), and the
reading of what it writes into an ``IntraKernelProfile``."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from intelliperf.contract import IntraKernelProfile, KernelRegion
from intelliperf.errors import ProfileError, tail
from intelliperf.process import describe_exit, is_python_command, run_process, with_jit_cache

__all__ = ["HATCHET", "META", "RUNNER", "python_program", "read_profile", "run_regions", "scope_metrics"]

RUNNER = Path(__file__).with_name("proton_runner.py")
HATCHET, META = "proton.hatchet", "proton.json"  # the names a recording keeps them under


def python_program(argv: Sequence[str], cwd: Path) -> tuple[list[str], list[str]]:
    """(interpreter, program) of a Python command: ``python3 -u app.py 3`` gives (["python3", "-u"],
    ["app.py", "3"]); ``./app.py 3`` takes the interpreter from the script's ``#!`` line."""
    argv = list(argv)
    if not argv:
        raise ProfileError("no command to profile")
    if not is_python_command(argv):
        raise ProfileError(
            f"`{shlex.join(argv)}` is not a Python program, so Proton cannot run it",
            hint="Proton profiles Triton kernels of Python applications (python3 app.py or ./app.py)",
        )
    if Path(argv[0]).name.startswith("python"):
        interpreter, rest = [argv[0]], argv[1:]
        while rest and rest[0].startswith("-") and rest[0] != "-m":
            interpreter.append(rest.pop(0))
        if not rest:
            raise ProfileError(f"`{shlex.join(argv)}` names no script or module for Proton to run")
        return interpreter, rest
    script = cwd / argv[0]
    first = script.read_text(errors="replace").split("\n", 1)[0] if script.is_file() else ""
    interpreter = shlex.split(first[2:]) if first.startswith("#!") else ["python3"]
    return interpreter, argv


def scope_metrics(tree: dict, kernel: str) -> dict[str, dict]:
    """The metrics of every scope under the kernel's node, by scope name."""
    found: dict[str, dict] = {}

    def walk(node: dict, inside: bool) -> None:
        for child in node.get("children", []):
            name = child.get("frame", {}).get("name", "")
            if inside and "cycles" in child.get("metrics", {}):
                found[name] = child["metrics"]
            walk(child, inside or name == kernel)

    walk(tree, False)
    return found


def read_profile(hatchet: Path, meta_file: Path, source_root: Path) -> IntraKernelProfile:
    """Read what the runner and Proton wrote. A region with no records is left out, never read as 0."""
    meta = json.loads(meta_file.read_text())
    kernel = meta["kernel"]
    if not meta.get("instrumented"):
        raise ProfileError(
            f"Triton never launched a kernel named {kernel}, so Proton instrumented nothing",
            hint="Proton instruments @triton.jit kernels launched from Python",
        )
    document = json.loads(hatchet.read_text())
    tree, device = (document[0], document[1]) if isinstance(document, list) else (document, {})
    metrics = scope_metrics(tree, kernel)
    launches = max(int(meta.get("launches", 0)), 1)
    whole = metrics.get("kernel")
    if whole is None or not whole.get("cycles"):
        raise ProfileError(
            f"Proton recorded no cycles for the whole of {kernel}",
            hint="its profile buffer may have overflowed, or the kernel returns early (no whole-body scope)",
        )
    file = Path(meta.get("file", ""))
    path = file if file.is_absolute() else source_root / file
    lines = path.read_text(errors="replace").splitlines() if path.is_file() else []
    regions = []
    for region in meta["regions"]:
        measured = metrics.get(region["name"])
        if measured is None or "normalized_cycles" not in measured:
            continue
        line = int(region["line"])
        regions.append(
            KernelRegion(
                name=region["name"],
                kind=region["kind"],
                line=line,
                text=lines[line - 1].strip() if 0 < line <= len(lines) else "",
                cycles_per_warp=round(measured["normalized_cycles"] / launches, 1),
                share=round(measured["cycles"] / whole["cycles"], 4),
            )
        )
    clock_khz = next((d.get("clock_rate") for d in device.get("CUDA", {}).values()), None)
    warps = meta.get("num_warps") or [4]
    root = source_root.resolve()
    shown = path.resolve().relative_to(root) if path.resolve().is_relative_to(root) else file
    return IntraKernelProfile(
        kernel=kernel,
        file=os.path.normpath(shown),
        launches=launches,
        warps_per_program=int(warps[0]),
        clock_mhz=clock_khz / 1e3 if clock_khz else None,
        regions=regions,
    )


def run_regions(
    argv: Sequence[str], *, cwd: Path, kernel: str, timeout_s: float, record: Path | None = None
) -> IntraKernelProfile:
    """Run the application once under Proton with scopes in ``kernel`` (a Triton kernel's name)."""
    interpreter, program = python_program(argv, cwd)
    with tempfile.TemporaryDirectory(prefix="intelliperf-proton-") as tmp:
        out = Path(tmp) / "proton"
        command = [*interpreter, str(RUNNER), str(out), kernel, "--", *program]
        result = run_process(command, cwd=cwd, env=with_jit_cache(os.environ, cwd), timeout_s=timeout_s)
        hatchet, meta = out.with_suffix(".hatchet"), out.with_suffix(".json")
        if "No module named 'triton" in result.output:
            raise ProfileError(
                "Proton (triton.profiler) is not installed in the application's Python",
                log_tail=tail(result.output, 10),
            )
        if not result.ok or not meta.is_file():
            raise ProfileError(
                f"the application {describe_exit(result.returncode, result.timed_out, timeout_s)} under "
                "Proton's instrumentation",
                log_tail=tail(result.output, 20),
            )
        if not json.loads(meta.read_text()).get("instrumented"):
            raise ProfileError(
                f"Triton never launched a kernel named {kernel}, so Proton instrumented nothing",
                hint="Proton instruments @triton.jit kernels launched from Python",
            )
        if not hatchet.is_file():
            raise ProfileError(f"Proton wrote no profile for {kernel}", log_tail=tail(result.output, 20))
        if record is not None:
            record.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(hatchet, record / HATCHET)
            shutil.copyfile(meta, record / META)
        profile = read_profile(hatchet, meta, cwd)
    if "dropped" in result.output:
        note = f"{profile.note}; Proton's buffer overflowed and dropped records, so shares are approximate"
        profile = profile.model_copy(update={"note": note})
    return profile
