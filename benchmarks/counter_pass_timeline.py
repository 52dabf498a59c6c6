"""When each part of the counter pass's ncu run happens (GPU machine): a timeline per run.

ncu's messages and the page it prints go to a pseudo-terminal (so nothing is held back in a buffer), and
every line is stamped with the time its first and last bytes arrived, counted from the start of ncu. From
those stamps: ncu's start until the application connects, each profiled kernel's replay (ncu's
"==PROF== Profiling ..." line, from its first byte to its "- N passes"), the application's end, the
disconnect, the source page printed, ncu's exit. The report reader's own parts are timed too (interpreter
start, importing ncu_report, loading the report, reading the metrics).

    python -m benchmarks.counter_pass_timeline --repeats 3 --out timeline.json
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import device_name, plain_wall
from benchmarks.counter_pass import (
    _with_kernels,
    _without,
    _without_page,
    counter_pass_inputs,
    kernel_level_command,
    timed,
)
from benchmarks.ncu.pages import profile_command, report_reader_dir
from benchmarks.ncu.profiles import DEVICE_METRICS

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def stamped_lines(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[list[tuple], float]:
    """(first byte s, last byte s, text) per output line, and the exit time, from the start."""
    master, slave = pty.openpty()
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    lines: list[tuple[float, float, str]] = []
    pending, pending_since = b"", None
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:
            break
        if not data:
            break
        now = time.perf_counter() - started
        if pending_since is None:
            pending_since = now
        pending += data
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            lines.append((pending_since, now, line.decode(errors="replace").rstrip("\r")))
            pending_since = now if pending else None
    os.close(master)
    proc.wait()
    exited = time.perf_counter() - started
    if pending:
        lines.append((pending_since or exited, exited, pending.decode(errors="replace")))
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:3]} exited {proc.returncode}: {lines[-20:]}")
    return lines, exited


def events(lines: list[tuple], exited: float) -> dict[str, object]:
    def first(predicate) -> float | None:
        return next((round(a, 4) for a, _, text in lines if predicate(text)), None)

    profiled = [(round(a, 4), round(b, 4)) for a, b, t in lines if t.startswith("==PROF== Profiling")]
    page = [b for _, b, t in lines if t.startswith('"')]
    return {
        "connected": first(lambda t: "Connected to process" in t),
        "app_output": first(lambda t: not t.startswith("==") and not t.startswith('"') and t.strip()),
        "kernels": profiled,
        "profiling_s": round(sum(b - a for a, b in profiled), 4),
        "disconnected": first(lambda t: "Disconnected from process" in t),
        "page_first": round(page[0], 4) if page else None,
        "page_last": round(page[-1], 4) if page else None,
        "report_line": first(lambda t: "Report:" in t),
        "last_output": round(lines[-1][1], 4) if lines else None,
        "exit": round(exited, 4),
    }


def variants(names: list[str], metrics: list[str], tmp: Path) -> dict[str, list[str]]:
    report, log = tmp / "profile.ncu-rep", tmp / "ncu.log"
    exact = profile_command("ncu", [], kernel_names=names, metrics=metrics, report=report, log=log)
    to_pty = _without(exact, "--log-file")
    return {
        "exact_logfile": exact,
        "pass": to_pty,
        "pass_eager": to_pty,
        "no_page": _without_page(to_pty),
        "no_export": _without(_without(to_pty, "--export"), "--force-overwrite", 0),
        "kernel_level_only": _without(kernel_level_command(exact), "--log-file"),
        "source_only": _without(to_pty, "--metrics"),
        "hottest_kernel_only": _with_kernels(to_pty, names[:1]),
        "floor": _with_kernels(
            _without(kernel_level_command(exact), "--log-file"), ["no_kernel_is_named_this"]
        ),
    }


READER_STEPS = r"""
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[2])
import ncu_report
t1 = time.perf_counter()
ctx = ncu_report.load_report(sys.argv[1])
t2 = time.perf_counter()
n = 0
for r in range(ctx.num_ranges()):
    rng = ctx.range_by_idx(r)
    for a in range(rng.num_actions()):
        act = rng.action_by_idx(a)
        for name in sys.argv[3].split(","):
            m = act.metric_by_name(name)
            n += m is not None
