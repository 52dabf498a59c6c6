"""The Action's track comment on a pull request (intelliperf/action/_track.py) against a GitHub REST server
on 127.0.0.1: one comment per workflow job, edited on each later push, found past the first page of
comments; another job's comment and people's comments are left alone; each push gets its own check run."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from intelliperf.action._inputs import GithubContext
from intelliperf.action._track import COMMENTS_PER_PAGE, Tracked, comment_marker, post_to_pull_request
from tests.support.fake_github import FakeGitHub, FakeRepository


@pytest.fixture
def github() -> Iterator[tuple[FakeGitHub, FakeRepository, int]]:
    with FakeGitHub() as gh:
        repo = gh.add_repository("octo/kernels", {"README.md": "kernels\n"})
        repo.commit_files({"kernels/t.cu": "// work\n"}, "work", branch="work")
        yield gh, repo, gh.open_pull("octo/kernels", "work")


def context(gh: FakeGitHub, job: str, sha: str) -> GithubContext:
    return GithubContext(workspace=".", repository="octo/kernels", sha=sha, job=job, api_url=gh.api_url)


def result(text: str, slower: int = 0) -> Tracked:
    heading = "## IntelliPerf: kernel times against main"
    return Tracked("main", f"{heading}\n\n{text}", moved=slower, slower=slower)


def said(comment: dict) -> str:
    """A track comment's text under its heading, or a person's comment."""
    parts = comment["body"].split("\n\n")
    return parts[1] if len(parts) > 1 else parts[0]


def people_comment(gh: FakeGitHub, number: int, text: str) -> None:
    answer = httpx.post(
        f"{gh.api_url}/repos/octo/kernels/issues/{number}/comments",
        headers={"Authorization": f"token {gh.token}"},
        json={"body": text},
    )
    assert answer.status_code == 201, answer.text


def test_a_later_push_edits_the_jobs_comment_and_adds_a_check_run(
    github: tuple[FakeGitHub, FakeRepository, int],
) -> None:
    gh, repo, number = github
    first = post_to_pull_request(context(gh, "track", "a" * 40), gh.token, number, result("first push"))
    people_comment(gh, number, "looks good")
    second = post_to_pull_request(context(gh, "track", "b" * 40), gh.token, number, result("second", 1))
    assert not first[0].endswith("(updated)") and second[0].endswith("(updated)")
    assert [said(c) for c in repo.comments] == ["second", "looks good"]
    assert repo.comments[0]["body"].endswith(comment_marker("track"))
    assert [(c["head_sha"], c["conclusion"]) for c in repo.check_runs] == [
        ("a" * 40, "success"),
        ("b" * 40, "neutral"),
    ]


def test_another_jobs_comment_is_its_own(github: tuple[FakeGitHub, FakeRepository, int]) -> None:
    gh, repo, number = github
    post_to_pull_request(context(gh, "cuda", "a" * 40), gh.token, number, result("cuda kernels"))
    post_to_pull_request(context(gh, "triton", "a" * 40), gh.token, number, result("triton kernels"))
    post_to_pull_request(context(gh, "cuda", "b" * 40), gh.token, number, result("cuda again"))
    assert [said(c) for c in repo.comments] == ["cuda again", "triton kernels"]


def test_the_comment_is_found_past_the_first_page(github: tuple[FakeGitHub, FakeRepository, int]) -> None:
    gh, repo, number = github
    for index in range(COMMENTS_PER_PAGE + 5):
        people_comment(gh, number, f"comment {index}")
    post_to_pull_request(context(gh, "track", "a" * 40), gh.token, number, result("first"))
    post_to_pull_request(context(gh, "track", "b" * 40), gh.token, number, result("second"))
    assert len(repo.comments) == COMMENTS_PER_PAGE + 6
    assert said(repo.comments[-1]) == "second"
    pages = [r for r in gh.requests if r.method == "GET" and r.path.endswith(f"/issues/{number}/comments")]
    assert [r.query.get("page") for r in pages] == [None, "2", None, "2"]  # the next page as linked
