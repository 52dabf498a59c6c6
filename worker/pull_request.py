"""The pull request for a job's best rewrite, opened (or updated) through GitHub's REST API with PyGithub.

From a report with a best result and the job's spec:

- branch ``intelliperf/<formula>/<kernel>-<job id, 8 chars>`` (the kernel's demangled base name,
  sanitized for git refs);
- one commit on top of the job's base commit holding the rewritten files: the report's diff applied to
  those files as they are at that commit, fetched through the API (git blobs; file modes kept);
- title ``[IntelliPerf] <kernel>: <bottleneck>, <speedup>x faster``, body ``render_summary(report)``,
  labels and draft flag from ``spec.pull_request``, base ``spec.pull_request.base_branch`` or the
  repository's default branch.

An open pull request whose head branch starts with ``intelliperf/<formula>/<kernel>-`` is updated
instead of opening another: its branch moves (forced) to the new commit, its title and body are edited.

Why the files come from the API and not from the job's checkout: the checkout is a scratch folder gone
by the time the job is recorded, archive jobs have none, and the API gives exactly the tree of the
commit the job names, which is also the new commit's parent, so the diff applies to what GitHub holds.
A job that names only a branch (no commit) is resolved when the pull request is written: if the branch
moved since the job ran and the diff no longer applies, the error says so.

With the job's reproducer (accordo.reproducer: the captured launch, both kernels, reproducer.json), a second
branch ``<branch>-reproducer`` gets one more commit on top of the rewrite adding those files under
``.intelliperf/reproducer/``, and the body says how to run it (``intelliperf replay``). A reproducer over
``REPRODUCER_LIMIT`` bytes is not pushed; the body says so.

Any failure raises `PullRequestError`, whose message says what was being done and what GitHub answered,
and never holds the token.
"""

from __future__ import annotations

import base64
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intelliperf.contract import JobSpec
from intelliperf.contract.report import Report
from intelliperf.repository_hosts import repository_name as parse_repository_name
from intelliperf.summary import render_summary
from worker.reproducer_archive import reproducer_paths

if TYPE_CHECKING:
    from github.Repository import Repository

__all__ = [
    "DEFAULT_API_URL",
    "DiffError",
    "GitHubTarget",
    "PullRequestError",
    "PullRequestResult",
    "apply_diff",
    "branch_prefix",
    "kernel_base_name",
    "open_pull_request",
    "pull_request_title",
    "repository_name",
]

DEFAULT_API_URL = "https://api.github.com"
MAX_KERNEL_CHARS = 60
MAX_RATE_LIMIT_WAIT_S = 300
REPRODUCER_LIMIT = 25 << 20  # bytes of reproducer files pushed with a pull request
REPRODUCER_PATH = ".intelliperf/reproducer"
PR_BODY_LIMIT = 65_000
"""GitHub refuses bodies over 65,536 characters; render_summary already cuts long diffs."""


class PullRequestError(RuntimeError):
    """The pull request could not be opened or updated; the message says why (never the token)."""


class DiffError(ValueError):
    """The report's diff does not apply to the files at the base commit."""


@dataclass(frozen=True)
class GitHubTarget:
    """Where and how to reach GitHub. ``retries=0`` and ``throttle=False`` are for tests against a
    local server; production keeps PyGithub's pacing (GitHub asks for a second between writes) and
    retries transient errors (5xx, secondary rate limits) a few times with backoff."""

    token: str = field(repr=False)
    api_url: str = DEFAULT_API_URL
    retries: int = 3
    throttle: bool = True
    timeout_s: float = 30.0


@dataclass(frozen=True)
class PullRequestResult:
    url: str
    number: int
    branch: str
    commit: str
    updated: bool
    """True: an open pull request of an earlier run was updated; False: a new one was opened."""

    @property
    def verb(self) -> str:
        return "updated" if self.updated else "opened"


# --- names --------------------------------------------------------------------------------------


