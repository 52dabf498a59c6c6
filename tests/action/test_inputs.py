"""The Action's inputs as the environment carries them: parsing, checking, and the job spec they make."""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from intelliperf.action._inputs import GithubContext, InputError, build_spec, idempotency_key, read_inputs
from intelliperf.action._pack import pack_project
from intelliperf.action._workflow import Workflow

BASE = {"INPUT_SERVICE_URL": "http://127.0.0.1:8000", "INPUT_APPLICATIONS": '["./bin/app"]'}
GITHUB = GithubContext(
    workspace=".",
    repository="octo/kernels",
    sha="0123456789abcdef0123456789abcdef01234567",
    ref_name="main",
    server_url="https://github.com",
    run_id="42",
    run_attempt="1",
    job="intelliperf",
    action="__intelliperf",
)


def inputs(**values: str) -> dict[str, str]:
    return BASE | {f"INPUT_{name.upper()}": value for name, value in values.items()}


def error_of(env: dict[str, str]) -> InputError:
    with pytest.raises(InputError) as caught:
        build_spec(read_inputs(env), GITHUB)
    return caught.value


def test_applications_with_per_application_overrides() -> None:
    apps = [
        {"command": "./bin/transpose 20", "formula": "bankConflict", "build_script": "make transpose"},
        {"command": ["./bin/hist", "--n", "4"], "top_n": 3, "kernel": "hist.*", "name": "histogram"},
        "./bin/plain --quick",
    ]
    env = inputs(
        applications=json.dumps(apps),
        formula="auto",
        build_command="make",
        instrument_command="make LINEINFO=1",
        top_n="5",
        docker_image="ghcr.io/octo/cuda:12.6",
        create_pr="true",
        model="gpt-4o-mini",
    )
    spec = build_spec(read_inputs(env), GITHUB)
    assert [a.command for a in spec.applications] == [
        ["./bin/transpose", "20"],
        ["./bin/hist", "--n", "4"],
        ["./bin/plain", "--quick"],
    ]
    first = spec.for_application(spec.applications[0])
    assert (first.formula, first.build_command, first.top_n) == ("bankConflict", "make transpose", 5)
    second = spec.for_application(spec.applications[1])
    assert (second.formula, second.build_command, second.top_n, second.kernel) == (
        "auto",
        "make",
        3,
        "hist.*",
    )
    assert spec.instrument_command == "make LINEINFO=1"
    assert spec.container.image == "ghcr.io/octo/cuda:12.6"
    assert spec.pull_request.create_pr is True
    assert spec.llm.model == "gpt-4o-mini"
    # the project travels as an upload; the commit is named for the token's scope and the pull request
    assert spec.repository is not None and spec.repository.commit == GITHUB.sha
    outside = build_spec(read_inputs(env), GithubContext(workspace="."))
    assert outside.repository is None


def test_bad_applications_json_names_the_input_and_the_place() -> None:
    error = error_of(inputs(applications='[{"command": "./bin/app",}]'))
    assert error.name == "applications"
    assert "not valid JSON" in str(error) and "line 1 column" in str(error)
    assert str(error).startswith("input 'applications':")


@pytest.mark.parametrize(
    ("applications", "needle"),
    [
        ("[]", "non-empty JSON array"),
        ("42", "non-empty JSON array"),
        ('[{"name": "x"}]', "applications[0] has no 'command'"),
        ('[{"command": "a", "buildCommand": "make"}]', "unknown key(s) buildCommand"),
        ('["a", {"command": "b", "formula": "bank conflict"}]', "applications[1].formula"),
        ('["a", {"command": "b", "formula": "bankConflicts"}]', "unknown formula 'bankConflicts'"),
        ('[{"command": "a", "top_n": 0}]', "applications[0].top_n"),
        ('[{"command": "a", "kernel": "(["}]', "applications[0].kernel"),
        ('[{"command": "a", "build_command": "x", "build_script": "y"}]', "not both"),
    ],
)
def test_bad_applications_say_which_entry(applications: str, needle: str) -> None:
    error = error_of(inputs(applications=applications))
    assert error.name == "applications"
    assert needle in str(error)


