"""Pull requests from recorded GPU success reports, through the real PyGithub client, against a GitHub
REST API server on 127.0.0.1 (tests.support.fake_github)."""

from __future__ import annotations

import json
import subprocess
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest

from intelliperf.contract import JobSpec, Report
from intelliperf.edits import unified_diff
from intelliperf.summary import render_summary
from tests.support.fake_github import FakeGitHub, FakeRepository
from worker.pull_request import (
    DiffError,
    GitHubTarget,
    PullRequestError,
    apply_diff,
    kernel_base_name,
    open_pull_request,
    pull_request_title,
    repository_name,
)

ROOT = Path(__file__).resolve().parents[2]
LOOP = ROOT / "benchmarks" / "results" / "loop"
TOKEN = "ghp_sEcReT0123456789abcdefTOKEN"
REPO = "acme/kernels"
JOB_A = "a1b2c3d4e5f60718293a4b5c6d7e8f90"
JOB_B = "0f9e8d7c6b5a49382716afbecd012345"

# a recorded report from before reproducers: the body says none came with the job
NO_REPRODUCER = "\n\n### Reproducer\n\nNot attached: the job's outputs hold no reproducer."


def recorded(name: str) -> Report:
    """A real loop report from the GPU run (benchmarks/results/loop or tests/fixtures/loop)."""
    path = (
        ROOT / "tests" / "fixtures" / "loop" / "report.json"
        if name == "fixture"
        else LOOP / name / "report.json"
    )
    return Report.model_validate_json(path.read_text())


def example_files(*examples: str) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {"README.md": "# kernels\n"}
    for example in examples:
        for path in sorted((ROOT / "examples" / example).iterdir()):
            if path.is_file():
                files[f"examples/{example}/{path.name}"] = path.read_bytes()
    return files


def spec_for(repo: FakeRepository, example: str, **pull_request: object) -> JobSpec:
    return JobSpec.model_validate(
        {
            "repository": {
                "url": f"https://github.example.com/{REPO}.git",
                "commit": repo.refs[f"refs/heads/{repo.default_branch}"],
            },
            "project_directory": f"examples/{example}",
            "applications": [{"command": "./bin/app"}],
            "pull_request": {"create_pr": True, **pull_request},
        }
    )


def target(gh: FakeGitHub, token: str = TOKEN) -> GitHubTarget:
    return GitHubTarget(token, gh.api_url, retries=0, throttle=False)


def git_apply(original: bytes, diff: str, name: str, tmp_path: Path) -> bytes:
    """The independent oracle: git's own patch application."""
    work = tmp_path / "oracle"
    work.mkdir(exist_ok=True)
    (work / name).write_bytes(original)
    (work / "change.diff").write_text(diff)
    subprocess.run(["git", "apply", "change.diff"], cwd=work, check=True, capture_output=True, timeout=30)
    return (work / name).read_bytes()


@pytest.fixture(params=[True, False], ids=["enterprise", "github.com"])
def github(request: pytest.FixtureRequest) -> Iterator[FakeGitHub]:
    with FakeGitHub(token=TOKEN, enterprise=request.param) as gh:
        yield gh


@pytest.fixture
def enterprise() -> Iterator[FakeGitHub]:
    with FakeGitHub(token=TOKEN, enterprise=True) as gh:
        yield gh


