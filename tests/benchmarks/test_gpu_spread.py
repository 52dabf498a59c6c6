"""benchmarks/gpu_spread.py and thirdparty's --gpus: the programs dealt over the GPUs, each group's run on its
GPU and its cores (real child processes), and their outputs joined, also when the run is stopped midway."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from benchmarks import gpu_spread, thirdparty
from benchmarks.thirdparty import NOT_REACHED, load_fetch


def test_the_longest_programs_go_first_to_the_least_loaded_group() -> None:
    cost = {"a": 10.0, "b": 6.0, "c": 5.0, "d": 4.0, "e": 1.0}
    # a (10) to the first; b (6), c (5) to the second (11); d (4) to the first (14); e (1) to the second (12)
    assert gpu_spread.deal(["a", "b", "c", "d", "e"], cost, 2) == [["a", "d"], ["b", "c", "e"]]
    assert gpu_spread.deal(["a", "b"], cost, 3) == [["a"], ["b"], []]
    with pytest.raises(ValueError, match="at least one group"):
        gpu_spread.deal(["a"], cost, 0)


def test_a_program_without_a_cost_counts_as_the_median_known_one() -> None:
    # x and y unknown count 5 s each (the median of 9, 5, 1): a (9) to the first, x and y to the second (10),
    # b (5) to the first (14), c (1) to the second (11); counted as 0 s, x and y would have gone last
    cost = {"a": 9.0, "b": 5.0, "c": 1.0}
    assert gpu_spread.deal(["a", "x", "y", "b", "c"], cost, 2) == [["a", "b"], ["x", "y", "c"]]
    assert gpu_spread.deal(["x", "y", "z"], {}, 3) == [["x"], ["y"], ["z"]]


def test_the_cores_are_cut_into_contiguous_slices() -> None:
    assert gpu_spread.core_slices(range(10), 3) == [(0, 1, 2, 3), (4, 5, 6), (7, 8, 9)]
    assert gpu_spread.core_slices([3, 1], 3) == [(1,), (3,), (1,)]


# Stands in for one GPU's run of the benchmark: writes the rows of its --only programs, naming the GPU and
# the cores it ran on, or, for a program called "crash", exits 3 first; "slow" sleeps until killed.
CHILD = """
import json, os, sys, time
args = sys.argv[1:]
names = args[args.index("--only") + 1].split(",")
out = args[args.index("--out") + 1]
rows = []
for name in names:
    if name == "crash":
        sys.exit(3)
    if name == "slow":
        time.sleep(60)
    rows.append({"name": name, "plain_s": 1.0, "timing_s": 1.01, "counters_s": 2.0,
                 "gpu": os.environ["CUDA_VISIBLE_DEVICES"], "cores": sorted(os.sched_getaffinity(0))})
    open(out, "w").write(json.dumps({"device": "NVIDIA H200", "rows": rows}))