@pytest.mark.parametrize(
    ("name", "value", "needle"),
    [
        ("create_pr", "maybe", "expected true or false"),
        ("wait", "sometimes", "expected true or false"),
        ("top_n", "ten", "whole number"),
        ("top_n", "0", "between 1 and 100"),
        ("fail_on", "always", "never, error, no-speedup"),
        ("source", "svn", "archive, git"),
        ("timeout_minutes", "soon", "number of minutes"),
        ("formula", "bank-conflict", "formula"),
        ("formula", "registerPresure", "unknown formula 'registerPresure'; choose one of: bankConflict"),
        ("gpu_arch", "hopper", "gpu.arch"),
        ("spec", "[1]", "JSON object"),
        ("spec", '{"replay": "../up"}', "replay"),
        ("service_url", "intelliperf.example.com", "http(s) URL"),
        ("idempotency_key", "has space", "printable ASCII"),
    ],
)
def test_each_bad_input_is_named(name: str, value: str, needle: str) -> None:
    error = error_of(inputs(**{name: value}))
    assert error.name == name, error
    assert needle in str(error)


def test_required_inputs() -> None:
    assert error_of({"INPUT_APPLICATIONS": '["a"]'}).name == "service_url"
    assert error_of({"INPUT_SERVICE_URL": "http://x"}).name == "applications"


def test_amd_spellings_project_directory_and_output_json() -> None:
    apps = [{"command": "a", "project_directory": "kernels", "output_json": "out.json"}]
    parsed = read_inputs(inputs(applications=json.dumps(apps)))
    assert build_spec(parsed, GITHUB).project_directory == "kernels"
    assert any("output_json is ignored" in w for w in parsed.warnings)
    two = [{"command": "a", "project_directory": "k1"}, {"command": "b", "project_directory": "k2"}]
    assert "one step per project directory" in str(error_of(inputs(applications=json.dumps(two))))
    assert "one job each" in str(error_of(inputs(applications=json.dumps(apps), project_directory="other")))


def test_spec_input_is_the_base_and_named_inputs_win() -> None:
    env = inputs(spec='{"replay": "profile", "top_n": 2, "llm": {"temperature": 0.5}}', top_n="7", model="m")
    spec = build_spec(read_inputs(env), GITHUB)
    assert (spec.replay, spec.top_n, spec.llm.temperature, spec.llm.model) == ("profile", 7, 0.5, "m")


def test_source_git_names_the_commit() -> None:
    spec = build_spec(read_inputs(inputs(source="git")), GITHUB)
    assert spec.repository is not None
    assert spec.repository.url == "https://github.com/octo/kernels.git"
    assert (spec.repository.ref, spec.repository.commit) == ("main", GITHUB.sha)
    bare = GithubContext(workspace=".")
    with pytest.raises(InputError, match="GITHUB_SHA"):
        build_spec(read_inputs(inputs(source="git")), bare)


def test_secrets_never_enter_the_spec() -> None:
    parsed = read_inputs(
        inputs(llm_gateway_key="sk-123", intelliperf_actions_token="ghp_x", service_token="t")
    )
    assert sorted(parsed.secrets) == ["ghp_x", "sk-123", "t"]
    dumped = build_spec(parsed, GITHUB).model_dump_json()
    assert "sk-123" not in dumped and "ghp_x" not in dumped


def test_idempotency_key_per_attempt_and_spec() -> None:
    parsed = read_inputs(BASE)
    spec = build_spec(parsed, GITHUB)
    key = idempotency_key(parsed, GITHUB, spec)
    assert key is not None and key.startswith("gha:octo/kernels:42:1:intelliperf:")
    assert key == idempotency_key(parsed, GITHUB, spec)
    again = GithubContext(**{**GITHUB.__dict__, "run_attempt": "2"})
    assert idempotency_key(parsed, again, spec) != key
    other = build_spec(read_inputs(inputs(top_n="3")), GITHUB)
    assert idempotency_key(parsed, GITHUB, other) != key
    assert idempotency_key(parsed, GithubContext(workspace="."), spec) is None
    assert idempotency_key(read_inputs(inputs(idempotency_key="mine")), GITHUB, spec) == "mine"


