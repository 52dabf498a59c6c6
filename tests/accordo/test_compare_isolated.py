"""Launches judged in isolation and the program end to end, on small hand-built captures: a kernel launched
several times on one output (a benchmark loop, a solver's step) whose rewrite sums in another order is
correct at every launch; drift the end-to-end run carries between launches is not an input mismatch; a
changed data layout, a tampered input and a crash still decide the verdict, in that order."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from accordo_capture_writer import P, buffer, end, error, file_header, launch, same
from test_compare_synthetic import build

from accordo.capture import Capture, read_capture, write_restore
from accordo.compare import combine, compare_captures, compare_end_to_end

TOL = {"atol": 1e-6, "rtol": 1e-5}
ROWS = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
NORMS = np.array([0.5, 0.25, 0.125, 1.5], np.float32)
DRIFT = NORMS * np.float32(1 + 3e-7)  # another summation order: within the rounding bound, not equal
ZERO = np.zeros(4, np.float32)
KERNEL = "row_norm(float const*, float*)"


def loop(outputs: list[tuple[np.ndarray, np.ndarray]]) -> list[list[tuple]]:
    """Launches of row_norm: the rows (never written), and the output's (before, after) at each launch."""
    return [[("ptr", ROWS, ROWS), ("ptr", before, after)] for before, after in outputs]


def reference(tmp: Path) -> Capture:
    # launch 1 fills the output; launches 2 and 3 rewrite it with the same bits
    return build(tmp, "ref", KERNEL, loop([(ZERO, NORMS), (NORMS, NORMS), (NORMS, NORMS)]))


def test_a_reordered_sum_launched_on_one_output_again_and_again_is_correct_at_every_launch(
    tmp_path: Path,
) -> None:
    ref = reference(tmp_path)
    # on the reference's inputs restored before each launch, the rewrite writes its own sums every time
    isolated = build(tmp_path, "isolated", KERNEL, loop([(ZERO, DRIFT), (NORMS, DRIFT), (NORMS, DRIFT)]))
    result = compare_captures([ref], isolated, **TOL)
    assert result.passed, result.reason
    assert [b.role for b in result.launches[1].buffers] == ["input", "output"]
    # as it runs by itself, launches 2 and 3 start from its own sums: drift, not a different input
    own = build(tmp_path, "own", KERNEL, loop([(ZERO, DRIFT), (DRIFT, DRIFT), (DRIFT, DRIFT)]))
    assert compare_end_to_end([ref], own, **TOL).passed
    # judged the old way, launch by launch on its own run, the drift was an input mismatch
    assert compare_captures([ref], own, **TOL).failure == "input_mismatch"


def test_an_output_the_reference_rewrites_with_the_same_bits_is_still_judged(tmp_path: Path) -> None:
    ref = reference(tmp_path)
    wrong = NORMS.copy()
    wrong[2] += 0.01
    isolated = build(tmp_path, "isolated", KERNEL, loop([(ZERO, NORMS), (NORMS, NORMS), (NORMS, wrong)]))
    result = compare_captures([ref], isolated, **TOL)
    assert result.failure == "mismatch"
    assert result.reason is not None and result.reason.startswith("launch 3 of 3 (row_norm), parameter 1")
    assert result.launches[2].buffers[1].first_mismatch == 2


def test_the_end_to_end_run_judges_the_first_inputs_and_the_final_outputs(tmp_path: Path) -> None:
    ref = reference(tmp_path)
    layout = np.array([1.0, 3.0, 2.0, 4.0], np.float32)  # the rows in another order: another data layout
    changed = build(
        tmp_path,
        "layout",
        KERNEL,
        [[("ptr", layout, layout), ("ptr", ZERO, DRIFT)], *loop([(DRIFT, DRIFT), (DRIFT, DRIFT)])],
    )
    assert compare_end_to_end([ref], changed, **TOL).failure == "input_mismatch"
    final = DRIFT.copy()
    final[0] = 9.0
    wrong_end = build(tmp_path, "end", KERNEL, loop([(ZERO, DRIFT), (DRIFT, DRIFT), (DRIFT, final)]))
    result = compare_end_to_end([ref], wrong_end, **TOL)
    assert result.failure == "mismatch"
    assert result.reason is not None and result.reason.startswith("end to end, launch 3 of 3")
    fewer = build(tmp_path, "fewer", KERNEL, loop([(ZERO, DRIFT), (DRIFT, DRIFT)]))
    assert compare_end_to_end([ref], fewer, **TOL).failure == "launch_count"


def test_tampering_with_an_input_is_reported_first_across_launches(tmp_path: Path) -> None:
    """Launch 1 writes a wrong output; launch 3 also zeroes its const input: the tampering decides."""
    ref = reference(tmp_path)
    wrong = NORMS + 1
    tampered = [
        [("ptr", ROWS, ROWS), ("ptr", ZERO, wrong)],
        [("ptr", ROWS, ROWS), ("ptr", NORMS, NORMS)],
        [("ptr", ROWS, ZERO), ("ptr", NORMS, NORMS)],
    ]
    isolated = compare_captures([ref], build(tmp_path, "tamper", KERNEL, tampered), **TOL)
    assert isolated.failure == "input_modified"
    assert isolated.reason is not None and isolated.reason.startswith("launch 3 of 3 (row_norm), parameter 0")
    assert "(2 of 3 launches fail)" in isolated.reason
    end_to_end = compare_end_to_end([ref], build(tmp_path, "tamper-own", KERNEL, tampered), **TOL)
    assert end_to_end.failure == "input_modified"


