#!/usr/bin/env python3
"""Record real profiler output for every bundled example on the GPU machine (standard library only).

For each example and its fixed version: a plain run, a CUPTI-traced run (Accordo's tracer), and an
Nsight Compute run of the main kernel with the formulas' metrics and the SourceCounters section,
exported as the raw-metrics CSV, the source-page CSV and the details-page CSV. Everything lands in
one folder that becomes tests/fixtures/gpu/. Usage on the device:

    python3 scripts/device/record_fixtures.py --out $OUT/fixtures [--only transpose_bank]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from intelliperf.gpu.ncu import profile_command  # noqa: E402  (standard library only)

NCU = os.environ.get("NCU", "ncu")

WANTED_METRICS = [
    "gpu__time_duration.sum",
    "launch__grid_size",
    "launch__block_size",
    "launch__thread_count",
    "device__attribute_multiprocessor_count",
    "device__attribute_l2_cache_size",
    "device__attribute_max_shared_memory_per_block",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed",
    "smsp__inst_executed_op_shared_ld.sum",
    "smsp__inst_executed_op_shared_st.sum",
    "smsp__inst_executed_op_global_red.sum",
    "smsp__inst_executed_op_global_atom.sum",
    "lts__t_sectors_op_red.sum",
    "lts__t_sectors_op_red.max",
    "lts__t_sectors_op_red.avg",
    "lts__t_sectors_op_atom.sum",
    "lts__t_sectors_op_atom.max",
    "lts__t_sectors_op_atom.avg",
    "lts__t_requests_op_red.sum",
    "lts__t_requests_op_atom.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "smsp__inst_executed_op_global_ld.sum",
    "smsp__inst_executed_op_global_st.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "smsp__warps_issue_stalled_lg_throttle.sum",
    "smsp__warps_issue_stalled_membar.sum",
    "smsp__warps_issue_stalled_mio_throttle.sum",
    "smsp__warps_issue_stalled_short_scoreboard.sum",
    "smsp__warps_issue_stalled_long_scoreboard.sum",
]


def sh(
    cmd: list[str] | str,
    *,
    cwd: Path | None = None,
    env: dict | None = None,
    timeout: float = 300,
    log: Path | None = None,
) -> tuple[int, float, str]:
    start = time.perf_counter()
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, shell=isinstance(cmd, str), capture_output=True, text=True, timeout=timeout
    )
    elapsed = time.perf_counter() - start
    out = proc.stdout + ("\n--- stderr ---\n" + proc.stderr if proc.stderr else "")
    if log is not None:
        log.write_text(out)
    return proc.returncode, elapsed, out


def known_metrics(out: Path) -> list[str]:
    rc, _, text = sh([NCU, "--query-metrics", "--query-metrics-mode", "suffix", "--csv"], timeout=120)
    (out / "query_metrics.csv").write_text(text)
    if rc != 0:
        print("query-metrics failed; using the whole list", file=sys.stderr)
        return WANTED_METRICS
    names = set()
    for line in text.splitlines():
        first = line.split(",")[0].strip('"')
        names.add(first)
    keep, dropped = [], []
    for metric in WANTED_METRICS:
        base = metric.split(".")[0]
        (keep if (metric in names or base in names) else dropped).append(metric)
    (out / "metrics_dropped.txt").write_text("\n".join(dropped))
    print(f"metrics: {len(keep)} kept, dropped: {dropped}")
    return keep


def record_app(
    name: str, kernel: str, app_dir: Path, app: str, out: Path, metrics: list[str], lib: Path
) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    exe = str(app_dir / app)
    row: dict = {"app": app}
    plains = []
    for i in range(2):
        rc, t, _ = sh([exe], cwd=app_dir, log=out / f"plain_{i}.log")
        plains.append(t)
        row["plain_rc"] = rc
    row["plain_s"] = plains
    env = dict(
        os.environ,
        CUDA_INJECTION64_PATH=str(lib),
        ACCORDO_MODE="trace",
        ACCORDO_OUTPUT=str(out / "trace.jsonl"),
    )
    traced = []
    for _ in range(2):
        rc, t, _ = sh([exe], cwd=app_dir, env=env, log=out / "traced.log")
        traced.append(t)
        row["traced_rc"] = rc
    row["traced_s"] = traced
    trace_names = sorted(
        {json.loads(line)["name"] for line in (out / "trace.jsonl").read_text().splitlines()[1:]}
    )
    report = out / "profile.ncu-rep"
    cmd = profile_command(NCU, [exe], kernel_names=trace_names, metrics=metrics, report=report)
    rc, t, _text = sh(cmd, cwd=app_dir, log=out / "ncu.log", timeout=600)
    row["ncu_rc"], row["ncu_s"] = rc, t
    if report.exists():
        for page, extra in [
            ("raw", []),
            ("source", ["--print-source", "cuda,sass"]),
        ]:
            rc2, t2, text2 = sh(
                [NCU, "-i", str(report), "--page", page, "--csv", "--print-kernel-base", "mangled", *extra],
                timeout=120,
            )
            (out / f"{page}.csv").write_text(text2)
            row[f"export_{page}_s"] = t2
            row[f"export_{page}_rc"] = rc2
        if name == "transpose_bank" and app.endswith("transpose"):
            for fn in trace_names:
                sh(
                    [
                        NCU,
                        "-i",
                        str(report),
                        "--page",
                        "source",
                        "--csv",
                        "--print-source",
                        "cuda,sass",
                        "--print-kernel-base",
                        "mangled",
                        "--kernel-name-base",
                        "mangled",
                        "--kernel-name",
                        fn,
                    ],
                    log=out / f"source_only_{fn}.csv",
                )
            shutil.copy(report, out.parent.parent / "transpose.ncu-rep")
    return row


def explore(out: Path, manifest: list[dict]) -> None:
    """One-off probes of ncu behaviour the parsers and the counter pass depend on."""
    ex = next(e for e in manifest if e["name"] == "transpose_bank")
    app_dir = ROOT / "examples" / ex["name"]
    exe = str(app_dir / ex["app"])
    probes = out / "probes"
    probes.mkdir(exist_ok=True)
    kernels = "|".join(e["kernel"] for e in manifest) + "|init.*"
    for tag, filt in [
        ("kernel_id", ["--kernel-id", f"::regex:^({kernels})$:1"]),
        ("kernel_name_count", ["--kernel-name", f"regex:^({kernels})$", "--launch-count", "3"]),
    ]:
        sh(
            [NCU, "--clock-control", "none", *filt, "--metrics", "gpu__time_duration.sum", "--csv", exe],
            cwd=app_dir,
            log=probes / f"{tag}.txt",
        )
    sh(
        [
            NCU,
            "--clock-control",
            "none",
            "--kernel-id",
            "::regex:.*:1",
            "--section",
            "SourceCounters",
            "--metrics",
            "gpu__time_duration.sum",
            "--import-source",
            "yes",
            "-o",
            str(probes / "multi"),
            "-f",
            exe,
        ],
        cwd=app_dir,
        log=probes / "multi.log",
    )
    for page, extra in [("raw", []), ("source", ["--print-source", "cuda"])]:
        sh(
            [NCU, "-i", str(probes / "multi.ncu-rep"), "--page", page, "--csv", *extra],
            log=probes / f"multi_{page}.csv",
        )
    rc, t, _ = sh(
        [
            NCU,
            "--clock-control",
            "none",
            "--kernel-name",
            f"regex:^{ex['kernel']}$",
            "--launch-count",
            "1",
            "--set",
            "full",
            "--import-source",
            "yes",
            "-o",
            str(probes / "full"),
            "-f",
            exe,
        ],
        cwd=app_dir,
        log=probes / "full.log",
    )
    (probes / "full_time.txt").write_text(f"rc={rc} seconds={t:.2f}\n")
    sh(
        [NCU, "-i", str(probes / "full.ncu-rep"), "--page", "source", "--csv", "--print-source", "cuda"],
        log=probes / "full_source.csv",
    )
    sh(
        [NCU, "-i", str(probes / "full.ncu-rep"), "--page", "details", "--csv"],
        log=probes / "full_details.csv",
    )
    sh(["make", "nolineinfo"], cwd=app_dir, log=probes / "make_nolineinfo.log")
    nolines = sorted((app_dir / "bin").glob("*nolineinfo*"))
    if nolines:
        sh(
            [
                NCU,
                "--clock-control",
                "none",
                "--kernel-name",
                f"regex:^{ex['kernel']}$",
                "--launch-count",
                "1",
                "--section",
                "SourceCounters",
                "--import-source",
                "yes",
                "-o",
                str(probes / "noline"),
                "-f",
                str(nolines[0]),
            ],
            cwd=app_dir,
            log=probes / "noline.log",
        )
        sh(
            [
                NCU,
                "-i",
                str(probes / "noline.ncu-rep"),
                "--page",
                "source",
                "--csv",
                "--print-source",
                "cuda",
            ],
            log=probes / "noline_source.csv",
        )
    sh(
        [NCU, "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv", "/bin/true"],
        log=probes / "no_cuda_app.txt",
    )
    sh(
        [
            NCU,
            "--clock-control",
            "none",
            "--kernel-name",
            "regex:^nope$",
            "--metrics",
            "gpu__time_duration.sum",
            "--csv",
            exe,
        ],
        cwd=app_dir,
        log=probes / "no_match.txt",
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", default=None)
    parser.add_argument("--explore", action="store_true", help="also probe ncu behaviour (one-off)")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    for tool in ("nvidia-smi", NCU, "nvcc"):
        print(tool, "->", shutil.which(tool))
    sh(["nvidia-smi"], log=out / "nvidia-smi.txt")
    sh([NCU, "--version"], log=out / "ncu-version.txt")
    sh([NCU, "--help"], log=out / "ncu-help.txt")
    sh([NCU, "--list-sections"], log=out / "ncu-sections.txt")
    rc, t, _text = sh(["make", "-C", str(ROOT / "examples"), "-j8"], timeout=600, log=out / "make.log")
    print(f"make examples rc={rc} {t:.1f}s")
    from accordo.build import native_library  # standard library only

    lib = native_library()
    print("libaccordo:", lib)
    metrics = known_metrics(out)
    manifest = json.loads((ROOT / "examples" / "examples.json").read_text())
    summary = {}
    for ex in manifest:
        if args.only and ex["name"] != args.only:
            continue
        app_dir = ROOT / "examples" / ex["name"]
        for variant, app in (("original", ex["app"]), ("fixed", ex["fixed_app"])):
            key = f"{ex['name']}/{variant}"
            try:
                summary[key] = record_app(
                    ex["name"], ex["kernel"], app_dir, app, out / ex["name"] / variant, metrics, lib
                )
            except Exception as exc:  # keep recording the others
                summary[key] = {"error": repr(exc)}
            print(key, json.dumps(summary[key]))
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    if args.explore:
        explore(out, manifest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
