"""The probes' restore folders on hand-built captures: outputs filled with NaN or random bytes, floating-point
inputs shuffled with their edge values, integers and unknown buffers left alone, outputs a kernel reads
kept as captured; and a rewrite that leaves the NaN in place fails the comparison."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from accordo_capture_writer import ScaleCapture
from test_compare_synthetic import build

from accordo.capture import read_capture
from accordo.compare import compare_captures, written_params
from accordo.probes import NAN_BYTE, float_like, overwritten, snapshots, write_probe

TOL = {"atol": 1e-6, "rtol": 1e-5}
RNG = np.random.default_rng(7)
ROWS = RNG.uniform(-1, 1, 64).astype(np.float32)
INDEX = np.arange(64, dtype=np.int32)
NORMS = RNG.uniform(0, 2, 8).astype(np.float32)
ZERO = np.zeros(8, np.float32)
KERNEL = "row_norm(float const*, int const*, float*)"


def three_launches(tmp: Path, name: str = "ref", demangled: str = KERNEL):
    """rows and an index array read, the norms written at launch 1 and rewritten with the same bits."""
    outputs = [(ZERO, NORMS), (NORMS, NORMS), (NORMS, NORMS)]
    return build(
        tmp,
        name,
        demangled,
        [[("ptr", ROWS, ROWS), ("ptr", INDEX, INDEX), ("ptr", b, a)] for b, a in outputs],
    )


def files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def test_nan_fills_the_outputs_and_keeps_every_input(tmp_path: Path) -> None:
    ref = three_launches(tmp_path)
    written = written_params([ref])
    assert written == {2}
    outputs = snapshots(ref, written)
    assert outputs == {(0, 2), (1, 2), (2, 2)}
    folder, changed = write_probe(ref, tmp_path / "nan", "prefilled_nan", outputs=outputs)
    got = files(folder)
    assert changed == 3
    for seq in range(3):
        assert got[f"{seq}-2.bin"] == bytes([NAN_BYTE]) * NORMS.nbytes
        assert np.isnan(np.frombuffer(got[f"{seq}-2.bin"], np.float32)).all()
        assert got[f"{seq}-0.bin"] == ROWS.tobytes() and got[f"{seq}-1.bin"] == INDEX.tobytes()


def test_fresh_inputs_shuffle_floats_with_edges_keep_integers_and_fill_outputs_at_random(
    tmp_path: Path,
) -> None:
    ref = three_launches(tmp_path)
    written = written_params([ref])
    inputs, outputs = snapshots(ref, written, of=False), snapshots(ref, written)
    folder, changed = write_probe(
        ref, tmp_path / "fresh", "fresh_inputs", outputs=outputs, inputs=inputs, seed=1
    )
    got = files(folder)
    assert changed == 6  # three launches' rows and norms; the index array is left alone
    rows = np.frombuffer(got["0-0.bin"], np.float32)
    assert not np.array_equal(rows, ROWS)
    assert {ROWS.min(), ROWS.max(), np.float32(0.0)} <= set(rows.tolist())
    assert np.isin(rows[rows != 0], ROWS).all()  # the captured values, moved
    assert got["0-1.bin"] == INDEX.tobytes()
    assert got["0-2.bin"] != NORMS.tobytes() and got["0-2.bin"] == got["1-2.bin"]  # one fill per size
    again, _ = write_probe(ref, tmp_path / "again", "fresh_inputs", outputs=outputs, inputs=inputs, seed=1)
    other, _ = write_probe(ref, tmp_path / "other", "fresh_inputs", outputs=outputs, inputs=inputs, seed=2)
    assert files(again) == got and files(other) != got


def test_a_repeated_input_is_shuffled_once_and_outputs_filled_once(tmp_path: Path) -> None:
    """Launches that read one captured input (SAME records) read one shuffle of it; every output of a
    size gets the same random bytes; each is written once and hard-linked for the other launches."""
    path = tmp_path / "scale.bin"
    path.write_bytes(ScaleCapture(n=4096, launches=4, dedupe=True).build())
    ref = read_capture(path)
    written = written_params([ref])
    assert written == {1}
    inputs, outputs = snapshots(ref, written, of=False), snapshots(ref, written)
    folder, changed = write_probe(ref, tmp_path / "fresh", "fresh_inputs", outputs=outputs, inputs=inputs)
    assert changed == 8
    x = ref.launches[0].buffer(0, "before").tobytes()  # type: ignore[union-attr]
    shuffled = {(folder / f"{seq}-0.bin").read_bytes() for seq in range(4)}
    assert len(shuffled) == 1 and shuffled != {x}
    assert sorted(np.frombuffer(shuffled.pop(), np.float32)[1:].tolist()) != []
    for param in (0, 1):
        inodes = {(folder / f"{seq}-{param}.bin").stat().st_ino for seq in range(4)}
        assert len(inodes) == 1, f"parameter {param} written {len(inodes)} times"


def test_without_a_signature_only_buffers_that_look_like_floats_are_shuffled(tmp_path: Path) -> None:
    ref = three_launches(tmp_path, demangled="row_norm_kernel")  # Triton: no parameter list
    written = written_params([ref])
    folder, _ = write_probe(
        ref, tmp_path / "fresh", "fresh_inputs", outputs=set(), inputs=snapshots(ref, written, of=False)
    )
    got = files(folder)
    assert got["0-0.bin"] != ROWS.tobytes()
    assert got["0-1.bin"] == INDEX.tobytes()


def test_float_like_tells_floats_from_small_integers() -> None:
    assert float_like(ROWS.view(np.int32))
    assert not float_like(INDEX)
    assert not float_like(np.zeros(16, np.int32))
    assert not float_like(np.array([1, 2, 3, ROWS.view(np.int32)[0]], np.int32))  # 3 of 4 small


def test_an_output_the_kernel_reads_is_not_overwritten_whole(tmp_path: Path) -> None:
    ref = three_launches(tmp_path)
    nan = np.full(8, np.nan, np.float32)
    accumulated = NORMS.copy()
    accumulated[3] = np.nan  # launch 2 adds to what the output held: the NaN shows through
    probed = build(
        tmp_path,
        "probed",
        KERNEL,
        [
            [("ptr", ROWS, ROWS), ("ptr", INDEX, INDEX), ("ptr", nan, after)]
            for after in (NORMS, accumulated, NORMS)
        ],
    )
    assert overwritten(ref, probed, {(0, 2), (1, 2), (2, 2)}) == {(0, 2), (2, 2)}


def test_a_rewrite_that_leaves_the_nan_in_place_fails(tmp_path: Path) -> None:
    """A launch that skips work because the output already held the answer, under the NaN probe."""
    nan = np.full(8, np.nan, np.float32)

    def run(name: str, second_after: np.ndarray):
        outputs = [(nan, NORMS), (nan, second_after), (nan, NORMS)]
        return build(
            tmp_path,
            name,
            KERNEL,
            [[("ptr", ROWS, ROWS), ("ptr", INDEX, INDEX), ("ptr", b, a)] for b, a in outputs],
        )

    reference = run("ref", NORMS)
    assert compare_captures([reference], run("honest", NORMS), **TOL).passed
    lazy = compare_captures([reference], run("lazy", nan), **TOL)
    assert lazy.failure == "mismatch"
    assert lazy.reason is not None and lazy.reason.startswith("launch 2 of 3") and "NaN/Inf" in lazy.reason