def _strip_group(text: str, close: str, open_: str) -> str:
    """``text`` without its trailing balanced group (``(...)`` or ``<...>``), when it ends with one."""
    if not text.endswith(close):
        return text
    depth = 0
    for index in range(len(text) - 1, -1, -1):
        if text[index] == close:
            depth += 1
        elif text[index] == open_:
            depth -= 1
            if depth == 0:
                return text[:index].rstrip()
    return text


def kernel_base_name(demangled: str) -> str:
    """``transpose_tiled`` from ``void ns::transpose_tiled<float, 32>(float const*, int)``; a mangled
    Itanium name (``_Z15transpose_tiledPKfPfii``) gives its first name component."""
    name = demangled.strip()
    mangled = re.match(r"_Z(?:N\d*[A-Z]*)?(\d+)", name)
    if mangled and name.startswith("_Z"):
        start = mangled.end()
        return name[start : start + int(mangled[1])] or name
    for suffix in (" const", " volatile", " &", " &&"):
        name = name.removesuffix(suffix)
    name = _strip_group(name, ")", "(")
    name = _strip_group(name, ">", "<")
    name = name.rsplit(" ", 1)[-1]
    return name.rsplit("::", 1)[-1] or demangled


def _ref_component(text: str, fallback: str) -> str:
    """A piece of a git ref name: letters, digits, ``_``, ``.`` and ``-`` only, no ``..``, no leading
    dot or dash, not ending in ``.lock`` or a dot."""
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)
    clean = re.sub(r"\.{2,}", ".", clean)
    clean = re.sub(r"-{2,}", "-", clean)[:MAX_KERNEL_CHARS]
    clean = clean.strip(".-").removesuffix(".lock").rstrip(".-")
    return clean or fallback


def _target(report: Report) -> tuple[str, str]:
    """(formula, mangled kernel) the rewrite is for."""
    if report.selected is not None:
        return report.selected.formula, report.selected.kernel
    opt = report.optimization
    if opt is not None and opt.formula and opt.kernel:
        return opt.formula, opt.kernel
    raise PullRequestError("the report names no selected kernel and formula")


def _demangled(report: Report, kernel: str) -> str:
    return next((k.demangled for k in report.kernels if k.name == kernel), kernel)


def branch_prefix(report: Report) -> str:
    """``intelliperf/<formula>/<kernel>-``: what every run's branch for this kernel starts with."""
    formula, kernel = _target(report)
    base = kernel_base_name(_demangled(report, kernel))
    return f"intelliperf/{_ref_component(formula, 'formula')}/{_ref_component(base, 'kernel')}-"


def _speedup_text(median: float) -> str:
    if median >= 100:
        return f"{median:,.0f}x"
    if median >= 10:
        return f"{median:.1f}x"
    return f"{median:.2f}x"


def _bottleneck(formula: str) -> str:
    try:
        from formulas.registry import get

        return get(formula).title
    except Exception:
        return formula


def pull_request_title(report: Report) -> str:
    if report.best is None:
        raise PullRequestError("the report has no best result to propose")
    formula, kernel = _target(report)
    base = kernel_base_name(_demangled(report, kernel))
    return f"[IntelliPerf] {base}: {_bottleneck(formula)}, {_speedup_text(report.best.speedup.median)} faster"


def repository_name(url: str) -> str:
    """``owner/name`` from a clone URL (intelliperf.repository_hosts.repository_name), or why not."""
    name = parse_repository_name(url)
    if name is None:
        raise PullRequestError(f"cannot tell the GitHub repository from {url!r}")
    return name


# --- applying the diff ---------------------------------------------------------------------------


