"""Counter entries for the tests of their keeping in the service and their way through the worker: one the
real engine saved for transpose_bank's recorded profile, and the same counters under other keys."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from intelliperf.contract import JobSpec, Report
from intelliperf.contract.counters import StoredCounters
from intelliperf.engine.counter_store import CounterStore
from intelliperf.repository_hosts import repository_name
from tests.recorded import EXAMPLES
from tests.support.hashed_replay import Hashed, diagnosed

CODE_HASH = "00000000000000aa"


@dataclass(frozen=True)
class SavedEntry:
    key: str
    body: bytes
    report: Report
    """The report of the run that saved it."""

    @property
    def name(self) -> str:
        return f"{self.key}.json"


def saved_entry(work: Path) -> SavedEntry:
    """The entry the engine saves for transpose_bank's tiled kernel, diagnosed in ``work``."""
    project = work / "transpose_bank"
    shutil.copytree(EXAMPLES / "transpose_bank", project, ignore=shutil.ignore_patterns("bin"))
    store = CounterStore(None, work / "entries")
    report = diagnosed(Hashed({"_Z15transpose_tiledPKfPfii": CODE_HASH}), project, store)
    (path,) = (work / "entries").glob("*.json")
    return SavedEntry(path.stem, path.read_bytes(), report)


def under_code_hash(entry: SavedEntry, code_hash: str) -> SavedEntry:
    """``entry``'s counters as if its kernel's code hash were ``code_hash`` (16 hex digits): another key,
    the same size."""
    stored = StoredCounters.model_validate_json(entry.body)
    key = stored.key.model_copy(update={"code_hash": code_hash})
    body = json.dumps(stored.model_copy(update={"key": key}).model_dump(mode="json")).encode()
    return SavedEntry(key.digest, body, entry.report)


def spec(ref: str = "main", repository: str | None = "acme/kernels", track: bool = True) -> JobSpec:
    """A diagnosis of ``repository`` at ``ref`` (None: a job without a repository), tracking main."""
    where = {"repository": {"url": f"https://github.com/{repository}.git", "ref": ref}} if repository else {}
    return JobSpec.model_validate(
        {
            **where,
            "applications": [{"command": "./bin/transpose"}],
            "formula": "diagnoseOnly",
            **({"track": {"base_branch": "main"}} if track else {}),
        }
    )


def repository_of(job: JobSpec) -> str | None:
    """owner/name, as the service names the job's repository from its URL."""
    return repository_name(job.repository.url) if job.repository else None
