"""scripts/leftovers, which scripts/test and .ci/run use so that a test run leaves nothing of its own in
/tmp (the counter pass's lock files are kept there for every process to find) or in the checkout."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "leftovers"

# what other tests make in /tmp and podman meanwhile would be found (and removed) as this run's
pytestmark = pytest.mark.alone


def leftovers(checkout: Path, action: str, folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(checkout / "scripts" / "leftovers"), action, str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def checkout_with_script(path: Path) -> Path:
    """A checkout of just the script, as a clean clone is: no .wheelhouse/."""
    (path / "scripts").mkdir(parents=True)
    shutil.copy2(SCRIPT, path / "scripts" / "leftovers")
    return path


def test_a_wheelhouse_the_run_builds_is_left_and_then_removed(tmp_path: Path) -> None:
    checkout = checkout_with_script(tmp_path / "checkout")
    assert leftovers(checkout, "before", tmp_path / "found").returncode == 0
    assert leftovers(checkout, "check", tmp_path / "found").returncode == 0
    (checkout / ".wheelhouse").mkdir()
    check = leftovers(checkout, "check", tmp_path / "found")
    assert check.returncode == 1 and "left: .wheelhouse/" in check.stdout
    assert leftovers(checkout, "remove", tmp_path / "found").returncode == 0
    assert not (checkout / ".wheelhouse").exists()


def test_what_a_run_adds_is_found_and_removed_and_what_was_there_stays(tmp_path: Path) -> None:
    checkout = checkout_with_script(tmp_path / "checkout")
    older = Path(f"/tmp/intelliperf-older-{uuid.uuid4().hex[:8]}.lock")
    made = Path(f"/tmp/intelliperf-counter-pass-{uuid.uuid4().hex[:8]}.lock")
    unrelated = Path(f"/tmp/someone-else-{uuid.uuid4().hex[:8]}")
    older.touch()
    try:
        assert leftovers(checkout, "before", tmp_path / "found").returncode == 0
        made.touch()
        unrelated.touch()
        check = leftovers(checkout, "check", tmp_path / "found")
        assert check.returncode == 1 and f"left in /tmp: {made.name}" in check.stdout
        assert older.name not in check.stdout and unrelated.name not in check.stdout
        removed = leftovers(checkout, "remove", tmp_path / "found")
        assert removed.returncode == 0 and made.name in removed.stdout
        assert not made.exists() and older.exists() and unrelated.exists()
        assert leftovers(checkout, "check", tmp_path / "found").returncode == 0
    finally:
        for path in (older, made, unrelated):
            path.unlink(missing_ok=True)