def _lines(text: str) -> list[str]:
    """Lines with their endings, split on "\\n" only (a lone "\\r" stays inside its line)."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


@dataclass
class _FilePatch:
    old: str | None
    new: str | None
    hunks: list[tuple[int, list[str], list[str]]] = field(default_factory=list)


def _diff_path(header: str) -> str | None:
    name = header.split("\t", 1)[0].rstrip("\n").strip()
    if name == "/dev/null":
        return None
    return name[2:] if name.startswith(("a/", "b/")) else name


def _parse_diff(diff: str) -> list[_FilePatch]:
    lines = _lines(diff)
    patches: list[_FilePatch] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not (line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")):
            i += 1
            continue
        patch = _FilePatch(_diff_path(line[4:]), _diff_path(lines[i + 1][4:]))
        patches.append(patch)
        i += 2
        while i < len(lines) and lines[i].startswith("@@"):
            head = re.match(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", lines[i])
            if head is None:
                raise DiffError(f"bad hunk header: {lines[i].rstrip()}")
            old_left = int(head[2]) if head[2] is not None else 1
            new_left = int(head[4]) if head[4] is not None else 1
            start = int(head[1])
            old: list[str] = []
            new: list[str] = []
            last = " "
            i += 1
            while i < len(lines) and (old_left > 0 or new_left > 0 or lines[i].startswith("\\")):
                text = lines[i]
                tag, body = text[:1], text[1:]
                if tag == "\\":
                    for side in (old, new) if last == " " else ((old,) if last == "-" else (new,)):
                        side[-1] = side[-1].removesuffix("\n")
                elif tag in (" ", "\n"):
                    body = body if tag == " " else "\n"
                    old.append(body)
                    new.append(body)
                    old_left, new_left = old_left - 1, new_left - 1
                elif tag == "-":
                    old.append(body)
                    old_left -= 1
                elif tag == "+":
                    new.append(body)
                    new_left -= 1
                else:
                    raise DiffError(f"unexpected line in a hunk: {text.rstrip()}")
                last = tag if tag != "\n" else " "
                i += 1
            patch.hunks.append((start, old, new))
    return patches


def _apply_hunks(path: str, text: str, hunks: list[tuple[int, list[str], list[str]]]) -> str:
    lines = _lines(text)
    out: list[str] = []
    position = 0
    for start, old, new in hunks:
        expected = max(start - 1, 0) if old else start
        nearby = sorted(range(position, len(lines) - len(old) + 1), key=lambda at, e=expected: abs(at - e))
        candidates = [expected, *nearby]
        at = next((c for c in candidates if c >= position and lines[c : c + len(old)] == old), None)
        if at is None:
            raise DiffError(f"{path}: a hunk at line {start} does not match the file at the base commit")
        out += lines[position:at] + new
        position = at + len(old)
    return "".join(out + lines[position:])


def apply_diff(diff: str, files: dict[str, str | None]) -> dict[str, str | None]:
    """The files a unified diff changes, after it: path -> new text (None: deleted). ``files`` holds
    each path's text before (None: absent). A hunk must match exactly, at its line or moved (git
    apply's offset, no fuzz)."""
    result: dict[str, str | None] = {}
    for patch in _parse_diff(diff):
        path = patch.new or patch.old
        if path is None:
            raise DiffError("a diff section names no file")
        before = files.get(patch.old) if patch.old is not None else None
        if patch.old is not None and before is None:
            raise DiffError(f"{patch.old}: not in the repository at the base commit")
        if patch.old is None and files.get(path) is not None:
            raise DiffError(f"{path}: the diff creates it, but it exists at the base commit")
        after = _apply_hunks(path, before or "", patch.hunks)
        result[path] = None if patch.new is None else after
        if patch.old is not None and patch.new is not None and patch.old != patch.new:
            result[patch.old] = None
    if not result:
        raise DiffError("the diff changes no file")
    return result


def _diff_paths(diff: str) -> list[str]:
    return sorted({p for patch in _parse_diff(diff) for p in (patch.old, patch.new) if p is not None})


def _repo_path(project_directory: str, relative: str) -> str:
    path = posixpath.normpath(posixpath.join(project_directory, relative))
    if path.startswith(("/", "../")) or path == "..":
        raise PullRequestError(f"{relative!r} leaves the repository")
    return path


# --- GitHub --------------------------------------------------------------------------------------