def test_a_recorded_success_opens_one_pull_request_with_one_commit(
    github: FakeGitHub, tmp_path: Path
) -> None:
    report = recorded("transpose_bank")
    repo = github.add_repository(
        REPO, example_files("transpose_bank", "strided_copy"), default_branch="trunk"
    )
    base = repo.refs["refs/heads/trunk"]
    spec = spec_for(repo, "transpose_bank", labels=["intelliperf", "perf: gpu"], draft=True)

    result = open_pull_request(report, spec, JOB_A, target(github))

    branch = "intelliperf/bankConflict/transpose_tiled-a1b2c3d4"
    assert (result.branch, result.number, result.updated) == (branch, 1, False)
    assert result.url == f"{github.root}/{REPO}/pull/1"
    assert github.api_url.endswith("/api/v3") == (github.prefix == "/api/v3")
    # one commit on the job's base commit, changing exactly the rewritten file
    head = repo.refs[f"refs/heads/{branch}"]
    assert head == result.commit
    assert repo.commits[head]["parents"] == [base]
    before, after = repo.files_at(base), repo.files_at(head)
    changed = {path for path in before.keys() | after.keys() if before.get(path) != after.get(path)}
    assert changed == {"examples/transpose_bank/transpose.cu"}
    path = "examples/transpose_bank/transpose.cu"
    assert report.diff is not None
    assert after[path] == git_apply(before[path], report.diff, "transpose.cu", tmp_path)
    assert b"__shared__ float tile[kTile][kTile + 1];" in after[path]
    assert after[path] == (ROOT / "examples" / "transpose_bank" / "transpose_fixed.cu").read_bytes()
    # the pull request
    [pull] = github.pulls(REPO)
    speedup = report.best.speedup if report.best else None
    assert speedup is not None
    times = f"{speedup.median:.2f}x"
    assert pull["title"] == f"[IntelliPerf] transpose_tiled: Shared-memory bank conflicts, {times} faster"
    assert pull["title"] == pull_request_title(report)
    assert pull["body"] == render_summary(report) + NO_REPRODUCER
    assert f"**{times}**" in pull["body"] and f"{speedup.low:.2f}x to {speedup.high:.2f}x" in pull["body"]
    assert "tile[threadIdx.x][threadIdx.y + j];  // intelliperf: bankConflict" in pull["body"]  # hot line
    assert "transpose.cu:59" in pull["body"]
    assert [label["name"] for label in pull["labels"]] == ["intelliperf", "perf: gpu"]
    assert pull["draft"] is True
    assert (pull["head"]["ref"], pull["base"]["ref"]) == (branch, "trunk")
    assert pull["head"]["sha"] == head
    assert "IntelliPerf-Job: " + JOB_A in repo.commits[head]["message"]
    # every request was authorized, and the token went in no request's body or query
    assert github.requests and all(r.authorized for r in github.requests)
    for recorded_request in github.requests:
        assert TOKEN not in recorded_request.raw_body
        assert TOKEN not in json.dumps(recorded_request.query)
    assert TOKEN not in pull["body"] and TOKEN not in repo.commits[head]["message"]


def test_a_second_run_on_the_same_kernel_updates_its_open_pull_request(enterprise: FakeGitHub) -> None:
    first, second = recorded("transpose_bank"), recorded("fixture")  # two GPU runs, same kernel and formula
    repo = enterprise.add_repository(REPO, example_files("transpose_bank"))
    spec = spec_for(repo, "transpose_bank")
    opened = open_pull_request(first, spec, JOB_A, target(enterprise))
    writes_before = len(enterprise.writes())

    updated = open_pull_request(second, spec, JOB_B, target(enterprise))

    assert updated.updated and not opened.updated
    assert (updated.number, updated.url, updated.branch) == (opened.number, opened.url, opened.branch)
    [pull] = enterprise.pulls(REPO)
    assert pull["head"]["sha"] == updated.commit != opened.commit
    assert repo.commits[updated.commit]["parents"] == [repo.refs["refs/heads/main"]]
    assert "IntelliPerf-Job: " + JOB_B in repo.commits[updated.commit]["message"]
    assert pull["body"] == render_summary(second) + NO_REPRODUCER != render_summary(first) + NO_REPRODUCER
    assert "**1.69x**" in pull["body"]
    assert pull["title"] == "[IntelliPerf] transpose_tiled: Shared-memory bank conflicts, 1.69x faster"
    second_writes = [(r.method, r.path) for r in enterprise.writes()[writes_before:]]
    assert ("POST", f"/repos/{REPO}/pulls") not in second_writes
    assert ("PATCH", f"/repos/{REPO}/git/refs/heads/{opened.branch}") in second_writes
    patch = next(
        r for r in enterprise.writes()[writes_before:] if r.method == "PATCH" and "/git/refs/" in r.path
    )
    assert patch.body == {"sha": updated.commit, "force": True}
    assert not any(ref.endswith(JOB_B[:8]) for ref in repo.refs)  # no second branch


def test_a_closed_pull_request_is_left_alone_and_another_kernel_gets_its_own(enterprise: FakeGitHub) -> None:
    repo = enterprise.add_repository(REPO, example_files("transpose_bank", "strided_copy"))
    first = open_pull_request(
        recorded("transpose_bank"), spec_for(repo, "transpose_bank"), JOB_A, target(enterprise)
    )
    repo.pulls[0].state = "closed"
    again = open_pull_request(
        recorded("fixture"), spec_for(repo, "transpose_bank"), JOB_B, target(enterprise)
    )
    other = open_pull_request(
        recorded("strided_copy"), spec_for(repo, "strided_copy"), JOB_B, target(enterprise)
    )

    assert not again.updated and again.number != first.number
    assert again.branch == "intelliperf/bankConflict/transpose_tiled-0f9e8d7c"
    assert not other.updated and other.branch == "intelliperf/memoryAccess/copy_elements-0f9e8d7c"
    assert [p["number"] for p in enterprise.pulls(REPO)] == [1, 2, 3]
    title = enterprise.pulls(REPO)[2]["title"]
    best = recorded("strided_copy").best
    assert best is not None and best.speedup is not None
    faster = f"{best.speedup.median:.2f}x faster"
    assert title == f"[IntelliPerf] copy_elements: Uncoalesced global memory access, {faster}"