"""


@pytest.fixture
def spread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """thirdparty's --gpus with the stand-in children; the manifest's first programs are fetched."""
    fetch = load_fetch()
    monkeypatch.setattr(fetch, "in_place", lambda program, folder: True)
    monkeypatch.setattr(thirdparty, "device_name", lambda: "NVIDIA H200")
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    monkeypatch.setattr(
        thirdparty, "child_argv", lambda args, group: [sys.executable, str(child), *group_args(group)]
    )
    return tmp_path


def group_args(group: gpu_spread.Group) -> list[str]:
    return ["--only", ",".join(group.programs), "--out", str(group.out)]


def test_each_gpu_runs_its_group_on_its_own_cores_and_the_rows_are_joined(spread: Path) -> None:
    names = [p.name for p in load_fetch().read_manifest()[:4]]
    earlier = spread / "earlier.json"
    earlier_rows = [  # names[0] took about 270 s, the others about 9 s each
        {"name": name, "plain_s": plain, "timing_s": plain, "plain_runs": [plain] * 3}
        for name, plain in zip(names, [30.0, 1.0, 1.0, 1.0], strict=True)
    ]
    earlier.write_text(json.dumps({"device": "NVIDIA H200", "rows": earlier_rows}))
    out = spread / "thirdparty.json"
    code = thirdparty.main(
        ["--only", ",".join(names), "--gpus", "2,5", "--rows-from", str(earlier), "--out", str(out)]
    )
    assert code == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["name"] for r in rows] == names and all(r["plain_s"] == 1.0 for r in rows)
    by_gpu = {gpu: [r for r in rows if r["gpu"] == gpu] for gpu in ("2", "5")}
    assert [r["name"] for r in by_gpu["2"]] == [names[0]]  # its earlier 270 s fill one GPU alone
    assert [r["name"] for r in by_gpu["5"]] == names[1:]
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) > 1:
        assert set(by_gpu["2"][0]["cores"]).isdisjoint(by_gpu["5"][0]["cores"])
    assert (spread / "thirdparty.gpus" / "gpu5.json").is_file()


def test_a_group_whose_run_crashed_keeps_its_programs_as_not_reached(
    spread: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    names = [p.name for p in load_fetch().read_manifest()[:2]]
    monkeypatch.setattr(gpu_spread, "deal", lambda programs, cost, groups: [[programs[0]], [programs[1]]])

    def crashing_on_gpu_1(args: object, group: gpu_spread.Group) -> list[str]:
        only = ("crash," if group.gpu == "1" else "") + ",".join(group.programs)
        return [sys.executable, str(spread / "child.py"), "--only", only, "--out", str(group.out)]

    monkeypatch.setattr(thirdparty, "child_argv", crashing_on_gpu_1)
    out = spread / "thirdparty.json"
    assert thirdparty.main(["--only", ",".join(names), "--gpus", "0,1", "--out", str(out)]) == 1
    rows = json.loads(out.read_text())["rows"]
    assert [(r["name"], r.get("error")) for r in rows] == [(names[0], None), (names[1], NOT_REACHED)]
    assert "the run on GPU 1 exited 3" in capsys.readouterr().err


def test_a_run_stopped_midway_joins_what_its_groups_had_written(spread: Path) -> None:
    """The device call's limit arrives as SIGTERM to the whole process group (GNU timeout): the parent
    still writes the rows the groups had measured."""
    names = [p.name for p in load_fetch().read_manifest()[:3]]
    script = spread / "parent.py"
    script.write_text(
        "import sys\n"
        "from benchmarks import thirdparty\n"
        "from benchmarks.thirdparty import load_fetch\n"
        "load_fetch().in_place = lambda program, folder: True\n"
        "thirdparty.device_name = lambda: 'NVIDIA H200'\n"
        f"child = {str(spread / 'child.py')!r}\n"
        "thirdparty.child_argv = lambda args, group: [sys.executable, child, '--only', "
        "','.join(group.programs) + (',slow' if group.gpu == '1' else ''), '--out', str(group.out)]\n"
        "sys.exit(thirdparty.main(sys.argv[1:]))\n"
    )
    out = spread / "thirdparty.json"
    root = Path(thirdparty.__file__).resolve().parents[1]
    parent = subprocess.Popen(
        [sys.executable, str(script), "--only", ",".join(names), "--gpus", "0,1", "--out", str(out)],
        cwd=root,
        env=os.environ | {"PYTHONPATH": str(root)},
        start_new_session=True,
    )
    folder = spread / "thirdparty.gpus"
    deadline = time.monotonic() + 30
    while not ((folder / "gpu0.json").is_file() and (folder / "gpu1.json").is_file()):
        assert time.monotonic() < deadline and parent.poll() is None
        time.sleep(0.05)
    threading.Event().wait(0.3)
    os.killpg(parent.pid, signal.SIGTERM)
    assert parent.wait(timeout=30) == 128 + signal.SIGTERM
    rows = json.loads(out.read_text())["rows"]
    assert [r["name"] for r in rows] == names
    assert all(r.get("plain_s") == 1.0 for r in rows)  # gpu 1 wrote its rows before its "slow" program


def test_one_gpu_named_is_the_gpu_the_programs_run_on(spread: Path) -> None:
    names = [p.name for p in load_fetch().read_manifest()[:2]]
    out = spread / "thirdparty.json"
    assert thirdparty.main(["--only", ",".join(names), "--gpus", "3", "--out", str(out)]) == 0
    assert [r["gpu"] for r in json.loads(out.read_text())["rows"]] == ["3", "3"]