def _client(target: GitHubTarget) -> Any:
    from github import Auth, Github, GithubRetry

    throttle: dict[str, Any] = {}
    if not target.throttle:
        throttle = {"seconds_between_requests": None, "seconds_between_writes": None}
    retry = None
    if target.retries > 0:
        # 5xx and rate limits, with backoff; never wait longer than MAX_RATE_LIMIT_WAIT_S for a reset
        retry = GithubRetry(
            total=target.retries, backoff_factor=1.0, max_rate_limit_wait=MAX_RATE_LIMIT_WAIT_S
        )
    return Github(
        base_url=target.api_url.rstrip("/"),
        auth=Auth.Token(target.token),
        timeout=int(target.timeout_s),
        retry=retry,
        **throttle,
    )


def _redact(text: str, token: str) -> str:
    return text.replace(token, "***") if token else text


def _github_error(exc: Exception, doing: str, token: str) -> PullRequestError:
    from github import GithubException

    if isinstance(exc, GithubException):
        data = exc.data if isinstance(exc.data, dict) else {}
        message = str(data.get("message") or exc.message or "no message")
        details = [
            str(e.get("message") or f"{e.get('field', '?')} {e.get('code', '?')}")
            for e in data.get("errors") or []
            if isinstance(e, dict)
        ]
        if details:
            message += f" ({'; '.join(details)})"
        hint = (
            " (is the token valid and allowed to write to this repository?)"
            if exc.status in (401, 403)
            else ""
        )
        text = f"GitHub answered {exc.status} while {doing}: {message}{hint}"
    else:
        text = f"could not reach GitHub while {doing}: {type(exc).__name__}: {exc}"
    return PullRequestError(_redact(text, token))


class _Writer:
    def __init__(self, repo: Repository, token: str) -> None:
        self.repo = repo
        self.token = token
        self.doing = "reading the repository"

    def files_at(self, commit_sha: str, tree_sha: str, paths: list[str]) -> dict[str, tuple[str, str | None]]:
        """path -> (mode, text or None when absent) at the base commit."""
        self.doing = "reading the files at the base commit"
        tree = self.repo.get_git_tree(tree_sha, recursive=True)
        entries = {e.path: e for e in tree.tree if e.type == "blob"}
        found: dict[str, tuple[str, str | None]] = {}
        for path in paths:
            entry = entries.get(path)
            if entry is not None:
                raw = base64.b64decode(self.repo.get_git_blob(entry.sha).content)
                found[path] = (entry.mode, raw.decode("utf-8", errors="surrogateescape"))
            elif tree.truncated:
                found[path] = ("100644", self._content(path, commit_sha))
            else:
                found[path] = ("100644", None)
        return found

    def _content(self, path: str, commit_sha: str) -> str | None:
        from github import GithubException

        try:
            content = self.repo.get_contents(path, ref=commit_sha)
        except GithubException as exc:
            if exc.status == 404:
                return None
            raise
        if isinstance(content, list):
            raise PullRequestError(f"{path} is a folder in the repository")
        return content.decoded_content.decode("utf-8", errors="surrogateescape")

    def commit(
        self, base_sha: str, base_tree: str, changes: dict[str, tuple[str, str | bytes | None]], message: str
    ) -> str:
        from github import InputGitTreeElement

        self.doing = "writing the commit"
        elements = []
        for path, (mode, content) in sorted(changes.items()):
            if content is None:
                elements.append(InputGitTreeElement(path, mode, "blob", sha=None))
                continue
            raw = content if isinstance(content, bytes) else content.encode("utf-8", errors="surrogateescape")
            blob = self.repo.create_git_blob(base64.b64encode(raw).decode(), "base64")
            elements.append(InputGitTreeElement(path, mode, "blob", sha=blob.sha))
        tree = self.repo.create_git_tree(elements, base_tree=self.repo.get_git_tree(base_tree))
        parent = self.repo.get_git_commit(base_sha)
        return str(self.repo.create_git_commit(message, tree, [parent]).sha)

    def open_pull(self, prefix: str) -> Any | None:
        """The open pull request of an earlier run on this kernel and formula (newest first)."""
        self.doing = "looking for an open IntelliPerf pull request"
        for pull in self.repo.get_pulls(state="open", sort="created", direction="desc"):
            head_repo = pull.head.repo
            same_repo = head_repo is None or head_repo.full_name == self.repo.full_name
            if same_repo and pull.head.ref.startswith(prefix):
                return pull
        return None

    def move_branch(self, branch: str, sha: str) -> None:
        from github import GithubException

        self.doing = f"creating the branch {branch}"
        try:
            self.repo.create_git_ref(f"refs/heads/{branch}", sha)
        except GithubException as exc:
            # A retried job: its branch exists from the earlier try. Move it.
            if exc.status != 422 or "already exists" not in str(exc.data):
                raise
            self.doing = f"moving the branch {branch}"
            self.repo.get_git_ref(f"heads/{branch}").edit(sha, force=True)