@pytest.mark.parametrize(
    ("status", "method", "path", "doing"),
    [
        (422, "POST", r"/pulls$", "opening the pull request"),
        (500, "POST", r"/git/commits$", "writing the commit"),
        (500, "GET", r"/pulls$", "looking for an open IntelliPerf pull request"),
    ],
)
def test_github_errors_are_clear_and_never_hold_the_token(
    enterprise: FakeGitHub, status: int, method: str, path: str, doing: str
) -> None:
    repo = enterprise.add_repository(REPO, example_files("transpose_bank"))
    enterprise.fail(status, method, path, f"scripted failure {status}")
    with pytest.raises(PullRequestError) as caught:
        open_pull_request(
            recorded("transpose_bank"), spec_for(repo, "transpose_bank"), JOB_A, target(enterprise)
        )
    message = str(caught.value)
    assert message.startswith(f"GitHub answered {status} while {doing}")
    assert f"scripted failure {status}" in message
    everything = "".join(traceback.format_exception(caught.value)) + repr(caught.value)
    assert TOKEN not in everything


def test_a_bad_token_is_refused_with_a_hint(enterprise: FakeGitHub) -> None:
    repo = enterprise.add_repository(REPO, example_files("transpose_bank"))
    wrong = "ghp_wrong_token_value_42"
    with pytest.raises(PullRequestError, match=r"401.*Bad credentials.*token valid") as caught:
        open_pull_request(
            recorded("transpose_bank"), spec_for(repo, "transpose_bank"), JOB_A, target(enterprise, wrong)
        )
    assert wrong not in str(caught.value)
    assert not enterprise.pulls(REPO)


def test_a_rewrite_that_no_longer_applies_is_a_clear_error(enterprise: FakeGitHub) -> None:
    files = example_files("transpose_bank")
    path = "examples/transpose_bank/transpose.cu"
    source = (ROOT / "examples" / "transpose_bank" / "transpose.cu").read_text()
    files[path] = source.replace(
        "__shared__ float tile[kTile][kTile];", "__shared__ float tile[kTile][kTile + 2];"
    )
    repo = enterprise.add_repository(REPO, files)
    with pytest.raises(
        PullRequestError, match=r"does not apply at [0-9a-f]{12}: transpose.cu: a hunk at line 41"
    ):
        open_pull_request(
            recorded("transpose_bank"), spec_for(repo, "transpose_bank"), JOB_A, target(enterprise)
        )
    assert not any(r.method == "POST" for r in enterprise.requests)


def test_a_report_without_a_rewrite_opens_nothing(enterprise: FakeGitHub) -> None:
    repo = enterprise.add_repository(REPO, example_files("scatter_atomic"))
    report = recorded("scatter_atomic")  # a control: no bottleneck, so no rewrite
    assert report.best is None
    with pytest.raises(PullRequestError, match="no validated rewrite"):
        open_pull_request(report, spec_for(repo, "scatter_atomic"), JOB_A, target(enterprise))
    assert not enterprise.requests


# --- the pieces ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "base"),
    [
        ("transpose_tiled(float const*, float*, int, int)", "transpose_tiled"),
        ("void ns::detail::reduce<float, 256>(float const*, float*, int)", "reduce"),
        ("void scan<(int)4, Op<float> >(float*)", "scan"),
        ("_Z15transpose_tiledPKfPfii", "transpose_tiled"),
        ("histogram_bins", "histogram_bins"),
    ],
)
def test_kernel_base_name(name: str, base: str) -> None:
    assert kernel_base_name(name) == base


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("https://github.com/acme/kernels.git", "acme/kernels"),
        ("https://ghe.corp.example/api-team/kernels", "api-team/kernels"),
        ("git@github.com:acme/kernels.git", "acme/kernels"),
    ],
)
def test_repository_name(url: str, name: str) -> None:
    assert repository_name(url) == name


