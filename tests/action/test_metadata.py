"""action.yml and the workflows: valid against GitHub's schemas, clean under actionlint, and every
input of action.yml reaches the client (and nothing the client reads is missing from action.yml)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.service.conftest import ROOT

BIN = Path(sys.executable).parent
WORKFLOWS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / ".github" / "workflows").glob("*.yml"))
EXAMPLES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples" / "workflows").glob("*.yml"))


def tool(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / name), *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_action_metadata_matches_the_schema() -> None:
    result = tool("check-jsonschema", "--builtin-schema", "vendor.github-actions", "action.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_workflows_match_the_schema() -> None:
    assert WORKFLOWS and EXAMPLES
    result = tool("check-jsonschema", "--builtin-schema", "vendor.github-workflows", *WORKFLOWS, *EXAMPLES)
    assert result.returncode == 0, result.stdout + result.stderr


def test_workflows_pass_actionlint() -> None:
    """ci.yml runs the Action with `uses: ./`, so actionlint also checks its inputs against action.yml."""
    result = tool("actionlint", "-no-color", *WORKFLOWS, *EXAMPLES)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_sees_a_bad_workflow(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ x.y }}\n"
    )
    result = tool("actionlint", "-no-color", str(bad))
    assert result.returncode == 1 and "undefined variable" in result.stdout


def test_every_input_reaches_the_client() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    inputs = set(action["inputs"]) - {"python_version"}  # used by the setup-python step itself
    run_step = next(s for s in action["runs"]["steps"] if s.get("id") == "run")
    assert run_step["env"] == {
        f"INPUT_{name.upper()}": f"${{{{ inputs.{name} }}}}" for name in sorted(inputs)
    }
    sources = "".join(p.read_text() for p in (ROOT / "intelliperf" / "action").glob("*.py"))
    read = set(re.findall(r'_(?:raw|bool|int|choice|json)\(env, "(\w+)"', sources))
    read |= {"applications", "service_token", "llm_gateway_key", "intelliperf_actions_token"}
    assert read == inputs
    outputs = set(action["outputs"])
    written = set(re.findall(r'set_output\("(\w+)"', sources))
    assert outputs == written


@pytest.mark.parametrize("module", ["intelliperf.action"])
def test_the_client_needs_no_service_code(module: str) -> None:
    code = (
        f"import sys, {module}, intelliperf.summary, intelliperf.contract.report\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'service', 'worker', 'fastapi', 'celery', 'sqlalchemy', 'dspy', 'litellm', 'github', 'docker'})\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
