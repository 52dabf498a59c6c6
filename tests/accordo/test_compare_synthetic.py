"""Comparison rules on small hand-built captures (written in the documented file format): what the
recorded cases cannot show, such as integers, NaN/Inf, bfloat16, changed scalars and broken references."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from accordo_capture_writer import P, ScaleCapture, buffer, end, file_header, launch

from accordo.capture import Capture, read_capture
from accordo.compare import compare_captures
from intelliperf.errors import ValidationError

BASE = 0x7F0000000000


def build(tmp: Path, name: str, demangled: str, launches: list[list[tuple]]) -> Capture:
    """Each launch: parameters as ("ptr", before, after) arrays or ("scalar", raw bytes)."""
    blob = file_header()
    for seq, params in enumerate(launches):
        records, snapshots, offset = [], [], 0
        for index, param in enumerate(params):
            if param[0] == "scalar":
                records.append(P(index, offset, len(param[1]), 0, raw=param[1]))
                offset += len(param[1])
            else:
                before, after = np.ascontiguousarray(param[1]), np.ascontiguousarray(param[2])
                base = BASE + index * 0x100000
                records.append(P(index, offset, 8, 1, pointer=(base, base, before.nbytes)))
                snapshots.append((index, base, before.tobytes(), after.tobytes()))
                offset += 8
        blob += launch(seq, seq, "_Zk", demangled, records)
        blob += b"".join(buffer(seq, index, 0, base, before) for index, base, before, _ in snapshots)
        blob += b"".join(buffer(seq, index, 1, base, after) for index, base, _, after in snapshots)
    path = tmp / f"{name}.bin"
    path.write_bytes(blob + end())
    return read_capture(path)


def pair(tmp: Path, demangled: str, ref: list[list[tuple]], cand: list[list[tuple]], **kw):
    return compare_captures(
        [build(tmp, "ref", demangled, ref)], build(tmp, "cand", demangled, cand), atol=kw.get("atol", 1e-6),
        rtol=kw.get("rtol", 1e-5), default_element=kw.get("default", "float32"),
        element_override=kw.get("override"),
    )  # fmt: skip


def test_integers_are_exact(tmp_path: Path) -> None:
    before = np.zeros(8, np.int32)
    ref = [[("ptr", before, np.arange(8, dtype=np.int32))]]
    off_by_one = np.arange(8, dtype=np.int32)
    off_by_one[5] += 1
    result = pair(tmp_path, "hist(int*)", ref, [[("ptr", before, off_by_one)]], atol=10.0, rtol=1.0)
    assert result.failure == "mismatch"
    assert result.launches[0].buffers[0].first_mismatch == 5
    assert result.launches[0].buffers[0].dtype == "int32"


def test_nan_and_inf_must_agree(tmp_path: Path) -> None:
    before = np.zeros(4, np.float32)
    ref_after = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    same = pair(tmp_path, "k(float*)", [[("ptr", before, ref_after)]], [[("ptr", before, ref_after.copy())]])
    assert same.passed
    cand = np.array([np.nan, -np.inf, np.nan, 1.0], np.float32)
    differ = pair(tmp_path, "k(float*)", [[("ptr", before, ref_after)]], [[("ptr", before, cand)]], atol=1e9)
    assert differ.failure == "mismatch"
    assert differ.launches[0].buffers[0].nan_inf_mismatches == 2
    assert differ.launches[0].buffers[0].first_mismatch == 1


def test_bfloat16_is_compared_as_numbers(tmp_path: Path) -> None:
    def bf16(values: list[float]) -> np.ndarray:
        return (np.array(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)

    before = np.zeros(3, np.uint16)
    ref = [[("ptr", before, bf16([1.0, 2.0, 3.0]))]]
    close = pair(
        tmp_path, "k(__nv_bfloat16*)", ref, [[("ptr", before, bf16([1.0, 2.0, 3.015625]))]], rtol=0.01
    )
    assert close.passed and close.launches[0].buffers[0].dtype == "bfloat16"
    assert close.launches[0].buffers[0].max_abs_error == pytest.approx(0.015625)
    far = pair(tmp_path, "k(__nv_bfloat16*)", ref, [[("ptr", before, bf16([1.0, 2.5, 3.0]))]], rtol=0.01)
    assert far.failure == "mismatch"


def test_changed_scalar_is_an_input_mismatch(tmp_path: Path) -> None:
    x = np.ones(4, np.float32)
    ref = [[("ptr", x, x), ("scalar", (4).to_bytes(4, "little"))]]
    cand = [[("ptr", x, x), ("scalar", (3).to_bytes(4, "little"))]]
    result = pair(tmp_path, "k(float const*, int)", ref, cand)
    assert result.failure == "input_mismatch"
    assert "parameter 1 (a scalar) is 0x00000004 in the reference and 0x00000003" in result.reason


def test_different_input_bytes_and_sizes_are_input_mismatches(tmp_path: Path) -> None:
    x, out = np.ones(4, np.float32), np.zeros(4, np.float32)
    ref = [[("ptr", x, x), ("ptr", out, out + 1)]]
    other = x.copy()
    other[2] = 7
    result = pair(tmp_path, "k(float const*, float*)", ref, [[("ptr", other, other), ("ptr", out, out + 1)]])
    assert result.failure == "input_mismatch" and "element at index 2 (byte 10)" in result.reason
    bigger = np.ones(5, np.float32)
    sized = pair(tmp_path, "k(float const*, float*)", ref, [[("ptr", bigger, bigger), ("ptr", out, out + 1)]])
    assert sized.failure == "input_mismatch" and "allocation of 16 bytes" in sized.reason


def test_buffer_the_reference_leaves_alone_must_stay_untouched(tmp_path: Path) -> None:
    scratch, out = np.zeros(4, np.float32), np.zeros(2, np.float32)
    ref = [[("ptr", scratch, scratch), ("ptr", out, out + 1)]]
    used = scratch.copy()
    used[3] = 1
    result = pair(tmp_path, "k(float*, float*)", ref, [[("ptr", scratch, used), ("ptr", out, out + 1)]])
    assert result.failure == "untouched_modified"
    assert result.launches[0].buffers[0].role == "untouched"
    assert "first changed element at index 3" in result.reason


def test_every_launch_is_compared(tmp_path: Path) -> None:
    before = np.zeros(2, np.float32)
    good = ("ptr", before, np.ones(2, np.float32))
    bad = ("ptr", before, np.full(2, 2, np.float32))
    result = pair(tmp_path, "k(float*)", [[good], [good], [good]], [[good], [good], [bad]])
    assert result.failure == "mismatch" and result.launches_compared == 3
    assert [x.passed for x in result.launches] == [True, True, False]
    assert result.reason.startswith("launch 3 of 3 (k)")


def test_unknown_signature_uses_the_default_and_override_wins(tmp_path: Path) -> None:
    before = np.zeros(2, np.float64)
    ref, cand = [[("ptr", before, np.array([1.1, 2.2]))]], [[("ptr", before, np.array([1.1, 2.2 + 1e-9]))]]
    # no signature: the default (here uint32) reads the doubles' halves; the tiny change shows in a low word
    as_default = pair(tmp_path, "add_kernel", ref, cand, default="uint32")
    assert as_default.failure == "mismatch"
    assert pair(tmp_path, "add_kernel", ref, cand, override="float64").passed


def test_reference_that_launches_differently_per_run_is_rejected(tmp_path: Path) -> None:
    x = np.zeros(2, np.float32)
    one = build(tmp_path, "one", "k(float*)", [[("ptr", x, x + 1)]])
    two = build(tmp_path, "two", "k(float*)", [[("ptr", x, x + 1)], [("ptr", x, x + 1)]])
    with pytest.raises(ValidationError, match="not deterministic"):
        compare_captures([one, two], one, atol=0, rtol=0)


def test_repeated_launches_are_compared_once_with_the_same_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loop of identical launches, stored as SAME records, costs one comparison per distinct set of
    snapshots, and every launch still gets its verdict."""
    import accordo.compare as compare

    calls = []
    real = compare._compare_pair
    monkeypatch.setattr(compare, "_compare_pair", lambda *a: calls.append(a) or real(*a))
    captures = {}
    for name, dedupe in (("ref", True), ("cand", True), ("plain", False)):
        path = tmp_path / f"{name}.bin"
        path.write_bytes(ScaleCapture(launches=50, dedupe=dedupe).build())
        captures[name] = read_capture(path)
    deduped = compare_captures([captures["ref"]], captures["cand"], atol=1e-6, rtol=1e-5)
    assert deduped.passed and deduped.launches_compared == 50
    assert len(calls) <= 2 * 3  # launch 1, launch 2 (its "before" is launch 1's "after"), then repeats
    calls.clear()
    plain = compare_captures([captures["ref"]], captures["plain"], atol=1e-6, rtol=1e-5)
    assert len(calls) == 50 * 2 and plain.launches == deduped.launches


