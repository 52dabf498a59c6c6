"""run_traced / run_capture without a GPU: error paths, and the happy path with fake applications that
write what the native profiler would write (to the settings file's ``output``, with %p replaced by their
pid)."""

from __future__ import annotations

import json
import re
import sys
import textwrap
import time
from pathlib import Path

import pytest

from accordo.capture import JUDGED_RUN_VARS, run_capture
from accordo.timing import run_timed
from intelliperf.errors import AppError, KernelNotFoundError, ProfileError
from profiler.trace import SETTINGS_VARIABLE, run_traced

HERE = Path(__file__).resolve().parent


SETTING = """
def setting(key):
    import os
    with open(os.environ["INTELLIPERF_PROFILER_SETTINGS"]) as f:
        return dict(line.rstrip("\\n").split("=", 1) for line in f if line.strip())[key]
"""


def script(tmp_path: Path, body: str) -> list[str]:
    """A fake application; ``setting(key)`` reads the profiler's settings file as the library does."""
    path = tmp_path / "fake_app.py"
    path.write_text(f"import sys\nsys.path.insert(0, {str(HERE)!r})\n{SETTING}" + textwrap.dedent(body))
    return [sys.executable, str(path)]


# --- run_traced --------------------------------------------------------------------------------------------


def test_missing_program(native_lib: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such-program"
    with pytest.raises(AppError, match=str(missing)):
        run_traced([str(missing)], cwd=tmp_path, timeout_s=10, library=native_lib)


def test_not_executable(native_lib: Path, tmp_path: Path) -> None:
    prog = tmp_path / "prog"
    prog.write_text("#!/bin/sh\n")
    with pytest.raises(AppError, match="permission denied"):
        run_traced([str(prog)], cwd=tmp_path, timeout_s=10, library=native_lib)


def test_missing_cwd(native_lib: Path, tmp_path: Path) -> None:
    with pytest.raises(AppError, match="working directory"):
        run_traced(["true"], cwd=tmp_path / "gone", timeout_s=10, library=native_lib)


def test_nonzero_exit(native_lib: Path, tmp_path: Path) -> None:
    cmd = [
        "sh",
        "-c",
        'cat "$INTELLIPERF_PROFILER_SETTINGS" >&2; echo "inj=$CUDA_INJECTION64_PATH" >&2; '
        "echo boom >&2; exit 3",
    ]
    with pytest.raises(AppError) as info:
        run_traced(cmd, cwd=tmp_path, env={"EXTRA": "1"}, timeout_s=10, library=native_lib)
    text = str(info.value)
    assert "exited with code 3" in text
    assert "boom" in text
    assert "mode=trace" in text and f"inj={native_lib}" in text


def test_killed_by_signal(native_lib: Path, tmp_path: Path) -> None:
    with pytest.raises(AppError, match="SIGSEGV"):
        run_traced(["sh", "-c", "kill -SEGV $$"], cwd=tmp_path, timeout_s=10, library=native_lib)


def test_timeout_kills_the_process_group(native_lib: Path, tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(AppError, match=r"did not finish within 1 s"):
        # The background sleep holds the pipes open: only killing the group ends this quickly.
        run_traced(["sh", "-c", "sleep 30 & sleep 30"], cwd=tmp_path, timeout_s=1, library=native_lib)
    assert time.monotonic() - started < 8


def test_no_cuda_means_no_trace(native_lib: Path, tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="no CUDA kernels were traced"):
        run_traced(["true"], cwd=tmp_path, timeout_s=10, library=native_lib)


def test_header_only_trace_means_no_kernels(native_lib: Path, tmp_path: Path) -> None:
    cmd = script(
        tmp_path,
        """
        import os
        out = setting("output").replace("%p", str(os.getpid()))
        open(out + ".launches", "wb").close()
        open(out, "w").write('{"accordo":"trace","version":2,"pid":1,"record_bytes":64}\\n{"launches":0}\\n')
        """,
    )
    with pytest.raises(ProfileError, match="launched no kernel"):
        run_traced(cmd, cwd=tmp_path, timeout_s=30, library=native_lib)


def test_unfinished_trace(native_lib: Path, tmp_path: Path) -> None:
    cmd = script(
        tmp_path,
        """
        import os
        out = setting("output").replace("%p", str(os.getpid()))
        open(out + ".tmp", "w").write('{"accordo":"trace","version":2,"pid":1,"record_bytes":64}\\n')
        """,
    )
    with pytest.raises(ProfileError, match="not completed"):
        run_traced(cmd, cwd=tmp_path, timeout_s=30, library=native_lib)


def test_traced_happy_path_merges_processes(native_lib: Path, tmp_path: Path) -> None:
    cmd = script(
        tmp_path,
        """
        import json, os, struct
        def trace(pid, corr, start):
            # as the profiler writes it (FORMAT.md): the launch records, then the kernel table
            out = setting("output").replace("%p", str(pid))
            with open(out + ".launches", "wb") as f:
                shape = (1, 1, 1, 32, 1, 1, 0, 8, 0, 7)
                f.write(struct.pack("<IIQQ3i3iiIII", 0, corr, start, start + 100, *shape))
            with open(out + ".tmp", "w") as f:
                f.write(json.dumps(dict(accordo="trace", version=2, pid=pid, record_bytes=64)) + "\\n")
                f.write(json.dumps(dict(kernel=0, name="_Z1kv", demangled="k()")) + "\\n")
                f.write(json.dumps(dict(launches=1)) + "\\n")
            os.replace(out + ".tmp", out)
        trace(os.getpid(), 1, 500)
        trace(os.getpid() + 100000, 1, 100)  # a second CUDA process
        print("hello")
        """,
    )
    run = run_traced(cmd, cwd=tmp_path, timeout_s=30, library=native_lib)
    assert run.returncode == 0 and run.stdout.strip() == "hello"
    assert [x.start for x in run.launches] == [100, 500]
    assert len(run.stats) == 1 and run.stats[0].launches == 2 and run.stats[0].total_ns == 200
    assert run.wall_s > 0


# --- run_capture -------------------------------------------------------------------------------------------


def test_capture_missing_program(native_lib: Path, tmp_path: Path) -> None:
    with pytest.raises(AppError, match="does not exist"):
        run_capture(["/no/such/app"], kernel_regex="k", cwd=tmp_path, timeout_s=10, library=native_lib)


def test_capture_crash_is_returned(native_lib: Path, tmp_path: Path) -> None:
    run = run_capture(
        ["sh", "-c", "echo dying >&2; kill -ABRT $$"],
        kernel_regex="k",
        cwd=tmp_path,
        timeout_s=10,
        library=native_lib,
    )
    assert run.status == "crash" and run.signal == "SIGABRT" and run.returncode == -6
    assert "dying" in run.stderr_tail and "SIGABRT" in run.message
    assert run.capture is None and run.captures == ()


def test_capture_exit_code_is_a_crash(native_lib: Path, tmp_path: Path) -> None:
    run = run_capture(
        ["sh", "-c", "exit 4"], kernel_regex="k", cwd=tmp_path, timeout_s=10, library=native_lib
    )
    assert run.status == "crash" and run.returncode == 4 and run.signal is None
    assert "exited with code 4" in run.message


def test_capture_timeout_is_returned(native_lib: Path, tmp_path: Path) -> None:
    started = time.monotonic()
    run = run_capture(["sleep", "30"], kernel_regex="k", cwd=tmp_path, timeout_s=1, library=native_lib)
    assert time.monotonic() - started < 8
    assert run.status == "timeout" and run.returncode is None


def test_capture_without_cuda_is_profile_error(native_lib: Path, tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="no capture was written"):
        run_capture(["true"], kernel_regex="k", cwd=tmp_path, timeout_s=10, library=native_lib)


def test_capture_passes_settings(native_lib: Path, tmp_path: Path) -> None:
    cmd = ["sh", "-c", 'cat "$INTELLIPERF_PROFILER_SETTINGS" >&2; exit 1']
    run = run_capture(
        cmd, kernel_regex="a=b$", cwd=tmp_path, timeout_s=10, max_bytes=4096, library=native_lib,
        settings={"dedup": "0"},
    )  # fmt: skip
    lines = run.stderr.splitlines()
    assert lines[:2] == ["mode=capture", f"output={lines[1].removeprefix('output=')}"]
    assert lines[1].endswith("/capture-%p.bin")
    assert lines[2:] == ["kernel=a=b$", "dedup=0", "max_bytes=4096"]


def test_a_setting_with_a_line_break_is_refused_before_the_run(native_lib: Path, tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="the profiler setting 'kernel' holds a line break"):
        run_capture(["true"], kernel_regex="a\nmode=time", cwd=tmp_path, timeout_s=10, library=native_lib)


def test_a_program_sees_the_same_environment_captured_as_timed(native_lib: Path, tmp_path: Path) -> None:
    """The mode is in the settings file, not in a variable: a program cannot tell a capture from a timed run
    by its environment (the judge checks what it does anyway: accordo/timed_launches.py)."""
    cmd = script(
        tmp_path,
        """
        import json, os
        seen = len(os.listdir("."))
        with open(f"env-{seen}.json", "w") as f:
            json.dump(dict(os.environ), f)
        """,
    )
    with pytest.raises(ProfileError):
        run_capture(cmd, kernel_regex="k", cwd=tmp_path, timeout_s=30, library=native_lib)
    with pytest.raises(ProfileError):
        run_timed(cmd, kernel_regex="k", cwd=tmp_path, timeout_s=30, library=native_lib, quiesce=True)
    dumps = sorted(tmp_path.glob("env-*.json"))
    captured, timed = (json.loads(p.read_text()) for p in dumps)
    for env in (captured, timed):
        settings = Path(env.pop(SETTINGS_VARIABLE))
        assert settings.name == "settings" and settings.parent.name.startswith("intelliperf-run-")
    assert captured == timed and JUDGED_RUN_VARS.items() <= captured.items()
    # a variable naming the mode (ACCORDO_*, *_MODE); LITELLM_LOCAL_MODEL_COST_MAP, set by an earlier
    # test's import of the LLM client, is no such variable
    assert not [k for k in captured if "ACCORDO" in k or re.search(r"(^|_)MODE(_|$)", k.upper())]


def _fake_capture_app(tmp_path: Path, blob_expr: str, exit_code: int = 0) -> list[str]:
    return script(
        tmp_path,
        f"""
        import os
        import accordo_capture_writer as w
        out = setting("output").replace("%p", str(os.getpid()))
        open(out, "wb").write({blob_expr})
        sys.exit({exit_code})
        """,
    )


def test_capture_happy_path(native_lib: Path, tmp_path: Path) -> None:
    cmd = _fake_capture_app(tmp_path, "w.ScaleCapture(n=8, launches=3).build()")
    keep = tmp_path / "keep"
    run = run_capture(
        cmd, kernel_regex="scale", cwd=tmp_path, timeout_s=30, library=native_lib, output_dir=keep
    )
    assert run.status == "ok" and run.capture is not None
    assert run.capture.complete and len(run.capture.launches) == 3
    assert run.capture.path.parent == keep and run.capture.path.exists()


def test_capture_survives_temporary_directory_removal(native_lib: Path, tmp_path: Path) -> None:
    cmd = _fake_capture_app(tmp_path, "w.ScaleCapture(n=8, launches=1).build()")
    run = run_capture(cmd, kernel_regex="scale", cwd=tmp_path, timeout_s=30, library=native_lib)
    assert run.capture is not None and not run.capture.path.exists()
    assert run.capture.launches[0].buffers[-1].view("<f4")[1] == 2.0  # 2 * 0.5 + 1, read from the map


def test_partial_capture_of_a_crash(native_lib: Path, tmp_path: Path) -> None:
    cmd = _fake_capture_app(tmp_path, "w.ScaleCapture(n=8, launches=2).build(with_end=False)", exit_code=1)
    run = run_capture(cmd, kernel_regex="scale", cwd=tmp_path, timeout_s=30, library=native_lib)
    assert run.status == "crash"
    assert run.capture is not None and not run.capture.complete and len(run.capture.launches) == 2


def test_no_matching_kernel(native_lib: Path, tmp_path: Path) -> None:
    cmd = _fake_capture_app(tmp_path, "w.file_header() + w.end()")
    with pytest.raises(KernelNotFoundError, match="nomatch"):
        run_capture(cmd, kernel_regex="nomatch", cwd=tmp_path, timeout_s=30, library=native_lib)


def test_setup_error_is_profile_error(native_lib: Path, tmp_path: Path) -> None:
    cmd = _fake_capture_app(tmp_path, "w.file_header() + w.error(w.NO_LAUNCH, 'bad regex') + w.end()")
    with pytest.raises(ProfileError, match="bad regex"):
        run_capture(cmd, kernel_regex="(", cwd=tmp_path, timeout_s=30, library=native_lib)
