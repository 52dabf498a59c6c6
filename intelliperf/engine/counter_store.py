"""Counters reused by content hash: a kernel whose machine code, launch shapes and source files are those of
an earlier measured run, on a device of the same name and architecture, is diagnosed from that run's
counters instead of paying the counter pass again.

An entry is one JSON file per key (vendor, device, architecture, mangled name, code hash, launch shape
hash, the quantities asked for, the entry format), holding the kernel's profile with its source paths made
relative to the workspace, a sha256 of each project file the profile's source rows name, the device as the
counter pass saw it, the commit, and the kernel's share of the counter pass's time. The code hash covers the
kernel's machine code but not its line table, so an edit that only moves lines (a comment above the kernel)
keeps it: the source files' hashes catch that, and the kernel is profiled again.

Entries are untrusted input (a job writes them): one that cannot be read or does not match its key is
skipped with a note, never trusted and never fatal. The store reads from one folder and writes to another
(the same folder for the CLI). In the service the entries live in its database, per repository, within
``counter_store_max_bytes`` (service.counter_entries): the worker downloads the repository's entries into
the job's scratch folder (mounted read-only in its container), and uploads what a job on its base branch
wrote, which the service checks (intelliperf.contract.counters) before keeping it (worker.counter_entries).
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from intelliperf.contract import DeviceInfo, RankedKernel, ReusedCounters
from intelliperf.contract.counters import (
    PROFILE,
    CounterKey,
    StoredCounters,
    entry_bytes,
    read_entry,
    refusal_reason,
)
from intelliperf.contract.profile import KernelProfile, Quantity, SourceRow
from intelliperf.engine.workspace import relative_to_roots

__all__ = ["CounterStore", "Reused", "project_commit"]

WORKSPACE = "$WORKSPACE/"
"""Prefix of a stored source path that was inside the workspace; the reader puts today's workspace there."""


@dataclass(frozen=True)
class Reused:
    profile: KernelProfile
    device: DeviceInfo
    record: ReusedCounters