def _reproducer_files(folder: Path | None) -> tuple[dict[str, bytes], str | None]:
    """The reproducer's files to push, or none with why (None: there is no reproducer)."""
    paths = reproducer_paths(folder)
    if paths is None:
        return {}, None
    size = sum(p.stat().st_size for p in paths)
    if size > REPRODUCER_LIMIT:
        return {}, (
            f"the reproducer ({size / 2**20:.1f} MiB) is over the {REPRODUCER_LIMIT >> 20} MiB a pull "
            "request carries"
        )
    return {p.name: p.read_bytes() for p in paths}, None


def _why_no_reproducer(report: Report) -> str:
    """Why the best attempt left no reproducer: the judge's skipped replay or timing check, if it says."""
    best = report.best_attempt
    checks = best.validation.checks if best is not None and best.validation is not None else []
    for check in checks:
        if check.name in ("replay", "timing_agreement") and check.outcome == "skipped" and check.detail:
            return f"the judge could not replay the kernels ({check.detail})"
    return "the job's outputs hold no reproducer"


def reproducer_section(
    html_url: str | None, branch: str | None, skipped: str | None, download_url: str | None = None
) -> str:
    """The body's paragraph about the reproducer: where it is and the command that runs it."""
    download = (
        "Download it from IntelliPerf (with an IntelliPerf token that may read the job) and run it:\n\n"
        f'```\ncurl -fL -H "Authorization: Bearer $INTELLIPERF_TOKEN" -o reproducer.tar.gz {download_url}\n'
        "tar -xzf reproducer.tar.gz && intelliperf replay reproducer\n```"
    )
    if branch is None:
        if not skipped:
            return ""
        text = f"### Reproducer\n\nNot attached: {skipped}."
        return f"{text} {download}" if download_url else text
    where = f"[`{branch}`]({html_url}/tree/{branch}/{REPRODUCER_PATH})" if html_url else f"`{branch}`"
    section = (
        "### Reproducer\n\n"
        f"The timed launch, captured with both kernels, is on the branch {where}. Check and time it with no "
        "application on any NVIDIA GPU of the same architecture:\n\n"
        f"```\ngit fetch origin {branch} && git checkout FETCH_HEAD -- {REPRODUCER_PATH}\n"
        f"intelliperf replay {REPRODUCER_PATH}\n```"
    )
    return f"{section}\n\nIt is also kept with the job: {download_url}" if download_url else section


