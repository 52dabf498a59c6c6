"""`intelliperf submit`'s choices made before it talks to a service: where the service and its token come
from, which LLM key goes with a job, the exit code a finished job gives, and a recording from outside the
project packed into the upload (tests/service/test_submit.py runs the command against a real stack)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from intelliperf.contract import JobSpec
from intelliperf.errors import SpecError
from intelliperf.submit import (
    DEFAULT_SERVICE_URL,
    REPLAY_FOLDER,
    exit_code_of,
    llm_key,
    pack_with_replay,
    resolve_service,
)
from tests.recorded import EXAMPLES, RECORDED

OPTIMIZE = JobSpec.model_validate({"applications": [{"command": "./a"}], "build_command": "make"})
DIAGNOSE = JobSpec.model_validate({"applications": [{"command": "./a"}], "formula": "diagnoseOnly"})


def test_the_option_then_the_environment_then_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[service]\nurl = "http://config:1"\ntoken = "from-config"\n')
    env = {"INTELLIPERF_CONFIG": str(config)}
    assert resolve_service(None, None, env) == ("http://config:1", "from-config")
    env |= {"INTELLIPERF_SERVICE_URL": "http://env:2", "INTELLIPERF_TOKEN": "from-env"}
    assert resolve_service(None, None, env) == ("http://env:2", "from-env")
    assert resolve_service("http://option:3", "from-option", env) == ("http://option:3", "from-option")
    nothing = {"INTELLIPERF_CONFIG": str(tmp_path / "absent.toml"), "INTELLIPERF_TOKEN": "t"}
    assert resolve_service(None, None, nothing) == (DEFAULT_SERVICE_URL, "t")
    with pytest.raises(SpecError, match="no token for the service"):
        resolve_service(None, None, {"INTELLIPERF_CONFIG": str(tmp_path / "absent.toml")})
    config.write_text("[service\n")
    with pytest.raises(SpecError, match="cannot be read"):
        resolve_service(None, None, {"INTELLIPERF_CONFIG": str(config)})


def test_only_a_job_that_calls_the_llm_takes_a_key_along() -> None:
    assert llm_key(DIAGNOSE, {"LLM_GATEWAY_KEY": "sk-1"}) is None
    assert llm_key(OPTIMIZE, {"LLM_GATEWAY_KEY": "sk-1", "OPENAI_API_KEY": "sk-2"}) == "sk-1"
    assert llm_key(OPTIMIZE, {"OPENAI_API_KEY": "sk-2"}) == "sk-2"
    assert llm_key(OPTIMIZE, {"ANTHROPIC_API_KEY": "sk-3"}) is None


@pytest.mark.parametrize(
    ("job", "code"),
    [
        ({"status": "succeeded", "outcome": "diagnosed"}, 0),
        ({"status": "failed", "outcome": "build_failed"}, 5),
        ({"status": "failed", "outcome": "llm_error"}, 12),
        ({"status": "failed", "outcome": "timeout"}, 1),
        ({"status": "cancelled", "outcome": "cancelled"}, 1),
    ],
)
def test_a_finished_job_s_exit_code(job: dict[str, str], code: int) -> None:
    assert exit_code_of(job) == code


def test_a_recording_from_outside_the_project_is_uploaded_with_it(tmp_path: Path) -> None:
    recording = RECORDED / "transpose_bank" / "original"
    archive, folder, files = pack_with_replay(EXAMPLES / "transpose_bank", recording)
    assert folder == REPLAY_FOLDER
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as packed:
        names = set(packed.getnames())
    assert {f"{REPLAY_FOLDER}/{p.name}" for p in recording.iterdir()} <= names
    assert "transpose.cu" in names and files == len(names)
    inside = tmp_path / "project"
    (inside / "profile").mkdir(parents=True)
    (inside / "profile" / "trace.jsonl").write_text("{}\n")
    _, folder, _ = pack_with_replay(inside, inside / "profile")
    assert folder == "profile"  # inside the project: uploaded where it is