def test_both_verdicts_are_one_with_tampering_first(tmp_path: Path) -> None:
    ref = reference(tmp_path)
    clean = build(tmp_path, "clean", KERNEL, loop([(ZERO, DRIFT), (NORMS, DRIFT), (NORMS, DRIFT)]))
    mismatch = build(tmp_path, "mismatch", KERNEL, loop([(ZERO, NORMS + 1), (NORMS, NORMS), (NORMS, NORMS)]))
    tampers = build(
        tmp_path,
        "tampers",
        KERNEL,
        [
            [("ptr", ROWS, ROWS), ("ptr", ZERO, NORMS)],
            *loop([(NORMS, NORMS)]),
            [("ptr", ROWS, ZERO), ("ptr", NORMS, NORMS)],
        ],
    )
    passed = combine(compare_captures([ref], clean, **TOL), compare_end_to_end([ref], clean, **TOL))
    assert passed.passed and passed.launches_compared == 3
    verdict = combine(compare_captures([ref], mismatch, **TOL), compare_end_to_end([ref], tampers, **TOL))
    assert verdict.failure == "input_modified" and verdict.reason is not None
    assert verdict.reason.startswith("end to end, launch 3 of 3")
    both_fine_but_end = combine(
        compare_captures([ref], clean, **TOL), compare_end_to_end([ref], mismatch, **TOL)
    )
    assert both_fine_but_end.failure == "mismatch" and both_fine_but_end.launches_compared == 3


def test_a_launch_whose_inputs_could_not_be_restored_is_an_input_mismatch(tmp_path: Path) -> None:
    ref = reference(tmp_path)
    base = 0x7F0000000000
    blob = file_header()
    output = base + 0x100000
    for seq in range(3):
        params = [P(0, 0, 8, 1, pointer=(base, base, 16)), P(1, 8, 8, 1, pointer=(output, output, 16))]
        blob += launch(seq, seq, "_Zk", KERNEL, params)
        if seq == 1:
            blob += error(seq, "restoring the reference's parameter 1 failed: the reference's parameter 1 "
                          "holds 16 bytes, this run's 32; buffers not captured")  # fmt: skip
            continue
        output_before = ZERO if seq == 0 else NORMS
        blob += buffer(seq, 0, 0, base, ROWS.tobytes()) + buffer(seq, 0, 1, base, ROWS.tobytes())
        blob += buffer(seq, 1, 0, output, output_before.tobytes())
        blob += buffer(seq, 1, 1, output, NORMS.tobytes())
    path = tmp_path / "unrestored.bin"
    path.write_bytes(blob + end())
    result = compare_captures([ref], read_capture(path), **TOL)
    assert result.failure == "input_mismatch"
    assert result.reason is not None and "holds 16 bytes, this run's 32" in result.reason


def test_the_restore_folder_holds_each_launch_s_inputs_once_per_distinct_snapshot(tmp_path: Path) -> None:
    base = 0x7F0000000000
    blob = file_header()
    blob += launch(0, 0, "_Zk", KERNEL, [P(0, 0, 8, 1, pointer=(base, base, 16))])
    blob += buffer(0, 0, 0, base, ROWS.tobytes()) + buffer(0, 0, 1, base, NORMS.tobytes())
    blob += launch(1, 1, "_Zk", KERNEL, [P(0, 0, 8, 1, pointer=(base, base, 16))])
    blob += same(1, 0, 0, base, 16, (0, 0, 1)) + same(1, 0, 1, base, 16, (0, 0, 1))
    blob += launch(2, 2, "_Zk", KERNEL, [P(0, 0, 8, 1, pointer=(base, base, 16))])
    blob += same(2, 0, 0, base, 16, (1, 0, 0)) + same(2, 0, 1, base, 16, (1, 0, 0))
    path = tmp_path / "three.bin"
    path.write_bytes(blob + end())
    folder = write_restore(read_capture(path), tmp_path / "inputs")
    assert sorted(p.name for p in folder.iterdir()) == ["0-0.bin", "1-0.bin", "2-0.bin"]
    assert (folder / "0-0.bin").read_bytes() == ROWS.tobytes()
    assert (folder / "1-0.bin").read_bytes() == NORMS.tobytes()  # launch 2 starts from launch 1's output
    assert (folder / "2-0.bin").read_bytes() == NORMS.tobytes()
    # launches 2 and 3 start from the same bytes: one file, two names
    assert os.stat(folder / "1-0.bin").st_ino == os.stat(folder / "2-0.bin").st_ino


def test_a_changed_data_layout_is_an_input_mismatch_not_the_mismatch_it_causes_in_isolation(
    tmp_path: Path,
) -> None:
    """The rows in another layout: restored into it, the reference's bytes make the rewrite's outputs
    wrong; the end-to-end run shows the cause, at its first launch."""
    ref = reference(tmp_path)
    layout = np.array([1.0, 3.0, 2.0, 4.0], np.float32)
    garbage = build(
        tmp_path, "garbage", KERNEL, loop([(ZERO, NORMS + 1), (NORMS, NORMS + 1), (NORMS, NORMS + 1)])
    )
    own = build(
        tmp_path,
        "own-layout",
        KERNEL,
        [[("ptr", layout, layout), ("ptr", ZERO, NORMS)], *loop([(NORMS, NORMS), (NORMS, NORMS)])],
    )
    verdict = combine(compare_captures([ref], garbage, **TOL), compare_end_to_end([ref], own, **TOL))
    assert verdict.failure == "input_mismatch"
    assert verdict.reason is not None and verdict.reason.startswith("end to end, launch 1 of 3")