def open_pull_request(
    report: Report,
    spec: JobSpec,
    job_id: str,
    target: GitHubTarget,
    reproducer: Path | None = None,
    *,
    download_url: str | None = None,
) -> PullRequestResult:
    """Open a pull request with the report's best rewrite, or update this kernel's open one; with the job's
    ``reproducer`` folder, push it on a branch of its own and say so in the body. ``download_url``: where
    the service keeps the reproducer, named in the body (the one place of one too large to push)."""
    if report.best is None or not report.diff:
        raise PullRequestError("the report has no validated rewrite (best result and diff) to propose")
    if spec.repository is None:
        raise PullRequestError("the job names no repository to open the pull request in")
    title = _redact(pull_request_title(report), target.token)
    note = f"{spec.pull_request.note}\n\n" if spec.pull_request.note else ""
    summary = _redact(note + render_summary(report), target.token)
    files, skipped = _reproducer_files(reproducer)
    if not files and skipped is None:
        skipped = _why_no_reproducer(report)
    prefix = branch_prefix(report)
    branch = f"{prefix}{_ref_component(job_id[:8], 'job')}"
    full_name = repository_name(spec.repository.url)
    relative = _diff_paths(report.diff)
    paths = {rel: _repo_path(spec.project_directory, rel) for rel in relative}

    from github import GithubException
    from requests.exceptions import RequestException

    client = _client(target)
    writer: _Writer | None = None
    try:
        repo = client.get_repo(full_name)
        writer = _Writer(repo, target.token)
        base_branch = spec.pull_request.base_branch or repo.default_branch
        writer.doing = "finding the job's base commit"
        base = repo.get_commit(spec.repository.commit or spec.repository.ref)
        base_sha, base_tree = base.sha, base.commit.tree.sha
        before = writer.files_at(base_sha, base_tree, sorted(paths.values()))
        try:
            after = apply_diff(report.diff, {rel: before[paths[rel]][1] for rel in relative})
        except DiffError as exc:
            raise PullRequestError(f"the rewrite does not apply at {base_sha[:12]}: {exc}") from None
        changes = {paths[rel]: (before[paths[rel]][0], text) for rel, text in after.items()}
        message = _commit_message(report, title, job_id)
        commit_sha = writer.commit(base_sha, base_tree, changes, message)

        existing = writer.open_pull(prefix)
        head = existing.head.ref if existing is not None else branch
        pushed = None
        if files:
            pushed = f"{head}-reproducer"
            added = {f"{REPRODUCER_PATH}/{name}": ("100644", data) for name, data in files.items()}
            tree = repo.get_git_commit(commit_sha).tree.sha
            with_files = writer.commit(
                commit_sha, tree, added, f"IntelliPerf reproducer\n\nIntelliPerf-Job: {job_id}\n"
            )
            writer.move_branch(pushed, with_files)
        section = reproducer_section(getattr(repo, "html_url", None), pushed, skipped, download_url)
        tail = "\n\n" + section if section else ""
        body = summary[: PR_BODY_LIMIT - len(tail)] + tail
        if existing is not None:
            writer.doing = f"moving the branch {existing.head.ref}"
            repo.get_git_ref(f"heads/{existing.head.ref}").edit(commit_sha, force=True)
            writer.doing = f"editing pull request #{existing.number}"
            existing.edit(title=title, body=body)
            pull, updated, branch = existing, True, existing.head.ref
        else:
            writer.move_branch(branch, commit_sha)
            writer.doing = f"opening the pull request from {branch} into {base_branch}"
            pull = repo.create_pull(
                base=base_branch, head=branch, title=title, body=body, draft=spec.pull_request.draft
            )
            updated = False
        if spec.pull_request.labels:
            writer.doing = f"labelling pull request #{pull.number}"
            pull.add_to_labels(*spec.pull_request.labels)
        return PullRequestResult(str(pull.html_url), int(pull.number), branch, commit_sha, updated)
    except (GithubException, RequestException) as exc:
        doing = writer.doing if writer is not None else f"opening the repository {full_name}"
        raise _github_error(exc, doing, target.token) from None
    finally:
        client.close()


def _commit_message(report: Report, title: str, job_id: str) -> str:
    assert report.best is not None
    best = report.best
    speedup = best.speedup
    lines = [
        title.removeprefix("[IntelliPerf] "),
        "",
        f"Speedup {speedup.median:.2f}x (95% interval {speedup.low:.2f}x to {speedup.high:.2f}x, "
        f"{speedup.runs} runs each); {best.metric_name}: {best.metric_before:g} -> {best.metric_after:g}.",
        "Validated by Accordo against the original kernel's outputs.",
        "",
        f"IntelliPerf-Job: {job_id}",
    ]
    return "\n".join(lines) + "\n"
