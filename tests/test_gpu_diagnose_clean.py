"""On the GPU: the fixed version of every bundled example, and the controls, are diagnosed clean."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.diagnose_run import MANIFEST, run_example

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("example", MANIFEST, ids=lambda e: e["name"])
def test_fixed_versions_and_controls_are_clean(example: dict, tmp_path: Path) -> None:
    apps = [example["fixed_app"]] + ([] if example["formula"] else [example["app"]])
    for app in apps:
        report = run_example(example, "./" + app, "diagnoseOnly", tmp_path)
        assert report["diagnoses"], "nothing was diagnosed"
        flagged = [(d["formula"], d["kernel"], d["reasoning"]) for d in report["diagnoses"] if d["present"]]
        assert flagged == [], f"{app}: {flagged}"
        assert report["selected"] is None
