"""What every GPU benchmark script needs: the device's name, the wall time of a plain run, and the rows of
earlier outputs joined with this run's (``--rows-from``: one device call is limited, so a table is measured
in parts)."""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.gpu_record import device_name

__all__ = ["device_name", "earlier_outputs", "joined_rows", "plain_wall"]


def plain_wall(argv: list[str], cwd: Path, repeats: int = 3) -> float:
    """Median wall time of ``repeats`` runs of ``argv`` without any instrumentation."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def earlier_outputs(paths: Sequence[Path], device: str | None) -> list[dict[str, Any]]:
    """The earlier outputs at ``paths``, read; ValueError unless each names the device it was measured on
    (its ``device`` field) and that is ``device``, the device of this run: one table compares one GPU's
    numbers. ``device`` None (this run measures nothing, it only joins earlier outputs): they must name
    one device among themselves. An output without a ``device`` field is refused as well, since nothing
    says which GPU measured it. Call it before any GPU work, so that a wrong file costs no GPU time."""
    outputs = [json.loads(path.read_text()) for path in paths]
    unnamed = [str(path) for path, output in zip(paths, outputs, strict=True) if not output.get("device")]
    if unnamed:
        raise ValueError(f"{', '.join(unnamed)} names no device: its rows cannot be joined with others")
    devices = {output["device"] for output in outputs}
    if device is not None and devices - {device}:
        raise ValueError(
            f"the earlier rows come from {', '.join(sorted(devices - {device}))}, this run from {device}"
        )
    if len(devices) > 1:
        raise ValueError(f"the earlier rows come from {len(devices)} devices: {', '.join(sorted(devices))}")
    return outputs


def joined_rows(
    earlier: Sequence[Mapping[str, Any]],
    rows: Sequence[dict[str, Any]],
    *,
    key: str,
    order: Sequence[str],
    field: str = "examples",
) -> list[dict[str, Any]]:
    """The rows of ``earlier`` outputs (each output's list ``field``) joined with this run's ``rows``.

    Rows belong to the name in their ``key`` field (a name may have several rows, e.g. an example's original
    and fixed variants). A name's rows come from the last of earlier[0], earlier[1], ..., ``rows`` that has
    it: a name measured again replaces every earlier row of it, and a later earlier output replaces an
    older one, so no name is ever counted twice. Names are ordered as in ``order`` (the manifest); a name
    not in it (one dropped from the manifest since) keeps its rows, after the others, in the order first
    met. A name's rows keep their order."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for source in [*(output[field] for output in earlier), rows]:
        fresh: dict[str, list[dict[str, Any]]] = {}
        for row in source:
            fresh.setdefault(row[key], []).append(row)
        by_name |= fresh  # a name met before keeps its place among the names not in ``order``
    rank = {name: index for index, name in enumerate(order)}
    names = sorted(by_name, key=lambda name: rank.get(name, len(rank)))  # stable: first met after that
    return [row for name in names for row in by_name[name]]
