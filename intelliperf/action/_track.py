"""The Action's `mode: track`: each job's kernel times against the base branch (the service's
``/v1/jobs/{id}/tracking``) into the step summary, and, on a pull request, into a comment and a check run.

The comment is one per workflow job and pull request: a hidden marker names the job, and a later push
edits that comment instead of adding another (the check run is per commit, so each push gets its own).

A comment or check run that cannot be posted is a warning, never a failed step: the measurement is done
and recorded by the service whatever GitHub answers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from intelliperf.action._inputs import GithubContext

__all__ = [
    "CHECK_NAME",
    "Tracked",
    "comment_marker",
    "post_to_pull_request",
    "pull_request_number",
    "tracked",
]

CHECK_NAME = "IntelliPerf kernel times"
COMMENTS_PER_PAGE = 100
MAX_COMMENT_PAGES = 30  # 3,000 comments: past that a new comment is posted rather than searching on


@dataclass(frozen=True)
class Tracked:
    """The jobs' comparisons, together."""

    base_branch: str
    comment: str  # Markdown: one section per job
    moved: int
    slower: int


def tracked(trackings: list[dict[str, Any]], names: list[str]) -> Tracked:
    sections, moved, slower = [], 0, 0
    for tracking, name in zip(trackings, names, strict=True):
        moves = [m for m in tracking.get("moves", []) if m.get("moved")]
        moved += len(moves)
        slower += sum(1 for m in moves if m.get("change", 0) > 0)
        heading = f"### {name}\n\n" if len(names) > 1 else ""
        missing = tracking.get("not_compared") or {}
        note = "".join(f"\n- `{kernel}`: {why}" for kernel, why in missing.items())
        sections.append(heading + tracking.get("comment", "") + (f"\n\nNot compared:{note}" if note else ""))
    base = trackings[0].get("base_branch", "main") if trackings else "main"
    title = f"## IntelliPerf: kernel times against {base}"
    return Tracked(base, "\n\n".join([title, *sections]), moved, slower)


def pull_request_number(event_path: str | None) -> int | None:
    """The pull request's number from the event payload, or None (not a pull request event)."""
    if not event_path:
        return None
    try:
        event = json.loads(Path(event_path).read_text())
    except (OSError, ValueError):
        return None
    number = (event.get("pull_request") or {}).get("number") if isinstance(event, dict) else None
    return number if isinstance(number, int) and number > 0 else None


def post_to_pull_request(github: GithubContext, token: str, number: int, result: Tracked) -> list[str]:
    """The comment on pull request ``number`` and a check run on its head commit; what was posted (URLs
    or ids). Raises httpx.HTTPError (a status error carries GitHub's answer)."""
    if not github.repository or not github.sha:
        raise httpx.RequestError("GITHUB_REPOSITORY and GITHUB_SHA are needed to post to the pull request")
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
    }
    posted = []
    marker = comment_marker(github.job)
    body = f"{result.comment}\n\n{marker}"
    with httpx.Client(base_url=github.api_url, headers=headers, timeout=30) as client:
        comments = f"/repos/{github.repository}/issues/{number}/comments"
        earlier = _marked_comment(client, comments, marker)
        if earlier is None:
            comment = client.post(comments, json={"body": body})
        else:
            comment = client.patch(
                f"/repos/{github.repository}/issues/comments/{earlier}", json={"body": body}
            )
        comment.raise_for_status()
        url = str(comment.json().get("html_url") or f"comment {comment.json().get('id')}")
        posted.append(url if earlier is None else f"{url} (updated)")
        summary = (
            f"{result.slower} kernel(s) slower, {result.moved - result.slower} faster"
            if result.moved
            else "no kernel moved beyond the noise"
        )
        check = client.post(
            f"/repos/{github.repository}/check-runs",
            json={
                "name": CHECK_NAME,
                "head_sha": github.sha,
                "status": "completed",
                "conclusion": "neutral" if result.slower else "success",
                "output": {"title": summary, "summary": result.comment[:65_000]},
            },
        )
        check.raise_for_status()
        posted.append(f"check run {check.json().get('id')}")
    return posted


def comment_marker(job: str | None) -> str:
    """The hidden line that marks the comment of workflow job ``job`` (GITHUB_JOB)."""
    return f"<!-- intelliperf:track job={job or ''} -->"


def _marked_comment(client: httpx.Client, path: str, marker: str) -> int | None:
    """The id of the pull request's comment that carries ``marker`` (the last, if several), or None;
    GitHub's pages followed by their ``Link: rel="next"``."""
    found = None
    url: str | None = path
    params: dict[str, int] | None = {"per_page": COMMENTS_PER_PAGE}
    for _ in range(MAX_COMMENT_PAGES):
        if url is None:
            break
        answer = client.get(url, params=params)
        answer.raise_for_status()
        for comment in answer.json():
            if marker in str(comment.get("body") or "") and isinstance(comment.get("id"), int):
                found = comment["id"]
        url, params = answer.links.get("next", {}).get("url"), None
    return found