t3 = time.perf_counter()
print(f"{t1 - t0:.4f} {t2 - t1:.4f} {t3 - t2:.4f} {n}")
"""


def reader_steps(report: Path, metrics: list[str]) -> dict[str, float]:
    folder = report_reader_dir("ncu")
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-I", "-c", READER_STEPS, str(report), str(folder), ",".join(metrics)],
        capture_output=True,
        text=True,
        check=True,
    )
    total = time.perf_counter() - started
    imported, loaded, read, found = done.stdout.split()
    return {
        "total_s": round(total, 4),
        "import_s": float(imported),
        "load_s": float(loaded),
        "read_s": float(read),
        "metrics_found": int(found),
    }


def run_example(example: str, binary: str, repeats: int, keep: Path | None) -> dict[str, object]:
    cwd = EXAMPLES / example
    argv = [f"./{binary}"]
    names, metrics = counter_pass_inputs(argv, cwd)
    result: dict[str, object] = {"example": example, "profiled_kernels": len(names)}
    with tempfile.TemporaryDirectory() as tmp:
        commands = variants(names, metrics, Path(tmp))
        walls: dict[str, list[float]] = {name: [] for name in commands}
        timelines: dict[str, list[dict]] = {name: [] for name in commands}
        reader: list[dict] = []
        plain: list[float] = []
        for _ in range(repeats):
            plain.append(plain_wall(argv, cwd, repeats=1))
            for name, command in commands.items():
                if name == "exact_logfile":
                    walls[name].append(round(timed(command + argv, cwd)[0], 4))
                    reader.append(reader_steps(Path(tmp) / "profile.ncu-rep", [*metrics, *DEVICE_METRICS]))
                    continue
                env = {**os.environ, "CUDA_MODULE_LOADING": "EAGER"} if name == "pass_eager" else None
                lines, exited = stamped_lines(command + argv, cwd, env)
                walls[name].append(round(exited, 4))
                timelines[name].append(events(lines, exited))
                if keep is not None and name == "pass":
                    keep.mkdir(parents=True, exist_ok=True)
                    (keep / f"{example}_pass_lines.json").write_text(
                        json.dumps([(round(a, 4), round(b, 4), t[:160]) for a, b, t in lines])
                    )
    result["plain_s"] = round(statistics.median(plain), 4)
    result["wall_s"] = {name: round(statistics.median(v), 4) for name, v in walls.items()}
    result["walls"] = walls
    result["timelines"] = {name: t for name, t in timelines.items() if t}
    result["reader"] = reader
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    subprocess.run(["make", "-C", str(EXAMPLES / "tile_sums"), "-s"], check=True)
    subprocess.run(["make", "-C", str(EXAMPLES / "divergent_lanes"), "-s"], check=True)
    rows = [
        run_example("tile_sums", "bin/tile_sums", args.repeats, args.keep),
        run_example("divergent_lanes", "bin/divergent_lanes", args.repeats, args.keep),
    ]
    out = {"device": device_name(), "rows": rows}
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    for row in rows:
        print(f"{row['example']} ({row['profiled_kernels']} kernels), plain {row['plain_s']} s")
        for name, wall in row["wall_s"].items():
            t = row["timelines"].get(name, [{}])[0]
            print(
                f"  {name:20} {wall:6.2f} s  connected {t.get('connected')}  kernels "
                f"{(t.get('kernels') or [[None]])[0][0]}..{(t.get('kernels') or [[None, None]])[-1][-1]} "
                f"({t.get('profiling_s')})  disc {t.get('disconnected')}  page {t.get('page_first')}.."
                f"{t.get('page_last')}  report {t.get('report_line')}  exit {t.get('exit')}"
            )
        print(f"  reader: {row['reader']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
