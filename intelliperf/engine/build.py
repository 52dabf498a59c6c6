"""Run the user's build command in the workspace."""

from __future__ import annotations

from pathlib import Path

from intelliperf.errors import BuildError, tail
from intelliperf.process import describe_exit, run_process

__all__ = ["run_build"]


def run_build(command: str, *, cwd: Path, timeout_s: float) -> float:
    """Build; return the seconds it took. A failure raises BuildError with the compiler's last lines."""
    result = run_process(command, cwd=cwd, timeout_s=timeout_s, shell=True)
    if not result.ok:
        what = describe_exit(result.returncode, result.timed_out, timeout_s)
        raise BuildError(
            f"build command `{command}` {what} in {cwd}",
            log_tail=tail(result.output, 40),
            hint="fix the build, or check -b/--build_command and -p/--project_directory",
        )
    return result.seconds
