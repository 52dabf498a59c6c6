"""A stand-in `rocprofv3` for tests: no AMD GPU or ROCm here. It serves the hand-made fixtures of
tests/fixtures/amd/rocprofv3 (built from rocprofv3's documented format, not recorded; see its README)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

ROCPROF_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "amd" / "rocprofv3"

# What rocprofv3 does, as far as these tests need: writes the fixture files, filtered to the requested
# counters and kernels, into <-d>/<hostname>/<pid>_<domain>.csv, runs the application and exits with its
# status. FAKE_ROCPROF_FAIL makes it fail as its launcher does.
FAKE_ROCPROFV3 = f"""#!{sys.executable}
import csv, io, json, os, re, socket, subprocess, sys
args = sys.argv[1:]
split = args.index("--")
options, app = args[:split], args[split + 1:]
with open(os.environ["FAKE_ROCPROF_LOG"], "a") as log:
    log.write(json.dumps(options) + "\\n")
if os.environ.get("FAKE_ROCPROF_FAIL"):
    sys.stderr.write("Fatal error: " + os.environ["FAKE_ROCPROF_FAIL"] + "\\n")
    sys.exit(1)
def value(flag):
    return options[options.index(flag) + 1] if flag in options else None
out = os.path.join(value("--output-directory"), socket.gethostname())
fixtures = os.environ["FAKE_ROCPROF_FIXTURES"]
code = subprocess.run(app).returncode
if os.environ.get("FAKE_ROCPROF_GLOG"):
    sys.stderr.write(os.environ["FAKE_ROCPROF_GLOG"] + "\\n")
    sys.stderr.flush()
    os.abort()
os.makedirs(out, exist_ok=True)
if "--kernel-trace" in options:
    text = open(os.path.join(fixtures, "kernel_trace.csv")).read()
    if os.path.exists("kernels_faster_by"):  # a rewritten tree: its kernels take 1/x of the time
        factor = float(open("kernels_faster_by").read())
        lines = text.splitlines()
        rows = []
        for line in lines[1:]:
            r = next(csv.reader([line]))
            r[10] = str(int(r[9]) + round((int(r[10]) - int(r[9])) / factor))
            rows.append(",".join(f'"{{v}}"' if not v.lstrip("-").isdigit() else v for v in r))
        text = "\\n".join([lines[0], *rows]) + "\\n"
    open(os.path.join(out, f"{{os.getpid()}}_kernel_trace.csv"), "w").write(text)
if "--pmc" in options:
    counters = set(re.split(r"[ ,]+", value("--pmc")))
    regex = value("--kernel-include-regex") or ""
    lines = open(os.path.join(fixtures, "counter_collection.csv")).read().splitlines()
    rows = [line for line in lines[1:] if (r := next(csv.reader([line])))[15] in counters
            and re.search(regex, r[8])]
    if rows:
        path = os.path.join(out, f"{{os.getpid()}}_counter_collection.csv")
        open(path, "w").write("\\n".join([lines[0], *rows]) + "\\n")
sys.exit(code)
"""


def install_fake_rocprofv3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put a `rocprofv3` on PATH; returns the log of the option lists it was called with."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "rocprofv3"
    script.write_text(FAKE_ROCPROFV3)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_ROCPROF_FIXTURES", str(ROCPROF_FIXTURES))
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_ROCPROF_LOG", str(log))
    return log