def project_commit(project: Path) -> str | None:
    """The commit checked out in ``project`` (its HEAD, with a ``+`` where the work tree has changes),
    None outside a git work tree: what a saved entry names as the run that measured it."""
    try:
        head = subprocess.run(
            ["git", "-C", str(project), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30
        )
        dirty = subprocess.run(
            ["git", "-C", str(project), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


def _file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _rooted(file: str, ws: Path) -> str:
    return str(ws / file.removeprefix(WORKSPACE)) if file.startswith(WORKSPACE) else file


def _finite(metrics: Mapping[str, float]) -> dict[str, float]:
    """Metrics without NaN (n/a): JSON has no NaN, and an absent quantity reads as n/a too."""
    return {name: float(value) for name, value in metrics.items() if not math.isnan(float(value))}


def _map_rows(rows: Sequence[SourceRow], file: Any) -> list[SourceRow]:
    return [replace(row, file=file(row.file), metrics=_finite(row.metrics)) for row in rows]


def _stored_profile(profile: KernelProfile, roots: Sequence[Path]) -> dict[str, Any]:
    """``profile`` as JSON, its source paths inside one of ``roots`` (the workspace, or the project where
    binaries built before the copy point) marked relative; other files (CUDA headers) as they are."""
    relative = relative_to_roots(*roots)

    def portable_path(file: str) -> str:
        inside = relative(file)
        return file if inside is None else WORKSPACE + inside

    portable = replace(
        profile,
        metrics=_finite(profile.metrics),
        instructions=[replace(i, metrics=_finite(i.metrics)) for i in profile.instructions],
        source=_map_rows(profile.source, portable_path),
        source_text={portable_path(f): list(lines) for f, lines in profile.source_text.items()},
    )
    return PROFILE.dump_python(portable, mode="json")


def _loaded_profile(data: dict[str, Any], ws: Path) -> KernelProfile:
    profile = PROFILE.validate_python(data)
    return replace(
        profile,
        source=_map_rows(profile.source, lambda f: _rooted(f, ws)),
        source_text={_rooted(f, ws): lines for f, lines in profile.source_text.items()},
    )


def _workspace_files(profile: dict[str, Any]) -> set[str]:
    files = {row["file"] for row in profile.get("source", [])} | set(profile.get("source_text", {}))
    return {f.removeprefix(WORKSPACE) for f in files if isinstance(f, str) and f.startswith(WORKSPACE)}


@dataclass(frozen=True)
class CounterStore:
    """Where earlier counters are looked up (``read``) and new ones saved (``write``); either may be None."""

    read: Path | None
    write: Path | None
    commit: str | None = None

    @staticmethod
    def key(device: DeviceInfo, kernel: RankedKernel, quantities: Sequence[Quantity]) -> CounterKey | None:
        """The key of ``kernel``'s counters, None where the timing pass gave no code or shape hash."""
        if kernel.code_hash is None or kernel.shape_hash is None:
            return None
        return CounterKey(
            vendor=device.vendor,
            device=device.name,
            arch=device.arch,
            kernel=kernel.name,
            code_hash=kernel.code_hash,
            shape_hash=kernel.shape_hash,
            quantities=tuple(sorted(str(q) for q in quantities)),
        )

    def find(
        self, kernels: Sequence[RankedKernel], *, device: DeviceInfo, quantities: Sequence[Quantity], ws: Path
    ) -> tuple[dict[str, Reused], list[str]]:
        """The kernels whose counters can be reused, by mangled name, and a note for each entry that exists
        but cannot be used (unreadable, or its source files changed)."""
        found: dict[str, Reused] = {}
        notes: list[str] = []
        if self.read is None:
            return found, notes
        for kernel in kernels:
            key = self.key(device, kernel, quantities)
            if key is None:
                continue
            path = self.read / f"{key.digest}.json"
            if not path.is_file():
                continue
            try:
                entry = read_entry(entry_bytes(path), key.digest)
                profile = _loaded_profile(entry.profile, ws)
            except (OSError, ValueError) as error:
                reason = refusal_reason(error)
                notes.append(f"{kernel.demangled}: the stored counters {path.name} were not used ({reason})")
                continue
            changed = sorted(f for f, digest in entry.source_files.items() if _file_digest(ws / f) != digest)
            if changed:
                notes.append(
                    f"{kernel.demangled}: code unchanged since {entry.commit or 'an earlier run'} but "
                    f"{', '.join(changed[:3])} changed, so its lines may have moved: profiled again"
                )
                continue
            found[kernel.name] = Reused(
                profile=profile,
                device=entry.device,
                record=ReusedCounters(
                    kernel=kernel.name,
                    code_hash=key.code_hash,
                    shape_hash=key.shape_hash,
                    commit=entry.commit,
                    measured_at=entry.measured_at,
                    saved_s=entry.counters_s,
                ),
            )
        return found, notes

    def save(
        self,
        profiles: Mapping[str, KernelProfile],
        kernels: Sequence[RankedKernel],
        *,
        device: DeviceInfo,
        key_device: DeviceInfo,
        quantities: Sequence[Quantity],
        ws: Path,
        project: Path,
        counters_s: float,
    ) -> int:
        """Save each profiled kernel that has a key; ``counters_s`` (the pass that counted them) is shared
        among them. ``device`` is the device as the counter pass saw it, ``key_device`` as the timing pass
        did (a lookup comes before the counter pass). Source paths inside the workspace ``ws`` or the
        ``project`` it copies are stored relative. Returns how many were saved."""
        if self.write is None or not profiles:
            return 0
        self.write.mkdir(parents=True, exist_ok=True)
        share = counters_s / len(profiles)
        saved = 0
        for kernel in kernels:
            profile = profiles.get(kernel.name)
            key = self.key(key_device, kernel, quantities)
            if profile is None or key is None:
                continue
            stored = _stored_profile(profile, (ws, project))
            sources = {
                f: d for f in sorted(_workspace_files(stored)) if (d := _file_digest(ws / f)) is not None
            }
            entry = StoredCounters(
                key=key,
                profile=stored,
                source_files=sources,
                device=device,
                commit=self.commit,
                measured_at=datetime.now(UTC),
                counters_s=round(share, 3),
            )
            target = self.write / f"{key.digest}.json"
            partial = target.with_suffix(".json.partial")
            partial.write_text(json.dumps(entry.model_dump(mode="json")))
            partial.replace(target)
            saved += 1
        return saved