def parse_outputs(text: str) -> dict[str, str]:
    """GITHUB_OUTPUT as the runner reads it: name=value or name<<DELIM ... DELIM."""
    outputs, lines = {}, iter(text.splitlines())
    for line in lines:
        if "<<" in line:
            name, delimiter = line.split("<<", 1)
            body = []
            for inner in lines:
                if inner == delimiter:
                    break
                body.append(inner)
            outputs[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
    return outputs


def test_workflow_commands_and_files(tmp_path: Path) -> None:
    out = io.StringIO()
    env = {"GITHUB_OUTPUT": str(tmp_path / "out"), "GITHUB_STEP_SUMMARY": str(tmp_path / "sum")}
    flow = Workflow(env, out)
    flow.mask("line one\nline two")
    with flow.group("title"):
        flow.error("bad: 50%\nsecond line", title="a, b: c")
    flow.set_output("multi", "a\nb<<EOF\nEOF")
    flow.set_output("plain", "x")
    flow.add_summary("# Hello")
    assert out.getvalue().splitlines() == [
        "::add-mask::line one",
        "::add-mask::line two",
        "::group::title",
        "::error title=a%2C b%3A c::bad: 50%25%0Asecond line",
        "::endgroup::",
    ]
    assert parse_outputs((tmp_path / "out").read_text()) == {"multi": "a\nb<<EOF\nEOF", "plain": "x"}
    assert (tmp_path / "sum").read_text() == "# Hello\n\n"


def names_in(data: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        return sorted(archive.getnames())


def test_pack_respects_gitignore_and_skips_git(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "k.cu").write_text("__global__ void k() {}\n")
    (tmp_path / "Makefile").write_text("all:\n")
    (tmp_path / ".gitignore").write_text("bin/\n*.log\n")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "app").write_text("binary")
    (tmp_path / "run.log").write_text("noise")
    (tmp_path / "link.cu").symlink_to("src/k.cu")
    plain = pack_project(tmp_path)
    assert not plain.gitignore  # not a git work tree yet: everything but .git
    assert names_in(plain.data) == [".gitignore", "Makefile", "bin/app", "link.cu", "run.log", "src/k.cu"]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "Makefile"], check=True)
    (tmp_path / "Makefile").unlink()  # tracked but deleted in the work tree
    packed = pack_project(tmp_path)
    assert packed.gitignore
    assert names_in(packed.data) == [".gitignore", "link.cu", "src/k.cu"]
    with tarfile.open(fileobj=io.BytesIO(packed.data)) as archive:
        assert archive.getmember("link.cu").issym()


def test_mode_track_measures_only_and_compares_with_the_pull_requests_base() -> None:
    pull = GithubContext(
        workspace=".", repository="octo/kernels", sha=GITHUB.sha, head_ref="feature", base_ref="dev"
    )
    spec = build_spec(read_inputs(inputs(mode="track", min_effect="0.05")), pull)
    assert spec.formula == "diagnoseOnly"
    assert spec.track is not None and (spec.track.base_branch, spec.track.min_effect) == ("dev", 0.05)
    assert spec.repository is not None and spec.repository.ref == "feature"
    on_main = build_spec(read_inputs(inputs(mode="track")), GITHUB)
    assert on_main.track is not None and (on_main.track.base_branch, on_main.track.min_effect) == (
        "main",
        0.03,
    )
    named = build_spec(read_inputs(inputs(mode="track", base_branch="release")), pull)
    assert named.track is not None and named.track.base_branch == "release"
    assert build_spec(read_inputs(inputs()), GITHUB).track is None  # optimize: no comparison


@pytest.mark.parametrize(
    ("values", "name", "needle"),
    [
        ({"mode": "track", "formula": "bankConflict"}, "formula", "measures and diagnoses only"),
        ({"mode": "watch"}, "mode", "optimize, track"),
        ({"mode": "track", "min_effect": "3%"}, "min_effect", "expected a share"),
        ({"mode": "track", "min_effect": "2"}, "min_effect", "between 0 and 1"),
    ],
)
def test_bad_track_inputs_are_named(values: dict[str, str], name: str, needle: str) -> None:
    error = error_of(inputs(**values))
    assert error.name == name and needle in str(error), str(error)
