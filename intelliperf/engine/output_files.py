"""Compare the files an application writes (``applications[].output_files``) between the original project
and a rewrite, with Accordo's numeric tolerance model (accordo/compare.py) applied to whole files.

A file is read as numbers: a NumPy ``.npy`` array, else every number in its text (whitespace, commas or any
other separators). The reference is run several times (``calibration_runs``, and up to ``noise_runs`` when
those disagree); per element, the candidate must lie within ``atol + rtol * |mean| + k * std`` of the
reference runs' mean, where ``k = t(alpha / noisy, n - 1) * sqrt(1 + 1/n)`` covers their own scatter over
the ``noisy`` elements where they differ (0 where every run agreed). The bound is Accordo's own
(accordo/float_bound.py), so a value passes or fails alike in a file and in a kernel's buffer: where a
reference run is not finite the element is judged against the first run, a NaN or Inf must be where the
first run has the same one, and a different number of values fails outright.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accordo.float_bound import Tolerance, check_floats, noise_factor, reference_stats

__all__ = ["FileVerdict", "compare_file", "disagree", "read_numbers", "snapshot"]

_NUMBER = re.compile(rb"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf(?:inity)?)", re.IGNORECASE)


def read_numbers(path: Path) -> np.ndarray:
    """The numbers in ``path`` as float64, flattened. Raises ValueError when it holds none."""
    if path.suffix == ".npy":
        values = np.load(path, allow_pickle=False).astype(np.float64).ravel()
    else:
        values = np.array([float(m) for m in _NUMBER.findall(path.read_bytes())], dtype=np.float64)
    if values.size == 0:
        raise ValueError(f"{path.name} holds no numbers")
    return values


@dataclass(frozen=True)
class FileVerdict:
    name: str
    passed: bool
    reason: str | None
    checked: int
    noisy: int


def compare_file(
    name: str,
    references: Sequence[np.ndarray],
    candidate: np.ndarray,
    *,
    atol: float,
    rtol: float,
    alpha: float,
) -> FileVerdict:
    """``candidate`` against the reference runs' values of one output file."""
    sizes = {r.size for r in references}
    if len(sizes) != 1:
        raise ValueError(f"{name}: the original's runs wrote {sorted(sizes)} values: it is not deterministic")
    if candidate.size != references[0].size:
        reason = f"{name}: the rewrite wrote {candidate.size} values, the original {references[0].size}"
        return FileVerdict(name, False, reason, 0, 0)
    reference = reference_stats(references)
    noisy = int(np.count_nonzero(_runs_differ(references)))
    tolerance = Tolerance(
        atol=atol, rtol=rtol, rounding=0.0, noise_k=noise_factor(alpha, noisy, len(references))
    )
    check = check_floats(reference, candidate, tolerance)
    mean, allowed = reference.mean, check.allowed
    bad = np.flatnonzero(check.bad)
    if bad.size == 0:
        return FileVerdict(name, True, None, int(candidate.size), noisy)
    i = int(bad[0])
    reason = (
        f"{name}: {bad.size} of {candidate.size} values outside the original's bounds; first at value {i}: "
        f"{candidate[i]:.9g} where the original's runs give {mean[i]:.9g} +/- {allowed[i]:.3g}"
    )
    return FileVerdict(name, False, reason, int(candidate.size), noisy)


def _runs_differ(runs: Sequence[np.ndarray]) -> np.ndarray:
    """Per element, whether some reference run differs from the first (NaN equals NaN), as Accordo counts
    the elements where a buffer's runs disagree."""
    differ = np.zeros(runs[0].shape, dtype=bool)
    for run in runs[1:]:
        differ |= ~((run == runs[0]) | (np.isnan(run) & np.isnan(runs[0])))
    return differ


def snapshot(folder: Path, names: Sequence[str]) -> dict[str, np.ndarray]:
    """The numbers of each output file the application just wrote in ``folder``; FileNotFoundError or
    ValueError (no numbers) naming the file otherwise."""
    found: dict[str, np.ndarray] = {}
    for name in names:
        path = folder / name
        if not path.is_file():
            raise FileNotFoundError(f"the application wrote no {name}")
        found[name] = read_numbers(path)
    return found


def disagree(runs: Sequence[Mapping[str, np.ndarray]]) -> bool:
    """Whether the reference runs wrote different values in any file."""
    return any(
        run[name].size != runs[0][name].size or not np.array_equal(run[name], runs[0][name], equal_nan=True)
        for run in runs[1:]
        for name in runs[0]
    )
