"""The Action's `mode: track` in a simulated runner against a live service and worker (recorded profiles
replayed) and a fake GitHub: runs on the base branch build each kernel's series; a pull request's run
comments the kernels that moved beyond the noise and adds a check run; a regression fails the step only
with `fail_on: regression`."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from intelliperf.action._track import CHECK_NAME
from tests.action.test_runner import Step, run_action, stack, workspace  # noqa: F401 (fixtures)
from tests.service.conftest import ROOT, LiveService
from tests.support.fake_github import FakeGitHub, FakeRepository

FIXED = ROOT / "tests" / "fixtures" / "gpu" / "transpose_bank" / "fixed"  # the kernel 78 -> 37 µs


@pytest.fixture
def github() -> Iterator[tuple[FakeGitHub, FakeRepository]]:
    with FakeGitHub() as gh:
        repo = gh.add_repository("octo/kernels", {"README.md": "kernels\n"})
        yield gh, repo


def open_pull(gh: FakeGitHub, repo: FakeRepository, branch: str) -> tuple[int, str]:
    head = repo.commit_files({"kernels/t.cu": f"// {branch}\n"}, f"work on {branch}", branch=branch)
    return gh.open_pull("octo/kernels", branch), head


def on_branch(ws: Path, url: str, branch: str, sha: str, profile: str = "profile") -> Step:
    step = run_action(
        ws,
        url,
        mode="track",
        spec=json.dumps({"replay": profile}),
        github={"GITHUB_REF_NAME": branch, "GITHUB_SHA": sha},
    )
    assert step.returncode == 0, step.log
    return step


def on_pull(
    ws: Path, url: str, gh: FakeGitHub, number: int, head: str, base: str, profile: str, **inputs: str
) -> Step:
    event = ws.parent / f"event-{number}.json"
    event.write_text(json.dumps({"pull_request": {"number": number, "head": {"sha": head}}}))
    return run_action(
        ws,
        url,
        mode="track",
        spec=json.dumps({"replay": profile}),
        intelliperf_actions_token=gh.token,
        github={
            "GITHUB_REF_NAME": f"{number}/merge",
            "GITHUB_HEAD_REF": f"pr-{number}",
            "GITHUB_BASE_REF": base,
            "GITHUB_SHA": head,
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_API_URL": gh.api_url,
        },
        **inputs,
    )


def test_a_pull_request_is_told_which_kernels_moved_against_its_base(
    stack: LiveService,  # noqa: F811
    workspace: Path,  # noqa: F811
    github: tuple[FakeGitHub, FakeRepository],
) -> None:
    gh, repo = github
    shutil.copytree(FIXED, workspace / "kernels" / "profile-fixed")
    for number in range(3):  # main: the original kernel, three commits
        on_branch(workspace, stack.url, "main", f"{number:040x}")
    number, head = open_pull(gh, repo, "pr-faster")
    step = on_pull(workspace, stack.url, gh, number, head, "main", "profile-fixed")
    assert step.returncode == 0, step.log
    assert (step.outputs["moved_kernels"], step.outputs["slower_kernels"]) == ("1", "0")
    assert "## IntelliPerf: kernel times against main" in step.summary
    (comment,) = repo.comments
    assert comment["issue_number"] == number
    assert "1 of 2 kernels moved beyond the noise against the base branch:" in comment["body"]
    assert "| `transpose_tiled(float const*, float*, int, int)` |" in comment["body"]
    assert "| faster |" in comment["body"] and "| slower |" not in comment["body"]
    (check,) = repo.check_runs
    assert (check["name"], check["head_sha"], check["conclusion"]) == (CHECK_NAME, head, "success")
    assert f"posted to pull request #{number}" in step.log
    assert step.log.count(gh.token) == 1 and f"::add-mask::{gh.token}" in step.log  # masked, never shown
    assert gh.token not in comment["body"]


def test_a_regression_fails_the_step_only_when_asked(
    stack: LiveService,  # noqa: F811
    workspace: Path,  # noqa: F811
    github: tuple[FakeGitHub, FakeRepository],
) -> None:
    gh, repo = github
    shutil.copytree(FIXED, workspace / "kernels" / "profile-fixed")
    for number in range(3):  # a branch where the kernel is already fast
        on_branch(workspace, stack.url, "fast", f"{number + 16:040x}", profile="profile-fixed")
    number, head = open_pull(gh, repo, "pr-slower")
    tolerant = on_pull(workspace, stack.url, gh, number, head, "fast", "profile")
    assert tolerant.returncode == 0, tolerant.log
    assert tolerant.outputs["slower_kernels"] == "1"
    strict = on_pull(workspace, stack.url, gh, number, head, "fast", "profile", fail_on="regression")
    assert strict.returncode == 1, strict.log
    assert "1 kernel(s) slower than on fast beyond the noise" in strict.log
    assert [c["conclusion"] for c in repo.check_runs] == ["neutral", "neutral"]
    (comment,) = repo.comments  # the second run edited the first run's comment
    assert "| slower |" in comment["body"]