def test_titles_format_the_speedup_for_reading() -> None:
    assert pull_request_title(recorded("histogram_atomic")).endswith("Atomic contention, 87.5x faster")
    assert pull_request_title(recorded("atomic_reduction")).endswith("Atomic contention, 948x faster")
    assert pull_request_title(recorded("reduction_bank")).endswith("1.29x faster")


def test_apply_diff_round_trips_the_loops_own_diffs() -> None:
    old = "".join(f"line {i}\n" for i in range(1, 40))
    new = old.replace("line 3\n", "line three\n").replace("line 30\n", "line 30\nadded\n")
    crlf_old, crlf_new = "a\r\nb\r\nc\r\n", "a\r\nB\r\nc\r\n"
    changes = {
        "k.cu": (old, new),
        "win.cu": (crlf_old, crlf_new),
        "tail.cu": ("x\ny", "x\nz"),
        "new.cu": ("", "n\n"),
    }
    diff = unified_diff(changes)
    files: dict[str, str | None] = {"k.cu": old, "win.cu": crlf_old, "tail.cu": "x\ny"}
    assert apply_diff(diff, files) == {path: after for path, (_, after) in changes.items()}
    # lines added above the hunks: they apply moved (git apply's offset)
    assert apply_diff(unified_diff({"k.cu": (old, new)}), {"k.cu": "header\n" * 7 + old}) == {
        "k.cu": "header\n" * 7 + new
    }
    with pytest.raises(DiffError, match=r"k\.cu: a hunk at line"):
        apply_diff(diff, {**files, "k.cu": old.replace("line 4\n", "line four\n")})
    with pytest.raises(DiffError, match="not in the repository"):
        apply_diff(diff, {**files, "k.cu": None})


def test_production_retries_ride_out_a_transient_500(enterprise: FakeGitHub) -> None:
    repo = enterprise.add_repository(REPO, example_files("transpose_bank"))
    enterprise.fail(502, "POST", r"/git/trees$", "bad gateway")
    retrying = GitHubTarget(TOKEN, enterprise.api_url, retries=2, throttle=False)
    result = open_pull_request(recorded("transpose_bank"), spec_for(repo, "transpose_bank"), JOB_A, retrying)
    assert result.number == 1
    assert [r.path for r in enterprise.requests if r.method == "POST"].count(f"/repos/{REPO}/git/trees") == 2


def test_a_note_opens_the_pull_requests_body(enterprise: FakeGitHub) -> None:
    """A fix job the service opened for a regression names the commit that made the kernel slower."""
    report = recorded("transpose_bank")
    repo = enterprise.add_repository(REPO, example_files("transpose_bank"))
    note = "`transpose_tiled` got 25% slower at commit abc1234 on main; this proposes a fix."
    open_pull_request(report, spec_for(repo, "transpose_bank", note=note), JOB_A, target(enterprise))
    [pull] = enterprise.pulls(REPO)
    assert pull["body"] == f"{note}\n\n{render_summary(report)}{NO_REPRODUCER}"


@pytest.mark.parametrize(
    "url", ["https://github.com/kernels", "https://github.com/acme/ker nels", "/tmp/../x"]
)
def test_a_url_without_owner_and_name_is_refused_as_the_service_refuses_it(url: str) -> None:
    """One parser (intelliperf.repository_hosts) for the service's records and the worker's pull requests."""
    from intelliperf.repository_hosts import repository_name as shared

    assert shared(url) is None
    with pytest.raises(PullRequestError, match="cannot tell the GitHub repository"):
        repository_name(url)


def test_a_reproducer_is_attached_up_to_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from worker import pull_request

    folder = tmp_path / "reproducer"
    folder.mkdir()
    for name, size in (("reference.bin", 300), ("candidate.bin", 200), ("reproducer.json", 24)):
        (folder / name).write_bytes(b"x" * size)
    monkeypatch.setattr(pull_request, "REPRODUCER_LIMIT", 524)
    files, skipped = pull_request._reproducer_files(folder)
    assert sorted(files) == ["candidate.bin", "reference.bin", "reproducer.json"] and skipped is None
    monkeypatch.setattr(pull_request, "REPRODUCER_LIMIT", 523)
    files, skipped = pull_request._reproducer_files(folder)
    assert files == {} and skipped is not None and "a pull request carries" in skipped
    (folder / "candidate.bin").unlink()
    assert pull_request._reproducer_files(folder) == ({}, None)  # not a whole reproducer: none
