"""The fake GitHub server itself: authentication, the API prefix, recording, ref rules, pagination."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from github import Auth, BadCredentialsException, Github, GithubException

from tests.support.fake_github import FakeGitHub

TOKEN = "ghp_fake_server_token"


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    with FakeGitHub(token=TOKEN, enterprise=True) as server:
        server.add_repository("acme/kernels", {"src/k.cu": "__global__ void k() {}\n"})
        yield server


def client(gh: FakeGitHub, token: str = TOKEN) -> Github:
    return Github(
        base_url=gh.api_url,
        auth=Auth.Token(token),
        seconds_between_requests=None,
        seconds_between_writes=None,
        retry=None,
    )


def raw_get(url: str, authorization: str | None) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(url, headers={"Authorization": authorization} if authorization else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.parametrize("authorization", [None, "token wrong", f"token {TOKEN}x", f"Basic {TOKEN}"])
def test_requests_without_the_token_get_401_and_are_recorded(
    gh: FakeGitHub, authorization: str | None
) -> None:
    status, body = raw_get(f"{gh.api_url}/repos/acme/kernels", authorization)
    assert (status, body["message"]) == (401, "Bad credentials")
    assert [(r.method, r.path, r.authorized) for r in gh.requests] == [("GET", "/repos/acme/kernels", False)]


@pytest.mark.parametrize("scheme", ["token", "Bearer"])
def test_the_token_is_accepted_as_token_or_bearer(gh: FakeGitHub, scheme: str) -> None:
    status, body = raw_get(f"{gh.api_url}/repos/acme/kernels", f"{scheme} {TOKEN}")
    assert status == 200 and body["full_name"] == "acme/kernels"
    assert body["url"] == f"{gh.api_url}/repos/acme/kernels"


def test_pygithub_with_a_wrong_token_gets_bad_credentials(gh: FakeGitHub) -> None:
    with pytest.raises(BadCredentialsException):
        client(gh, "not-the-token").get_repo("acme/kernels")


def test_only_the_enterprise_prefix_is_served(gh: FakeGitHub) -> None:
    status, _ = raw_get(f"{gh.root}/repos/acme/kernels", f"token {TOKEN}")
    assert status == 404
    repo = client(gh).get_repo("acme/kernels")
    assert repo.default_branch == "main"
    assert repo.get_branch("main").commit.sha == gh.repositories["acme/kernels"].refs["refs/heads/main"]


def test_git_objects_have_git_s_own_ids_and_refs_move_only_forward_unless_forced(gh: FakeGitHub) -> None:
    repo = client(gh).get_repo("acme/kernels")
    fake = gh.repositories["acme/kernels"]
    files = fake.flatten(fake.commits[fake.refs["refs/heads/main"]]["tree"])
    assert files["src/k.cu"] == ("100644", "41a9610e0a251c8727fb9fecb98241969fd79267")  # git hash-object
    main = repo.get_branch("main").commit.sha
    ref = repo.create_git_ref("refs/heads/feature", main)
    with pytest.raises(GithubException) as exists:
        repo.create_git_ref("refs/heads/feature", main)
    assert exists.value.status == 422
    other = fake.commit_files({"src/other.cu": "x\n"}, "unrelated", branch="side")
    with pytest.raises(GithubException, match="not a fast forward"):
        ref.edit(other)
    ref.edit(other, force=True)
    assert fake.refs["refs/heads/feature"] == other
    edits = [r for r in gh.requests if r.method == "PATCH"]
    assert [r.body for r in edits] == [{"sha": other}, {"sha": other, "force": True}]


def test_pull_request_lists_are_paginated_with_link_headers(gh: FakeGitHub) -> None:
    repo = client(gh).get_repo("acme/kernels")
    main = repo.get_branch("main").commit.sha
    for number in range(35):
        repo.create_git_ref(f"refs/heads/b{number}", main)
        repo.create_pull(base="main", head=f"b{number}", title=f"pull {number}", body="")
    pulls = list(repo.get_pulls(state="open"))
    assert len(pulls) == 35 and len({p.number for p in pulls}) == 35
    pages = [r.query.get("page") for r in gh.requests if r.method == "GET" and r.path.endswith("/pulls")]
    assert pages == [None, "2"]
    assert [p.number for p in repo.get_pulls(state="open", head="acme:b7")] == [8]
