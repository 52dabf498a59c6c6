"""`intelliperf run` with a scripted model, as the GPU loop tests run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.scripted_llm import ScriptedLLM

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-scripted-gpu-test"
PYTHONPATH = os.environ.get("PYTHONPATH", "")


def run_scripted(server: ScriptedLLM, *args: str) -> subprocess.CompletedProcess[str]:
    """`intelliperf run` with the scripted model at ``server`` and the given options and command."""
    return subprocess.run(
        [sys.executable, "-m", "intelliperf", "run", "-m", "scripted", "--api_base", server.api_base, *args],
        cwd=ROOT,
        env={**os.environ, "LLM_GATEWAY_KEY": KEY, "PYTHONPATH": f"{ROOT}{os.pathsep}{PYTHONPATH}"},
        capture_output=True,
        text=True,
        timeout=900,
    )
