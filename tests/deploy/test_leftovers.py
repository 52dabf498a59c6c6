"""scripts/leftovers, which scripts/test and .ci/run use so that a test run leaves nothing of its own in
/tmp (the counter pass's lock files are kept there for every process to find) or in the checkout."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "leftovers"


def leftovers(action: str, folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), action, str(folder)], capture_output=True, text=True, timeout=120, check=False
    )


def test_what_a_run_adds_is_found_and_removed_and_what_was_there_stays(tmp_path: Path) -> None:
    older = Path(f"/tmp/intelliperf-older-{uuid.uuid4().hex[:8]}.lock")
    made = Path(f"/tmp/intelliperf-counter-pass-{uuid.uuid4().hex[:8]}.lock")
    unrelated = Path(f"/tmp/someone-else-{uuid.uuid4().hex[:8]}")
    older.touch()
    try:
        assert leftovers("before", tmp_path / "found").returncode == 0
        made.touch()
        unrelated.touch()
        check = leftovers("check", tmp_path / "found")
        assert check.returncode == 1 and f"left in /tmp: {made.name}" in check.stdout
        assert older.name not in check.stdout and unrelated.name not in check.stdout
        removed = leftovers("remove", tmp_path / "found")
        assert removed.returncode == 0 and made.name in removed.stdout
        assert not made.exists() and older.exists() and unrelated.exists()
        assert leftovers("check", tmp_path / "found").returncode == 0
    finally:
        for path in (older, made, unrelated):
            path.unlink(missing_ok=True)
