from __future__ import annotations

from pathlib import Path

from intelliperf.contract import Diagnosis
from intelliperf.engine.diagnose import project_relative
from tests.support.reports import make_diagnosis


def diagnosis(*files: str) -> Diagnosis:
    return make_diagnosis(locations=[(file, 3) for file in files])


def test_workspace_files_become_project_relative(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    header = "/usr/local/cuda/include/sm_60_atomic_functions.hpp"
    project = tmp_path / "project"
    (project / "lib").mkdir(parents=True)
    files = [str(ws / "src" / "k.cu"), header, "k.cu", str(project / "lib" / "a.cu")]
    [out] = project_relative([diagnosis(*files)], ws, project)
    assert [loc.file for loc in out.locations] == ["src/k.cu", header, "k.cu", "lib/a.cu"]
    assert out.locations[0].line == 3 and out.kernel == "k"
