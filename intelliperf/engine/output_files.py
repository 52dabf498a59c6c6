"""Compare the files an application writes (``applications[].output_files``) between the original project
and a rewrite, with Accordo's numeric tolerance model (accordo/compare.py) applied to whole files.

A file is read as numbers: a NumPy ``.npy`` array, else every number in its text (whitespace, commas or any
other separators). The reference is run several times (``calibration_runs``, and up to ``noise_runs`` when
those disagree); per element, the candidate must lie within ``atol + rtol * |mean| + k * std`` of the
reference runs' mean, where ``k = t(alpha / noisy, n - 1) * sqrt(1 + 1/n)`` covers their own scatter over
the ``noisy`` elements where they differ (0 where every run agreed), as Accordo bounds a float buffer. A NaN
or Inf must be where the reference has the same one; a different number of values fails outright.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accordo.stats import t_two_sided_quantile

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
    stacked = np.vstack(references)
    first = stacked[0]
    finite = np.all(np.isfinite(stacked), axis=0)
    noisy = int(np.count_nonzero(np.any(stacked != first, axis=0) & finite))
    n = len(references)
    with np.errstate(invalid="ignore", over="ignore"):
        mean = np.where(finite, stacked.mean(axis=0), first)
        std = np.where(finite, stacked.std(axis=0, ddof=1), 0.0) if n > 1 else np.zeros_like(first)
        k = t_two_sided_quantile(alpha / noisy, n - 1) * math.sqrt(1.0 + 1.0 / n) if noisy and n > 1 else 0.0
        allowed = atol + rtol * np.abs(np.where(finite, mean, 0.0)) + k * std
        both = finite & np.isfinite(candidate)
        error = np.where(both, np.abs(candidate - mean), 0.0)
        same_special = (np.isnan(first) & np.isnan(candidate)) | (np.isinf(first) & (candidate == first))
        special = ~both & ~same_special
    bad = np.flatnonzero((error > allowed) | special)
    if bad.size == 0:
        return FileVerdict(name, True, None, int(candidate.size), noisy)
    i = int(bad[0])
    reason = (
        f"{name}: {bad.size} of {candidate.size} values outside the original's bounds; first at value {i}: "
        f"{candidate[i]:.9g} where the original's runs give {mean[i]:.9g} +/- {allowed[i]:.3g}"
    )
    return FileVerdict(name, False, reason, int(candidate.size), noisy)


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
