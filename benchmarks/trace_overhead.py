"""Where the timing pass's extra wall time goes (GPU machine).

Runs a probe application (benchmarks/trace_probe_app.cu: timestamps around CUDA's initialization, the
first allocation, the first launch, 200 launches) and two examples plain, under probe injection
libraries (benchmarks/trace_probe.cpp: each step of the native profiler's trace mode switchable and timed) and
under the profiler itself, interleaved in shuffled rounds. Prints per condition the median wall time over
the plain run (and the median of each run against its own round's plain run, with a 90% interval for that
median: the whole range at six rounds, the 6th to 13th of eighteen), the CPU time and page faults of its
processes over the plain run's (paired medians: far steadier than the wall time), and the median phases:
for the probe application its own; for the examples spawn -> injection library loaded (cuInit), each
set-up step, set-up end -> library destructor, destructor -> reaped (libcupti's and libcuda's teardown).

    python -m benchmarks.trace_overhead [--rounds 10] [--only full,profiler] [--apps probe_app]
        [--old-native DIR] [--variant NAME=CXXFLAGS] [--out trace_overhead.json]
        [--thirdparty .thirdparty --programs hecbench-kernellaunch,hecbench-histogram]

--thirdparty adds programs of benchmarks/thirdparty/manifest.json (fetched into that folder, built with
their own build lines) to the applications; under the profiler, ``parse_ms`` is what reading the trace and
ranking its kernels costs afterwards (profiler.trace), outside the application's wall time.

--apps none runs the third-party programs only; the profiler and the examples are built only when a
condition or an application needs them. The probe's launch-callback conditions (callback_only,
callback_count_per_kernel, full_sample*, callback_events*) print the launches the callback saw, the kernel
records, the activity toggles and the event pairs read; full_overhead prints CUPTI's own overhead records
(CUPTI_ACTIVITY_KIND_OVERHEAD: the kernel instrumentation CUPTI generates at module load, buffer flushes,
...) summed by kind.

--old-native builds the profiler from other sources too (e.g. a previous commit's profiler/native):
``profiler_old`` runs it with ACCORDO_* variables (sources from before the settings file),
``profiler_sampled_old`` with the settings file and ``profiler_sampled``'s settings (from 939d590 on);
--variant builds the current sources with extra flags (-DPROFILER_DEVICE_BUFFER_BYTES=262144).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.intervals import median_interval
from profiler.build import LIBRARY_NAME
from profiler.trace import (
    LAUNCHES_SUFFIX,
    MESSAGE_PREFIX,
    SETTINGS_VARIABLE,
    read_native_trace,
    read_trace,
    summarize,
    summarize_tables,
)

ROOT = Path(__file__).resolve().parents[1]
CUDA_HOME = Path(os.environ.get("CUDA_HOME") or "/usr/local/cuda")
NATIVE = ROOT / "profiler" / "native"
# (name, working directory, command); "probe_app" is benchmarks/trace_probe_app.cu, built into the
# temporary directory.
APPS: list[tuple[str, Path | None, list[str]]] = [
    ("probe_app", None, ["./probe_app"]),
    ("atomic_reduction", ROOT / "examples" / "atomic_reduction", ["./bin/atomic_reduction_fixed"]),
    ("transpose_bank", ROOT / "examples" / "transpose_bank", ["./bin/transpose"]),
]

# name -> (library key, extra environment); library None is the plain run.
CONDITIONS: dict[str, tuple[str | None, dict[str, str]]] = {
    "plain": (None, {}),
    "inject_only": ("nocupti", {}),
    "inject+dlopen_cupti": ("nocupti", {"PROBE_DLOPEN": "1"}),
    "cupti_linked": ("probe", {"PROBE_STAGE": "none"}),
    "register": ("probe", {"PROBE_STAGE": "register"}),
    "enable_noflush": ("probe", {"PROBE_STAGE": "enable"}),
    "full": ("probe", {}),
    "full_flush0": ("probe", {"PROBE_FLUSH": "zero"}),
    "full_noflush": ("probe", {"PROBE_FLUSH": "none"}),
    "full_finalize": ("probe", {"PROBE_FINALIZE": "1"}),
    "full_kind_kernel": ("probe", {"PROBE_KIND": "kernel"}),
    "full_prealloc1": ("probe", {"PROBE_PREALLOC": "1"}),
    "full_devbuf256k": ("probe", {"PROBE_DEVBUF": "262144", "PROBE_PREALLOC": "1"}),
    "full_calloc_zeroed": ("probe", {"PROBE_CALLOC": "1", "PROBE_ZEROED": "1"}),
    "full_buf64k": ("probe", {"PROBE_BUF": "65536"}),
    "callback_only": ("probe", {"PROBE_STAGE": "callback"}),
    "full_sample100": ("probe", {"PROBE_SAMPLE": "100"}),
    "full_sample100_stride64": ("probe", {"PROBE_SAMPLE": "100", "PROBE_STRIDE": "64"}),
    "full_sample100_stride1024": ("probe", {"PROBE_SAMPLE": "100", "PROBE_STRIDE": "1024"}),
    "full_overhead": ("probe", {"PROBE_OVERHEAD": "1"}),
    # the module-load callback alone, hashing each module's functions as the trace does (no activity)
    "modules_hashed": ("probe", {"PROBE_STAGE": "none", "PROBE_MODULES": "1"}),
    # kernel activity on every launch, the module hashing and CUPTI's overhead records: the trace's parts
    "full_modules_overhead": ("probe", {"PROBE_MODULES": "1", "PROBE_OVERHEAD": "1"}),
    "callback_count_per_kernel": ("probe", {"PROBE_STAGE": "callback", "PROBE_SAMPLE": "100"}),
    "callback_events100": (
        "probe",
        {"PROBE_STAGE": "callback", "PROBE_SAMPLE": "100", "PROBE_TIMER": "events"},
    ),
    "callback_events100_stride64": (
        "probe",
        {"PROBE_STAGE": "callback", "PROBE_SAMPLE": "100", "PROBE_STRIDE": "64", "PROBE_TIMER": "events"},
    ),
    "profiler_old": ("profiler_old", {}),
    "profiler": ("profiler", {}),
    # the profiler's sampled trace (launch_sampler.h), as the timing pass runs it: its extras are settings
    "profiler_sampled": ("profiler", {"sample_first": "1000", "sample_every": "64"}),
    # the same from --old-native's sources, when they read the settings file too (from 939d590 on)
    "profiler_sampled_old": ("profiler_old_settings", {"sample_first": "1000", "sample_every": "64"}),
}

# the conditions whose library reads its settings from a settings file (profiler_env)
SETTINGS_LIBS = ("profiler", "profiler_old_settings")


# what the probe's launch callback reports, kept from a condition's first run when the callback ran
CALLBACK_KEYS = ("launches_seen", "toggles", "toggle_ms", "event_pairs", "event_ms")
# what the probe's module-load callback reports (PROBE_MODULES)
MODULE_KEYS = ("modules", "module_mib", "module_functions", "module_ms")
# what run_once measures of every run's processes
USAGE_KEYS = ("user_ms", "sys_ms", "minflt")


def profiler_env(
    lib: str, library: Path, folder: Path, settings: dict[str, str] | None = None
) -> dict[str, str]:
    """The variables that load ``library`` in trace mode with its stats line (and ``settings``), writing
    ``t-<pid>.jsonl`` into ``folder``. Old sources (``profiler_old``) from before the settings file read
    ACCORDO_* variables."""
    output = str(folder / "t-%p.jsonl")
    if lib == "profiler_old":
        return {"CUDA_INJECTION64_PATH": str(library), "ACCORDO_MODE": "trace", "ACCORDO_STATS": "1",
                "ACCORDO_OUTPUT": output}  # fmt: skip
    lines = "".join(f"{key}={value}\n" for key, value in (settings or {}).items())
    path = folder / "settings"
    path.write_text(f"mode=trace\nstats=1\noutput={output}\n{lines}")
    return {"CUDA_INJECTION64_PATH": str(library), SETTINGS_VARIABLE: str(path)}


def build(
    out: Path, old_native: Path | None, variants: dict[str, str], with_profiler: bool = True
) -> dict[str, Path]:
    """The probe libraries, the probe application and (``with_profiler``) the profiler itself."""
    src = ROOT / "benchmarks" / "trace_probe.cpp"
    common = ["g++", "-O2", "-std=c++17", "-fPIC", "-shared", f"-I{CUDA_HOME / 'include'}", str(src)]
    libs = {"nocupti": out / "probe_nocupti.so", "probe": out / "probe.so", "profiler": out / LIBRARY_NAME}
    subprocess.run([*common, "-DPROBE_NO_CUPTI", "-o", str(libs["nocupti"]), "-ldl"], check=True)
    subprocess.run(
        [
            *common,
            "-o",
            str(libs["probe"]),
            f"-L{CUDA_HOME / 'lib64'}",
            f"-Wl,-rpath,{CUDA_HOME / 'lib64'}",
            "-lcupti",
        ],
        check=True,
    )
    if with_profiler:
        make = ["make", "-s", "-C", str(NATIVE), f"OUT={libs['profiler']}", f"CUDA_HOME={CUDA_HOME}"]
        subprocess.run(make, check=True)
    for name, flags in variants.items():  # the profiler from the current sources with extra compiler flags
        libs[f"profiler[{name}]"] = out / f"profiler_{name}.so"
        make = ["make", "-s", "-C", str(NATIVE), f"OUT={libs[f'profiler[{name}]']}"]
        env = {
            **os.environ,
            "CXXFLAGS": f"-O2 {flags}",
        }  # the environment's CXXFLAGS, which the Makefile extends
        subprocess.run([*make, f"CUDA_HOME={CUDA_HOME}"], check=True, env=env)
    if old_native is not None:  # the profiler from other sources (e.g. the previous commit's), to compare
        libs["profiler_old"] = libs["profiler_old_settings"] = out / "profiler_old.so"
        make = ["make", "-s", "-C", str(old_native), f"OUT={libs['profiler_old']}", f"CUDA_HOME={CUDA_HOME}"]
        subprocess.run(make, check=True)
    app = ROOT / "benchmarks" / "trace_probe_app.cu"
    nvcc = [str(CUDA_HOME / "bin" / "nvcc"), "-O2", "-std=c++17", "-arch=sm_90", "-cudart", "static"]
    subprocess.run([*nvcc, "-o", str(out / "probe_app"), str(app)], check=True)
    return libs


def thirdparty_apps(sources: Path, names: list[str], scratch: Path) -> list[tuple[str, Path, list[str]]]:
    """Third-party programs copied into ``scratch`` and built with their own build lines."""
    from benchmarks.thirdparty import command, load_fetch

    programs = {p.name: p for p in load_fetch().read_manifest()}
    apps = []
    for name in names:
        program = programs[name]
        project = scratch / name
        shutil.copytree(sources / name, project)
        if program.build:
            subprocess.run(program.build, shell=True, cwd=project, check=True, capture_output=True)
        apps.append((name, project, command(program.run)))
    return apps


def read_traces(traces: list[Path]) -> dict:
    """What reading the traces and ranking their kernels costs (a native trace of version 2 has its launch
    records beside it; the old tracer's is JSON Lines of version 1); the files are removed."""
    began = time.perf_counter()
    native = [path for path in traces if Path(f"{path}{LAUNCHES_SUFFIX}").is_file()]
    tables = [read_native_trace(path) for path in native]
    summarize_tables(tables)
    launches = [launch for path in traces if path not in native for launch in read_trace(path)]
    summarize(launches)
    parse_ms = (time.perf_counter() - began) * 1e3
    for path in traces:
        path.unlink()
        Path(f"{path}{LAUNCHES_SUFFIX}").unlink(missing_ok=True)
    return {"parse_ms": parse_ms, "launches": len(launches) + sum(len(t) for t in tables)}


def run_once(argv: list[str], cwd: Path, env: dict[str, str]) -> dict:
    """One run: its wall time and the CPU time and page faults of its processes (``user_ms``, ``sys_ms``,
    ``minflt``: this process's reaped children's usage before and after, one child at a time), which
    scatter far less than the wall time on the GPU machines, and what the probe or profiler printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic_ns()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate()
    end = time.monotonic_ns()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}: {err.decode(errors='replace')[-2000:]}")
    sample: dict = {
        "wall_ms": (end - start) / 1e6,
        "user_ms": (after.ru_utime - before.ru_utime) * 1e3,
        "sys_ms": (after.ru_stime - before.ru_stime) * 1e3,
        "minflt": after.ru_minflt - before.ru_minflt,
    }
    for line in out.decode(errors="replace").splitlines():
        if line.startswith('{"main":'):
            a = json.loads(line)
            sample.update(
                app_spawn_to_main=(a["main"] - start) / 1e6,
                app_cuda_init=(a["ctx"] - a["main"]) / 1e6,
                app_alloc=(a["alloc"] - a["ctx"]) / 1e6,
                app_first_launch=(a["first"] - a["alloc"]) / 1e6,
                app_200_launches=(a["loop"] - a["first"]) / 1e6,
                app_free=(a["end"] - a["loop"]) / 1e6,
                app_exit=(end - a["end"]) / 1e6,
            )
    for line in err.decode(errors="replace").splitlines():
        if line.startswith("probe: {"):
            t = json.loads(line[len("probe: ") :])

            def ms(a: str, b: str, t: dict = t) -> float:
                return (t[b] - t[a]) / 1e6

            sample.update(
                spawn_to_load=(t["ctor"] - start) / 1e6,
                load_to_init=ms("ctor", "init0"),
                dlopen=ms("init0", "dlopen"),
                attrs=ms("dlopen", "attrs"),
                register=ms("attrs", "reg"),
                enable=ms("reg", "enable"),
                init_to_dtor=ms("init1", "dtor"),
                dtor_to_reaped=(end - t["dtor"]) / 1e6,
                records=t["records"],
                errors=t["errors"],
                launches_seen=t["launches"],
                toggles=t["toggles"],
                toggle_ms=t["toggle_ns"] / 1e6,
                event_pairs=t["event_pairs"],
                event_ms=t["event_ms"],
                cupti_overhead_ms={kind: ns / 1e6 for kind, ns in t["overhead_ns"].items()},
            )
            if t.get("modules"):
                sample.update(
                    modules=t["modules"],
                    module_mib=t["module_bytes"] / 2**20,
                    module_functions=t["module_functions"],
                    module_ms=t["module_ns"] / 1e6,
                )
            if t["exit0"]:
                sample.update(flush=ms("exit0", "flush"), finalize=ms("flush", "finalize"))
        elif line.startswith((f"{MESSAGE_PREFIX}trace stats:", f"{MESSAGE_PREFIX}trace sampling:")):
            sample["profiler_stats"] = [*sample.get("profiler_stats", []), line]
        elif line.startswith(("probe: ", MESSAGE_PREFIX)):
            sample.setdefault("messages", []).append(line)
    return sample


def paired_differences(runs: list[dict], plain: list[dict], key: str) -> list[float]:
    """Each run's ``key`` against the plain run of its own round."""
    return [s[key] - p[key] for s, p in zip(runs, plain, strict=True)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("trace_overhead.json"))
    parser.add_argument("--only", default=None, help="comma-separated condition names")
    parser.add_argument("--old-native", type=Path, default=None, help="profiler sources to compare with")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=FLAGS",
        help="the profiler also built with these flags, e.g. devbuf=-DPROFILER_DEVICE_BUFFER_BYTES=262144",
    )
    parser.add_argument(
        "--apps", default=None, help="comma-separated: probe_app, atomic_reduction, transpose_bank"
    )
    parser.add_argument("--thirdparty", type=Path, default=None, help="fetched third-party sources")
    parser.add_argument("--programs", default="", help="comma-separated third-party program names")
    args = parser.parse_args()
    conditions = {
        k: v for k, v in CONDITIONS.items() if not args.only or k in [*args.only.split(","), "plain"]
    }
    with tempfile.TemporaryDirectory(prefix="trace-overhead-") as tmp:
        variants = dict(v.split("=", 1) for v in args.variant)
        libs = build(
            Path(tmp),
            args.old_native,
            variants,
            with_profiler=any(lib == "profiler" for lib, _ in conditions.values()),
        )
        for name in variants:
            conditions[f"profiler[{name}]"] = (f"profiler[{name}]", {})
        apps = [a for a in APPS if not args.apps or a[0] in args.apps.split(",")]
        if any(cwd is not None for _, cwd, _ in apps):  # the bundled examples among the applications
            subprocess.run(["make", "-C", str(ROOT / "examples"), "-j16", "-s"], check=True)
        if args.thirdparty is not None:
            apps += thirdparty_apps(args.thirdparty, args.programs.split(","), Path(tmp))
        if args.old_native is None:
            conditions.pop("profiler_old", None)
            conditions.pop("profiler_sampled_old", None)
        samples: dict[str, dict[str, list[dict]]] = {app: {c: [] for c in conditions} for app, _, _ in apps}
        rng = random.Random(7)
        for round_index in range(args.rounds + 1):
            for app, cwd, argv in apps:
                order = list(conditions)
                rng.shuffle(order)
                for name in order:
                    lib, extra = conditions[name]
                    env = dict(os.environ)
                    if lib in SETTINGS_LIBS:
                        env.update(profiler_env(lib, libs[lib], Path(tmp), extra))
                    elif lib is not None:
                        env.update(profiler_env(lib, libs[lib], Path(tmp)))
                        env.update(extra)
                    sample = run_once(argv, cwd or Path(tmp), env)
                    traces = sorted(Path(tmp).glob("t-*.jsonl"))
                    if traces:
                        sample.update(read_traces(traces))
                    if round_index > 0:  # round 0 warms caches up
                        samples[app][name].append(sample)
    summary: dict = {}
    lib_keys = ["spawn_to_load", "dlopen", "attrs", "register", "enable", "init_to_dtor", "flush", "finalize"]
    lib_keys += ["dtor_to_reaped", "parse_ms"]
    app_keys = ["app_spawn_to_main", "app_cuda_init", "app_alloc", "app_first_launch", "app_200_launches"]
    app_keys += ["app_free", "app_exit"]
    for app, per in samples.items():
        plain = statistics.median(s["wall_ms"] for s in per["plain"])
        keys = lib_keys if app != "probe_app" else app_keys
        print(f"\n{app}: plain {plain:.1f} ms; medians of {args.rounds} interleaved runs, ms")
        head = f"{'condition':26} {'extra':>7} {'paired':>7} {'90% of it':>11} "
        print(head + " ".join(f"{k[-10:]:>10}" for k in keys))
        summary[app] = {}
        for name, runs in per.items():
            row: dict = {}
            for key in ["wall_ms", *USAGE_KEYS, *lib_keys, *app_keys, *MODULE_KEYS]:
                values = [s[key] for s in runs if key in s]
                row[key] = round(statistics.median(values), 3) if values else None
            row["extra_ms"] = round(row["wall_ms"] - plain, 3)
            for key in USAGE_KEYS:  # the CPU time of the run's processes over plain's
                row[f"paired_{key}"] = round(
                    statistics.median(paired_differences(runs, per["plain"], key)), 3
                )
            paired = paired_differences(runs, per["plain"], "wall_ms")
            row["paired_extra_ms"] = round(statistics.median(paired), 3)
            interval = median_interval(paired)
            row["paired_extra_interval_ms"] = [round(v, 3) for v in interval] if interval else None
            row["records"] = runs[0].get("records", runs[0].get("launches"))
            for key in CALLBACK_KEYS:
                if key in runs[0]:
                    row[key] = runs[0][key]
            row["profiler_stats"] = [s["profiler_stats"] for s in runs if "profiler_stats" in s][:3]
            row["messages"] = sorted({m for s in runs for m in s.get("messages", [])})[:5]
            summary[app][name] = row
            cells = " ".join(f"{row[k]:10.2f}" if row[k] is not None else f"{'-':>10}" for k in keys)
            span = row["paired_extra_interval_ms"]
            span_text = f"{span[0]:+.0f}..{span[1]:+.0f}" if span else "-"
            print(f"{name:26} {row['extra_ms']:+7.1f} {row['paired_extra_ms']:+7.1f} {span_text:>11} {cells}")
            if name != "plain":
                print(
                    f"    CPU over plain (paired medians): user {row['paired_user_ms']:+.1f} ms, "
                    f"system {row['paired_sys_ms']:+.1f} ms, {row['paired_minflt']:+.0f} page faults"
                )
            if row.get("launches_seen"):
                print(
                    f"    launch callback: {row['launches_seen']} launches, {row['records']} records, "
                    f"{row['toggles']} toggles ({row['toggle_ms']:.2f} ms), {row['event_pairs']} event "
                    f"pairs read ({row['event_ms']:.2f} ms of kernel time)"
                )
            if row.get("modules"):
                print(
                    f"    module loads: {row['modules']:.0f} modules, {row['module_mib']:.1f} MiB, "
                    f"{row['module_functions']:.0f} functions hashed in {row['module_ms']:.2f} ms (medians)"
                )
            kinds = sorted({k for s in runs for k in s.get("cupti_overhead_ms", {})})
            if kinds:  # CUPTI's own overhead records, medians over the runs (a run without a kind: 0)
                row["cupti_overhead_ms"] = {
                    k: round(statistics.median(s["cupti_overhead_ms"].get(k, 0.0) for s in runs), 3)
                    for k in kinds
                }
                print(
                    "    CUPTI overhead records, ms: "
                    + ", ".join(f"{k} {v}" for k, v in row["cupti_overhead_ms"].items())
                )
            for message in row["messages"] + [line for lines in row["profiler_stats"][:1] for line in lines]:
                print(f"    {message}")
    args.out.write_text(json.dumps({"summary": summary, "samples": samples}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
