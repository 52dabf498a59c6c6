"""Counters reused by content hash: a kernel whose code hash, launch shapes and source files are those of a
saved run, on a device of the same name, is diagnosed from the saved counters without a counter pass; any
change to one of them, or an entry that cannot be trusted, costs a counter pass again and says why.

The runs replay transpose_bank's recording (H200): its timing pass gives no code hash (it was recorded before
the tracer hashed code), so each test gives the kernels one, as the tracer would."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from intelliperf.contract import Report
from intelliperf.contract.profile import shape_hash
from intelliperf.engine.counter_store import CounterStore, project_commit
from profiler.trace import LAUNCH_RECORD, LaunchTable, read_trace, summarize, summarize_tables
from tests.recorded import EXAMPLES
from tests.support.hashed_replay import KERNEL, ORIGINAL, Hashed, diagnosed


@pytest.fixture
def project(tmp_path: Path) -> Path:
    copy = tmp_path / "transpose_bank"
    shutil.copytree(EXAMPLES / "transpose_bank", copy, ignore=shutil.ignore_patterns("bin"))
    return copy


def same_diagnoses(a: Report, b: Report) -> bool:
    return [d.model_dump() for d in a.diagnoses] == [d.model_dump() for d in b.diagnoses]


def test_an_unchanged_kernel_is_diagnosed_from_saved_counters_without_a_counter_pass(
    project: Path, tmp_path: Path
) -> None:
    store = CounterStore(tmp_path / "store", tmp_path / "store", commit="c0ffee1")
    first_backend, again_backend = Hashed({KERNEL: "00000000000000aa"}), Hashed({KERNEL: "00000000000000aa"})
    first = diagnosed(first_backend, project, store)
    assert first_backend.collected == [[KERNEL]] and first.reused_counters == []
    assert first.passes.counters_s is not None and first.passes.counters_saved_s is None
    (saved,) = (tmp_path / "store").glob("*.json")
    again = diagnosed(again_backend, project, dataclasses.replace(store, commit="c0ffee2"))
    assert again_backend.collected == []  # the counter pass did not run
    assert again.passes.counters_s is None
    assert again.passes.counters_saved_s == pytest.approx(first.passes.counters_s, abs=0.001)
    (reused,) = again.reused_counters
    assert (reused.kernel, reused.commit, reused.code_hash) == (KERNEL, "c0ffee1", "00000000000000aa")
    assert any("counters reused from commit c0ffee1" in w for w in again.warnings)
    assert same_diagnoses(first, again) and any(d.present and d.locations for d in again.diagnoses)
    assert again.device == first.device  # the device as the saved counter pass saw it
    stored = json.loads(saved.read_text())
    assert all(not row["file"].startswith(str(tmp_path)) for row in stored["profile"]["source"])
    assert "transpose.cu" in stored["source_files"]


@pytest.mark.parametrize(
    ("change", "backend"),
    [
        ("code hash", Hashed({KERNEL: "00000000000000bb"})),
        ("launch shape", Hashed({KERNEL: "00000000000000aa"}, shape=shape_hash([(1, 1, 1, 32, 8, 1, 0)]))),
        ("device", Hashed({KERNEL: "00000000000000aa"}, device="NVIDIA H100 80GB HBM3")),
        ("no code hash", Hashed({})),
    ],
)
def test_a_changed_code_hash_shape_or_device_pays_the_counter_pass(
    project: Path, tmp_path: Path, change: str, backend: Hashed
) -> None:
    store = CounterStore(tmp_path / "store", tmp_path / "store")
    diagnosed(Hashed({KERNEL: "00000000000000aa"}), project, store)
    again = diagnosed(backend, project, store)
    assert backend.collected == [[KERNEL]], change
    assert again.reused_counters == [] and again.passes.counters_saved_s is None


def test_moved_lines_with_the_same_code_hash_pay_the_counter_pass_and_say_why(
    project: Path, tmp_path: Path
) -> None:
    store = CounterStore(tmp_path / "store", tmp_path / "store", commit="c0ffee1")
    diagnosed(Hashed({KERNEL: "00000000000000aa"}), project, store)
    source = project / "transpose.cu"
    source.write_text("// a comment moves every line down\n" + source.read_text())
    backend = Hashed({KERNEL: "00000000000000aa"})
    again = diagnosed(backend, project, store)
    assert backend.collected == [[KERNEL]] and again.reused_counters == []
    assert any("transpose.cu changed, so its lines may have moved" in w for w in again.warnings)


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: "not json {",
        lambda text: text.replace('"00000000000000aa"', '"00000000000000cc"'),  # another kernel's key
        lambda text: json.dumps({**json.loads(text), "extra": 1}),
        lambda text: json.dumps({**json.loads(text), "profile": {"name": 3}}),
    ],
    ids=["not JSON", "key of another kernel", "unknown field", "bad profile"],
)
def test_an_entry_that_cannot_be_trusted_is_skipped_with_a_note_and_profiled_again(
    project: Path, tmp_path: Path, damage
) -> None:
    store = CounterStore(tmp_path / "store", tmp_path / "store")
    diagnosed(Hashed({KERNEL: "00000000000000aa"}), project, store)
    (entry,) = (tmp_path / "store").glob("*.json")
    entry.write_text(damage(entry.read_text()))
    backend = Hashed({KERNEL: "00000000000000aa"})
    again = diagnosed(backend, project, store)
    assert backend.collected == [[KERNEL]] and again.reused_counters == []
    assert any(f"the stored counters {entry.name} were not used" in w for w in again.warnings)


def test_a_read_only_store_is_not_written_and_a_write_only_store_is_not_read(
    project: Path, tmp_path: Path
) -> None:
    seed = CounterStore(None, tmp_path / "seed")
    diagnosed(Hashed({KERNEL: "00000000000000aa"}), project, seed)
    backend = Hashed({KERNEL: "00000000000000aa"})
    diagnosed(backend, project, CounterStore(None, tmp_path / "seed"))
    assert backend.collected == [[KERNEL]]  # never read
    reader = Hashed({KERNEL: "00000000000000aa"})
    report = diagnosed(reader, project, CounterStore(tmp_path / "seed", None))
    assert reader.collected == [] and report.reused_counters
    assert not (tmp_path / "none").exists() and len(list((tmp_path / "seed").glob("*.json"))) == 1


def test_the_launch_shape_hash_is_the_set_of_configurations_whatever_their_order() -> None:
    launches = read_trace(ORIGINAL / "trace.jsonl")
    forward = summarize(launches)
    backward = summarize(list(reversed(launches)))
    assert [k.shape_hash for k in forward] == [k.shape_hash for k in backward]
    assert all(k.shape_hash is not None and len(k.shape_hash) == 16 for k in forward)
    first = launches[0]
    regridded = [dataclasses.replace(first, grid=(first.grid[0] + 1, *first.grid[1:])), *launches[1:]]
    by_name = {k.name: k.shape_hash for k in forward}
    changed = {k.name: k.shape_hash for k in summarize(regridded)}
    assert changed[first.name] != by_name[first.name]
    assert all(changed[n] == by_name[n] for n in by_name if n != first.name)
    assert shape_hash([(1, 2, 3, 4, 5, 6, 7), (1, 2, 3, 4, 5, 6, 7)]) == shape_hash([(1, 2, 3, 4, 5, 6, 7)])


def test_the_commit_of_a_project_is_its_head_marked_when_changed(tmp_path: Path) -> None:
    assert project_commit(tmp_path) is None
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "a.cu").write_text("1\n")
    subprocess.run([*git, "add", "a.cu"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert project_commit(tmp_path) == head
    (tmp_path / "a.cu").write_text("2\n")
    assert project_commit(tmp_path) == head + "+"


def test_a_native_trace_s_shapes_are_each_kernel_s_distinct_configurations_as_the_launch_list_gives() -> None:
    records = np.zeros(5, dtype=LAUNCH_RECORD)
    records["kernel"] = [0, 1, 0, 0, 1]
    records["end"] = 100
    records["grid"] = [(64, 64, 1), (8, 1, 1), (64, 64, 1), (32, 64, 1), (8, 1, 1)]
    records["block"] = [(32, 8, 1), (256, 1, 1), (32, 8, 1), (32, 8, 1), (256, 1, 1)]
    records["smem"] = [4224, 0, 4224, 4224, 1024]
    table = LaunchTable(names=("a", "b"), demangled=("a()", "b()"), records=records, codes=(None, None))
    assert table.shapes() == {
        "a": {(64, 64, 1, 32, 8, 1, 4224), (32, 64, 1, 32, 8, 1, 4224)},
        "b": {(8, 1, 1, 256, 1, 1, 0), (8, 1, 1, 256, 1, 1, 1024)},
    }
    from_records = {k.name: k.shape_hash for k in summarize_tables([table])}
    from_launches = {k.name: k.shape_hash for k in summarize(table.launches())}
    assert from_records == from_launches and from_records["a"] != from_records["b"]


def test_a_store_that_cannot_be_written_costs_the_reuse_not_the_diagnosis(
    project: Path, tmp_path: Path
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    report = diagnosed(Hashed({KERNEL: "00000000000000aa"}), project, CounterStore(None, blocked / "store"))
    assert report.diagnoses and any(
        f"the counters could not be kept in {blocked / 'store'}" in w for w in report.warnings
    )