REFERENCE_RUNS = [  # elements: agreed, noisy, finite in two runs and NaN in one, NaN in every run
    np.array([1.0, 5.0, 2.0, np.nan]),
    np.array([1.0, 5.01, np.nan, np.nan]),
    np.array([1.0, 4.99, 2.0, np.nan]),
]


@pytest.mark.parametrize(
    ("candidate", "passes"),
    [
        ([1.0, 5.005, 2.0, np.nan], True),  # within the runs' noise; the mixed element against the first run
        ([1.0, 5.5, 2.0, np.nan], False),  # far outside the noise
        ([1.0, 5.0, 2.5, np.nan], False),  # the mixed element off the first run's value
        ([1.0, 5.0, np.nan, np.nan], False),  # NaN where the first run has a number
        ([1.0, 5.0, 2.0, 0.0], False),  # a number where every run has NaN
    ],
)
def test_a_kernel_buffer_and_an_output_file_are_bounded_alike(
    tmp_path: Path, candidate: list[float], passes: bool
) -> None:
    """One bound (accordo.float_bound) for a kernel's float buffer and for a file the application writes."""
    from intelliperf.engine.output_files import compare_file

    before = np.zeros(4, np.float64)
    refs = [
        build(tmp_path, f"ref{i}", "k(double*)", [[("ptr", before, run)]])
        for i, run in enumerate(REFERENCE_RUNS)
    ]
    cand = np.array(candidate)
    buffer = compare_captures(
        refs, build(tmp_path, "cand", "k(double*)", [[("ptr", before, cand)]]), atol=1e-6, rtol=1e-5
    )
    in_file = compare_file("out.txt", REFERENCE_RUNS, cand, atol=1e-6, rtol=1e-5, alpha=0.01)
    assert buffer.passed is passes
    assert in_file.passed is passes
    assert in_file.noisy == buffer.launches[0].buffers[0].noisy_elements
