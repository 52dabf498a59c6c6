"""A GitHub REST API (v3) server on 127.0.0.1 with in-memory repositories, for tests of the pull request
writer: the real PyGithub client talks real HTTP to it.

    with FakeGitHub(token="ghp-test", enterprise=True) as gh:
        repo = gh.add_repository("acme/kernels", {"src/k.cu": "..."})
        client = Github(base_url=gh.api_url, auth=Auth.Token("ghp-test"), retry=None, ...)
        ...
        gh.requests                      # every request: method, path, query, body
        gh.pulls("acme/kernels")         # the pull requests it holds
        gh.fail(422, "POST", "/pulls")   # the next matching request gets that error

It speaks the subset PyGithub uses to branch, commit and open or update a pull request: the repository,
branches, git refs (get, list, create, update with ``force``, delete), blobs, trees (``base_tree``,
nested paths, deletions, ``recursive``), commits (git and repository), contents (GET and PUT), pulls
(list with state/head/base filters and Link pagination, create, get, edit) and issue labels. Git object
ids are real SHA-1s of git's object encoding. Every request needs ``Authorization: token <token>`` (or
``Bearer``); anything else gets 401. ``enterprise=True`` serves under ``/api/v3`` like GitHub Enterprise.
Links in the answers (``url``, ``html_url``, ``issue_url``) point back at this server.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeGitHub", "FakeRepository", "RecordedRequest"]

USER = {"login": "intelliperf-bot", "id": 1, "type": "Bot"}
FILE_MODE = "100644"


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    """Path without the API prefix (``/repos/acme/kernels/pulls``), unquoted."""
    query: dict[str, str]
    body: Any
    raw_body: str
    authorized: bool


@dataclass
class _Failure:
    status: int
    method: str
    path_pattern: str
    message: str
    times: int


class _ApiError(Exception):
    def __init__(self, status: int, message: str, errors: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.payload: dict[str, Any] = {
            "message": message,
            "documentation_url": "https://docs.github.com/rest",
        }
        if errors:
            self.payload["errors"] = errors


def _git_sha(kind: str, data: bytes) -> str:
    return hashlib.sha1(f"{kind} {len(data)}\0".encode() + data).hexdigest()


@dataclass
class _Pull:
    number: int
    title: str
    body: str | None
    head: str
    base: str
    draft: bool
    state: str = "open"
    labels: list[str] = field(default_factory=list)
    created_at: str = ""


@dataclass
class FakeRepository:
    """One repository's git objects, refs and pull requests."""

    owner: str
    name: str
    default_branch: str = "main"
    blobs: dict[str, bytes] = field(default_factory=dict)
    trees: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    commits: dict[str, dict[str, Any]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    pulls: list[_Pull] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    comments: list[dict[str, Any]] = field(default_factory=list)  # issue comments, on pull requests here
    check_runs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    # --- git objects --------------------------------------------------------------------------

    def put_blob(self, data: bytes) -> str:
        sha = _git_sha("blob", data)
        self.blobs[sha] = data
        return sha

    def _put_tree(self, entries: list[dict[str, str]]) -> str:
        ordered = sorted(entries, key=lambda e: e["path"] + ("/" if e["type"] == "tree" else ""))
        raw = b"".join(
            f"{'40000' if e['type'] == 'tree' else e['mode']} {e['path']}\0".encode()
            + bytes.fromhex(e["sha"])
            for e in ordered
        )
        sha = _git_sha("tree", raw)
        self.trees[sha] = ordered
        return sha

    def flatten(self, tree_sha: str, prefix: str = "") -> dict[str, tuple[str, str]]:
        """path -> (mode, blob sha) of every file under a tree."""
        files: dict[str, tuple[str, str]] = {}
        for entry in self.trees[tree_sha]:
            path = prefix + entry["path"]
            if entry["type"] == "tree":
                files |= self.flatten(entry["sha"], path + "/")
            else:
                files[path] = (entry["mode"], entry["sha"])
        return files

    def build_tree(self, files: dict[str, tuple[str, str]]) -> str:
        """A nested tree holding ``files`` (path -> (mode, blob sha)); returns the root's sha."""
        here: list[dict[str, str]] = []
        folders: dict[str, dict[str, tuple[str, str]]] = {}
        for path, (mode, sha) in files.items():
            head, _, rest = path.partition("/")
            if rest:
                folders.setdefault(head, {})[rest] = (mode, sha)
            else:
                here.append({"path": head, "mode": mode, "type": "blob", "sha": sha})
        for name, inner in folders.items():
            here.append({"path": name, "mode": "040000", "type": "tree", "sha": self.build_tree(inner)})
        return self._put_tree(here)

    def put_commit(self, message: str, tree: str, parents: list[str], date: str | None = None) -> str:
        when = date or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        stamp = int(time.mktime(time.strptime(when, "%Y-%m-%dT%H:%M:%SZ")))
        person = f"{USER['login']} <{USER['login']}@users.noreply.github.com> {stamp} +0000"
        raw = f"tree {tree}\n" + "".join(f"parent {p}\n" for p in parents)
        raw += f"author {person}\ncommitter {person}\n\n{message}"
        sha = _git_sha("commit", raw.encode())
        self.commits[sha] = {"message": message, "tree": tree, "parents": list(parents), "date": when}
        return sha

    # --- for tests ----------------------------------------------------------------------------

    def files_at(self, ref: str) -> dict[str, bytes]:
        """Every file of a commit (a sha or a branch name), path -> content."""
        sha = self.resolve(ref)
        if sha is None:
            raise KeyError(ref)
        return {path: self.blobs[blob] for path, (_, blob) in self.flatten(self.commits[sha]["tree"]).items()}

    def resolve(self, ref: str) -> str | None:
        """A commit sha from a full or abbreviated sha, a branch, a tag or a full ref name."""
        for name in (ref, f"refs/heads/{ref}", f"refs/tags/{ref}"):
            if name in self.refs:
                return self.refs[name]
        if re.fullmatch(r"[0-9a-f]{4,40}", ref):
            hits = [sha for sha in self.commits if sha.startswith(ref)]
            if len(hits) == 1:
                return hits[0]
        return None

    def commit_files(self, files: dict[str, str | bytes], message: str, branch: str | None = None) -> str:
        """A commit on ``branch`` (default: the default branch) setting ``files``; returns its sha."""
        branch = branch or self.default_branch
        parent = self.refs.get(f"refs/heads/{branch}")
        current = self.flatten(self.commits[parent]["tree"]) if parent else {}
        for path, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            current[path] = (FILE_MODE, self.put_blob(data))
        sha = self.put_commit(message, self.build_tree(current), [parent] if parent else [])
        self.refs[f"refs/heads/{branch}"] = sha
        return sha


class FakeGitHub:
    def __init__(self, *, token: str = "ghp-test-token", enterprise: bool = False) -> None:
        self.token = token
        self.prefix = "/api/v3" if enterprise else ""
        self.repositories: dict[str, FakeRepository] = {}
        self.requests: list[RecordedRequest] = []
        self._failures: list[_Failure] = []
        self._lock = threading.RLock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    # --- life cycle ---------------------------------------------------------------------------

    @property
    def root(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def api_url(self) -> str:
        """What to pass to ``Github(base_url=...)``."""
        return self.root + self.prefix

    @property
    def host(self) -> str:
        """``127.0.0.1:PORT``: the host of a job's ``https://HOST/owner/name.git`` repository URL that the
        service (``github_hosts``) and the worker (``worker_env``) accept as this server's."""
        return self.root.removeprefix("http://")

    @property
    def worker_env(self) -> dict[str, str]:
        """A worker's settings that open its pull requests here."""
        return {"INTELLIPERF_GITHUB_API_URL": self.api_url, "INTELLIPERF_GITHUB_HOSTS": self.host}

    def __enter__(self) -> FakeGitHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- set-up and inspection ----------------------------------------------------------------

    def add_repository(
        self, full_name: str, files: dict[str, str | bytes], *, default_branch: str = "main"
    ) -> FakeRepository:
        owner, name = full_name.split("/")
        repo = FakeRepository(owner, name, default_branch)
        repo.commit_files(files, "Initial commit")
        with self._lock:
            self.repositories[full_name] = repo
        return repo

    def fail(self, status: int, method: str, path_pattern: str, message: str = "", *, times: int = 1) -> None:
        """The next ``times`` requests whose method matches and whose path (without the API prefix)
        contains a match of the regex ``path_pattern`` are answered ``status`` with ``message``."""
        text = message or {422: "Validation Failed", 500: "Internal Server Error"}.get(status, "Error")
        with self._lock:
            self._failures.append(_Failure(status, method.upper(), path_pattern, text, times))

    def open_pull(self, full_name: str, head: str, *, base: str = "main", title: str | None = None) -> int:
        """Open a pull request of ``head`` into ``base`` through the REST API, as a person's client would;
        its number."""
        request = urllib.request.Request(
            f"{self.api_url}/repos/{full_name}/pulls",
            data=json.dumps({"title": title or head, "head": head, "base": base}).encode(),
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as created:  # an error status raises HTTPError
            assert created.status == 201, created.read()
            return int(json.loads(created.read())["number"])

    def pulls(self, full_name: str) -> list[dict[str, Any]]:
        repo = self.repositories[full_name]
        with self._lock:
            return [self._pull_json(repo, pull) for pull in repo.pulls]

    def writes(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method != "GET"]

    # --- JSON shapes --------------------------------------------------------------------------

    def _repo_url(self, repo: FakeRepository) -> str:
        return f"{self.api_url}/repos/{repo.full_name}"

    def _user(self) -> dict[str, Any]:
        return {
            **USER,
            "url": f"{self.api_url}/users/{USER['login']}",
            "html_url": f"{self.root}/{USER['login']}",
        }

    def _repo_json(self, repo: FakeRepository) -> dict[str, Any]:
        url = self._repo_url(repo)
        return {
            "id": abs(hash(repo.full_name)) % 10**8,
            "node_id": f"R_{repo.name}",
            "name": repo.name,
            "full_name": repo.full_name,
            "owner": {**self._user(), "login": repo.owner, "type": "Organization"},
            "private": False,
            "html_url": f"{self.root}/{repo.full_name}",
            "url": url,
            "git_url": f"{self.root}/{repo.full_name}.git",
            "clone_url": f"{self.root}/{repo.full_name}.git",
            "default_branch": repo.default_branch,
            "pulls_url": url + "/pulls{/number}",
            "issues_url": url + "/issues{/number}",
            "permissions": {"admin": False, "push": True, "pull": True},
        }

    def _commit_json(self, repo: FakeRepository, sha: str) -> dict[str, Any]:
        commit = repo.commits[sha]
        url = self._repo_url(repo)
        person = {
            "name": USER["login"],
            "email": f"{USER['login']}@users.noreply.github.com",
            "date": commit["date"],
        }
        return {
            "sha": sha,
            "node_id": f"C_{sha[:10]}",
            "url": f"{url}/git/commits/{sha}",
            "html_url": f"{self.root}/{repo.full_name}/commit/{sha}",
            "message": commit["message"],
            "tree": {"sha": commit["tree"], "url": f"{url}/git/trees/{commit['tree']}"},
            "parents": [{"sha": p, "url": f"{url}/git/commits/{p}"} for p in commit["parents"]],
            "author": person,
            "committer": person,
            "verification": {"verified": False, "reason": "unsigned"},
        }

    def _repo_commit_json(self, repo: FakeRepository, sha: str) -> dict[str, Any]:
        git = self._commit_json(repo, sha)
        url = self._repo_url(repo)
        return {
            "sha": sha,
            "node_id": git["node_id"],
            "url": f"{url}/commits/{sha}",
            "html_url": git["html_url"],
            "commit": {**git, "url": f"{url}/git/commits/{sha}", "comment_count": 0},
            "author": self._user(),
            "committer": self._user(),
            "parents": [{"sha": p, "url": f"{url}/commits/{p}"} for p in git["parents"]],
            "files": [],
        }

    def _ref_json(self, repo: FakeRepository, ref: str) -> dict[str, Any]:
        url = self._repo_url(repo)
        sha = repo.refs[ref]
        return {
            "ref": ref,
            "node_id": f"REF_{ref}",
            "url": f"{url}/git/{urllib.parse.quote(ref)}",
            "object": {"type": "commit", "sha": sha, "url": f"{url}/git/commits/{sha}"},
        }

    def _tree_json(self, repo: FakeRepository, sha: str, recursive: bool) -> dict[str, Any]:
        url = self._repo_url(repo)
        entries: list[dict[str, Any]] = []

        def walk(tree: str, prefix: str) -> None:
            for entry in repo.trees[tree]:
                kind = "blobs" if entry["type"] == "blob" else "trees"
                item: dict[str, Any] = {**entry, "path": prefix + entry["path"]}
                item["url"] = f"{url}/git/{kind}/{entry['sha']}"
                if entry["type"] == "blob":
                    item["size"] = len(repo.blobs[entry["sha"]])
                entries.append(item)
                if recursive and entry["type"] == "tree":
                    walk(entry["sha"], item["path"] + "/")

        walk(sha, "")
        return {"sha": sha, "url": f"{url}/git/trees/{sha}", "tree": entries, "truncated": False}

    def _label_json(self, repo: FakeRepository, name: str) -> dict[str, Any]:
        return {
            "id": repo.labels[name],
            "node_id": f"L_{repo.labels[name]}",
            "url": f"{self._repo_url(repo)}/labels/{urllib.parse.quote(name)}",
            "name": name,
            "color": "ededed",
            "default": False,
            "description": None,
        }

    def _branch_side(self, repo: FakeRepository, branch: str) -> dict[str, Any]:
        return {
            "label": f"{repo.owner}:{branch}",
            "ref": branch,
            "sha": repo.refs.get(f"refs/heads/{branch}", "0" * 40),
            "user": self._user(),
            "repo": self._repo_json(repo),
        }

    def _pull_json(self, repo: FakeRepository, pull: _Pull) -> dict[str, Any]:
        url = self._repo_url(repo)
        return {
            "url": f"{url}/pulls/{pull.number}",
            "id": 1000 + pull.number,
            "node_id": f"PR_{pull.number}",
            "html_url": f"{self.root}/{repo.full_name}/pull/{pull.number}",
            "diff_url": f"{self.root}/{repo.full_name}/pull/{pull.number}.diff",
            "issue_url": f"{url}/issues/{pull.number}",
            "number": pull.number,
            "state": pull.state,
            "locked": False,
            "title": pull.title,
            "body": pull.body,
            "user": self._user(),
            "labels": [self._label_json(repo, name) for name in pull.labels],
            "draft": pull.draft,
            "merged": False,
            "mergeable": True,
            "created_at": pull.created_at,
            "updated_at": pull.created_at,
            "head": self._branch_side(repo, pull.head),
            "base": self._branch_side(repo, pull.base),
        }

    def _branch_json(self, repo: FakeRepository, name: str) -> dict[str, Any]:
        sha = repo.refs[f"refs/heads/{name}"]
        return {
            "name": name,
            "commit": self._repo_commit_json(repo, sha),
            "protected": False,
            "_links": {
                "self": f"{self._repo_url(repo)}/branches/{name}",
                "html": f"{self.root}/{repo.full_name}",
            },
        }

    def _content_json(self, repo: FakeRepository, path: str, mode_sha: tuple[str, str]) -> dict[str, Any]:
        sha = mode_sha[1]
        data = repo.blobs[sha]
        url = self._repo_url(repo)
        return {
            "type": "file",
            "encoding": "base64",
            "size": len(data),
            "name": path.rsplit("/", 1)[-1],
            "path": path,
            "content": base64.encodebytes(data).decode(),
            "sha": sha,
            "url": f"{url}/contents/{urllib.parse.quote(path)}",
            "git_url": f"{url}/git/blobs/{sha}",
            "html_url": f"{self.root}/{repo.full_name}/blob/{path}",
        }

    # --- routes -------------------------------------------------------------------------------

    def _repo(self, owner: str, name: str) -> FakeRepository:
        repo = self.repositories.get(f"{owner}/{name}")
        if repo is None:
            raise _ApiError(404, "Not Found")
        return repo

    def _commit_sha(self, repo: FakeRepository, ref: str) -> str:
        sha = repo.resolve(ref)
        if sha is None:
            raise _ApiError(422, f"No commit found for SHA: {ref}")
        return sha

    def _route(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        match = re.fullmatch(r"/repos/([^/]+)/([^/]+)(/.*)?", path)
        if match is None:
            if path == "/user" and method == "GET":
                return 200, self._user()
            raise _ApiError(404, "Not Found")
        repo = self._repo(match[1], match[2])
        rest = match[3] or ""
        for pattern, handler in self._routes(method):
            hit = re.fullmatch(pattern, rest)
            if hit:
                return handler(repo, query, body, *hit.groups())
        raise _ApiError(404, "Not Found")

    def _routes(self, method: str) -> list[tuple[str, Any]]:
        table: dict[str, list[tuple[str, Any]]] = {
            "GET": [
                (r"", lambda repo, *_: (200, self._repo_json(repo))),
                (r"/branches", self._list_branches),
                (r"/branches/(.+)", self._get_branch),
                (r"/git/refs", self._list_refs),
                (r"/git/matching-refs/(.*)", self._matching_refs),
                (r"/git/refs?/(.+)", self._get_ref),
                (r"/git/blobs/([0-9a-f]{40})", self._get_blob),
                (r"/git/trees/([^/]+)", self._get_tree),
                (r"/git/commits/([0-9a-f]{40})", self._get_git_commit),
                (r"/commits/(.+)", self._get_commit),
                (r"/contents/?(.*)", self._get_contents),
                (r"/pulls", self._list_pulls),
                (r"/pulls/(\d+)", self._get_pull),
                (r"/issues/(\d+)/labels", self._get_labels),
                (r"/issues/(\d+)/comments", self._list_comments),
            ],
            "POST": [
                (r"/git/refs", self._create_ref),
                (r"/git/blobs", self._create_blob),
                (r"/git/trees", self._create_tree),
                (r"/git/commits", self._create_commit),
                (r"/pulls", self._create_pull),
                (r"/issues/(\d+)/labels", self._add_labels),
                (r"/issues/(\d+)/comments", self._add_comment),
                (r"/check-runs", self._create_check_run),
            ],
            "PATCH": [
                (r"/git/refs/(.+)", self._update_ref),
                (r"/pulls/(\d+)", self._edit_pull),
                (r"/issues/comments/(\d+)", self._edit_comment),
            ],
            "PUT": [(r"/contents/(.+)", self._put_contents)],
            "DELETE": [(r"/git/refs/(.+)", self._delete_ref)],
        }
        return table.get(method, [])

    def _list_branches(self, repo: FakeRepository, query: dict[str, str], _body: Any) -> tuple[int, Any]:
        names = sorted(ref.removeprefix("refs/heads/") for ref in repo.refs if ref.startswith("refs/heads/"))
        return 200, [
            {"name": n, "commit": {"sha": repo.refs[f"refs/heads/{n}"]}, "protected": False} for n in names
        ]

    def _get_branch(self, repo: FakeRepository, _q: dict[str, str], _b: Any, name: str) -> tuple[int, Any]:
        if f"refs/heads/{name}" not in repo.refs:
            raise _ApiError(404, "Branch not found")
        return 200, self._branch_json(repo, name)

    def _list_refs(self, repo: FakeRepository, *_: Any) -> tuple[int, Any]:
        return 200, [self._ref_json(repo, ref) for ref in sorted(repo.refs)]

    def _matching_refs(
        self, repo: FakeRepository, _q: dict[str, str], _b: Any, prefix: str
    ) -> tuple[int, Any]:
        return 200, [self._ref_json(repo, r) for r in sorted(repo.refs) if r.startswith(f"refs/{prefix}")]

    def _get_ref(self, repo: FakeRepository, _q: dict[str, str], _b: Any, ref: str) -> tuple[int, Any]:
        full = ref if ref.startswith("refs/") else f"refs/{ref}"
        if full not in repo.refs:
            raise _ApiError(404, "Not Found")
        return 200, self._ref_json(repo, full)

    def _create_ref(self, repo: FakeRepository, _q: dict[str, str], body: Any) -> tuple[int, Any]:
        ref, sha = body.get("ref", ""), body.get("sha", "")
        if not re.fullmatch(r"refs/[^/]+/.+", ref) or ".." in ref or ref.endswith((".lock", "/")):
            raise _ApiError(422, f"{ref} is not a valid ref name.")
        if ref in repo.refs:
            raise _ApiError(422, "Reference already exists")
        if sha not in repo.commits:
            raise _ApiError(422, "Object does not exist")
        repo.refs[ref] = sha
        return 201, self._ref_json(repo, ref)

    def _is_ancestor(self, repo: FakeRepository, old: str, new: str) -> bool:
        todo, seen = [new], set()
        while todo:
            sha = todo.pop()
            if sha == old:
                return True
            if sha not in seen and sha in repo.commits:
                seen.add(sha)
                todo.extend(repo.commits[sha]["parents"])
        return False

    def _update_ref(self, repo: FakeRepository, _q: dict[str, str], body: Any, ref: str) -> tuple[int, Any]:
        full = ref if ref.startswith("refs/") else f"refs/{ref}"
        if full not in repo.refs:
            raise _ApiError(422, "Reference does not exist")
        sha = body.get("sha", "")
        if sha not in repo.commits:
            raise _ApiError(422, "Object does not exist")
        if not body.get("force") and not self._is_ancestor(repo, repo.refs[full], sha):
            raise _ApiError(422, "Update is not a fast forward")
        repo.refs[full] = sha
        return 200, self._ref_json(repo, full)

    def _delete_ref(self, repo: FakeRepository, _q: dict[str, str], _b: Any, ref: str) -> tuple[int, Any]:
        full = ref if ref.startswith("refs/") else f"refs/{ref}"
        if repo.refs.pop(full, None) is None:
            raise _ApiError(422, "Reference does not exist")
        return 204, None

    def _get_blob(self, repo: FakeRepository, _q: dict[str, str], _b: Any, sha: str) -> tuple[int, Any]:
        if sha not in repo.blobs:
            raise _ApiError(404, "Not Found")
        data = repo.blobs[sha]
        url = f"{self._repo_url(repo)}/git/blobs/{sha}"
        content = base64.encodebytes(data).decode()
        return 200, {"sha": sha, "size": len(data), "url": url, "content": content, "encoding": "base64"}

    def _create_blob(self, repo: FakeRepository, _q: dict[str, str], body: Any) -> tuple[int, Any]:
        content, encoding = body.get("content"), body.get("encoding", "utf-8")
        if not isinstance(content, str) or encoding not in ("utf-8", "base64"):
            raise _ApiError(422, "Invalid request.")
        data = base64.b64decode(content) if encoding == "base64" else content.encode()
        sha = repo.put_blob(data)
        return 201, {"sha": sha, "url": f"{self._repo_url(repo)}/git/blobs/{sha}"}

    def _get_tree(self, repo: FakeRepository, query: dict[str, str], _b: Any, ref: str) -> tuple[int, Any]:
        sha = ref if ref in repo.trees else None
        if sha is None:
            commit = repo.resolve(ref)
            sha = repo.commits[commit]["tree"] if commit else None
        if sha is None:
            raise _ApiError(404, "Not Found")
        return 200, self._tree_json(repo, sha, query.get("recursive") not in (None, "", "0", "false"))

    def _create_tree(self, repo: FakeRepository, _q: dict[str, str], body: Any) -> tuple[int, Any]:
        base = body.get("base_tree")
        if base is not None and base not in repo.trees:
            raise _ApiError(422, "base_tree is not a valid tree")
        files = repo.flatten(base) if base else {}
        for entry in body.get("tree", []):
            path = entry.get("path", "")
            if not path or path.startswith("/") or ".." in path.split("/"):
                raise _ApiError(422, f"tree.path {path!r} is invalid")
            if entry.get("type", "blob") != "blob":
                raise _ApiError(422, "only blob entries are supported by this fake")
            content = entry.get("content")
            sha = repo.put_blob(str(content).encode()) if content is not None else entry.get("sha")
            if sha is None:
                files.pop(path, None)
                continue
            if sha not in repo.blobs:
                raise _ApiError(422, f"tree.sha {sha} is not a valid blob")
            files[path] = (entry.get("mode", FILE_MODE), sha)
        sha = repo.build_tree(files)
        return 201, self._tree_json(repo, sha, recursive=False)

    def _get_git_commit(self, repo: FakeRepository, _q: dict[str, str], _b: Any, sha: str) -> tuple[int, Any]:
        if sha not in repo.commits:
            raise _ApiError(404, "Not Found")
        return 200, self._commit_json(repo, sha)

    def _create_commit(self, repo: FakeRepository, _q: dict[str, str], body: Any) -> tuple[int, Any]:
        tree, parents = body.get("tree"), body.get("parents", [])
        if tree not in repo.trees:
            raise _ApiError(422, "Tree SHA does not exist")
        if any(p not in repo.commits for p in parents):
            raise _ApiError(422, "Parent SHA does not exist")
        sha = repo.put_commit(str(body.get("message", "")), tree, parents)
        return 201, self._commit_json(repo, sha)

    def _get_commit(self, repo: FakeRepository, _q: dict[str, str], _b: Any, ref: str) -> tuple[int, Any]:
        return 200, self._repo_commit_json(repo, self._commit_sha(repo, ref))

    def _get_contents(
        self, repo: FakeRepository, query: dict[str, str], _b: Any, path: str
    ) -> tuple[int, Any]:
        sha = self._commit_sha(repo, query.get("ref") or repo.default_branch)
        files = repo.flatten(repo.commits[sha]["tree"])
        path = path.strip("/")
        if path in files:
            return 200, self._content_json(repo, path, files[path])
        inside = {p: v for p, v in files.items() if p.startswith(path + "/") or not path}
        if not inside:
            raise _ApiError(404, "Not Found")
        listing, seen = [], set()
        for p, v in sorted(inside.items()):
            tail = p[len(path) + 1 :] if path else p
            name = tail.split("/")[0]
            if name in seen:
                continue
            seen.add(name)
            full = f"{path}/{name}" if path else name
            if "/" in tail:
                listing.append({"type": "dir", "name": name, "path": full, "sha": "", "url": ""})
            else:
                item = self._content_json(repo, full, v)
                listing.append({k: item[k] for k in ("type", "name", "path", "sha", "size", "url")})
        return 200, listing

    def _put_contents(
        self, repo: FakeRepository, _q: dict[str, str], body: Any, path: str
    ) -> tuple[int, Any]:
        branch = body.get("branch") or repo.default_branch
        ref = f"refs/heads/{branch}"
        parent = repo.refs.get(ref)
        if parent is None:
            raise _ApiError(404, f"Branch {branch} not found")
        files = repo.flatten(repo.commits[parent]["tree"])
        existed = path in files
        if existed and body.get("sha") != files[path][1]:
            raise _ApiError(409, f"{path} does not match {body.get('sha')}")
        blob = repo.put_blob(base64.b64decode(body.get("content", "")))
        files[path] = (files.get(path, (FILE_MODE, ""))[0], blob)
        sha = repo.put_commit(str(body.get("message", "")), repo.build_tree(files), [parent])
        repo.refs[ref] = sha
        return 200 if existed else 201, {
            "content": self._content_json(repo, path, files[path]),
            "commit": self._commit_json(repo, sha),
        }

    def _find_pull(self, repo: FakeRepository, number: str) -> _Pull:
        pull = next((p for p in repo.pulls if p.number == int(number)), None)
        if pull is None:
            raise _ApiError(404, "Not Found")
        return pull

    def _list_pulls(self, repo: FakeRepository, query: dict[str, str], _b: Any) -> tuple[int, Any]:
        state = query.get("state", "open")
        pulls = [p for p in repo.pulls if state == "all" or p.state == state]
        if "head" in query:
            head = query["head"]
            pulls = [p for p in pulls if (f"{repo.owner}:{p.head}" if ":" in head else p.head) == head]
        if "base" in query:
            pulls = [p for p in pulls if p.base == query["base"]]
        pulls.sort(key=lambda p: p.number, reverse=query.get("direction", "desc") == "desc")
        return 200, [self._pull_json(repo, p) for p in pulls]

    def _get_pull(self, repo: FakeRepository, _q: dict[str, str], _b: Any, number: str) -> tuple[int, Any]:
        return 200, self._pull_json(repo, self._find_pull(repo, number))

    def _create_pull(self, repo: FakeRepository, _q: dict[str, str], body: Any) -> tuple[int, Any]:
        head, base, title = body.get("head", ""), body.get("base", ""), body.get("title")
        head = head.split(":", 1)[1] if ":" in head else head
        errors = []
        if not title:
            errors.append({"resource": "PullRequest", "field": "title", "code": "missing_field"})
        if f"refs/heads/{head}" not in repo.refs:
            errors.append({"resource": "PullRequest", "field": "head", "code": "invalid"})
        if f"refs/heads/{base}" not in repo.refs:
            errors.append({"resource": "PullRequest", "field": "base", "code": "invalid"})
        if errors:
            raise _ApiError(422, "Validation Failed", errors)
        if any(p.head == head and p.base == base and p.state == "open" for p in repo.pulls):
            raise _ApiError(
                422,
                "Validation Failed",
                [
                    {
                        "resource": "PullRequest",
                        "code": "custom",
                        "message": f"A pull request already exists for {repo.owner}:{head}.",
                    }
                ],
            )
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        pull = _Pull(
            len(repo.pulls) + 1,
            title,
            body.get("body"),
            head,
            base,
            bool(body.get("draft")),
            created_at=created,
        )
        repo.pulls.append(pull)
        return 201, self._pull_json(repo, pull)

    def _edit_pull(self, repo: FakeRepository, _q: dict[str, str], body: Any, number: str) -> tuple[int, Any]:
        pull = self._find_pull(repo, number)
        if "title" in body:
            pull.title = body["title"]
        if "body" in body:
            pull.body = body["body"]
        if body.get("state") in ("open", "closed"):
            pull.state = body["state"]
        if "base" in body:
            if f"refs/heads/{body['base']}" not in repo.refs:
                raise _ApiError(
                    422,
                    "Validation Failed",
                    [{"resource": "PullRequest", "field": "base", "code": "invalid"}],
                )
            pull.base = body["base"]
        return 200, self._pull_json(repo, pull)

    def _get_labels(self, repo: FakeRepository, _q: dict[str, str], _b: Any, number: str) -> tuple[int, Any]:
        return 200, [self._label_json(repo, name) for name in self._find_pull(repo, number).labels]

    def _add_labels(
        self, repo: FakeRepository, _q: dict[str, str], body: Any, number: str
    ) -> tuple[int, Any]:
        pull = self._find_pull(repo, number)
        names = body.get("labels", []) if isinstance(body, dict) else body
        for name in names:
            repo.labels.setdefault(name, len(repo.labels) + 1)
            if name not in pull.labels:
                pull.labels.append(name)
        return 200, [self._label_json(repo, name) for name in pull.labels]

    def _add_comment(
        self, repo: FakeRepository, _q: dict[str, str], body: Any, number: str
    ) -> tuple[int, Any]:
        pull = self._find_pull(repo, number)
        text = body.get("body") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text:
            raise _ApiError(422, "Validation Failed", [{"resource": "IssueComment", "field": "body"}])
        comment_id = 5000 + len(repo.comments)
        comment = {
            "id": comment_id,
            "body": text,
            "user": self._user(),
            "issue_number": pull.number,
            "html_url": f"{self.root}/{repo.full_name}/pull/{pull.number}#issuecomment-{comment_id}",
        }
        repo.comments.append(comment)
        return 201, comment

    def _list_comments(
        self, repo: FakeRepository, _q: dict[str, str], _b: Any, number: str
    ) -> tuple[int, Any]:
        """Oldest first (``_paginate`` cuts the pages and links the next one, as GitHub does)."""
        pull = self._find_pull(repo, number)
        return 200, [c for c in repo.comments if c["issue_number"] == pull.number]

    def _edit_comment(
        self, repo: FakeRepository, _q: dict[str, str], body: Any, comment_id: str
    ) -> tuple[int, Any]:
        comment = next((c for c in repo.comments if c["id"] == int(comment_id)), None)
        if comment is None:
            raise _ApiError(404, "Not Found")
        text = body.get("body") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text:
            raise _ApiError(422, "Validation Failed", [{"resource": "IssueComment", "field": "body"}])
        comment["body"] = text
        return 200, comment

    def _create_check_run(self, repo: FakeRepository, _q: dict[str, str], body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or not body.get("name") or not body.get("head_sha"):
            raise _ApiError(422, "Validation Failed", [{"resource": "CheckRun", "field": "name/head_sha"}])
        if body.get("status") == "completed" and body.get("conclusion") not in (
            "success", "failure", "neutral", "cancelled", "skipped", "timed_out", "action_required",
        ):  # fmt: skip
            raise _ApiError(422, "Validation Failed", [{"resource": "CheckRun", "field": "conclusion"}])
        run = {**body, "id": 7000 + len(repo.check_runs)}
        repo.check_runs.append(run)
        return 201, run

    # --- HTTP ---------------------------------------------------------------------------------

    def _failure_for(self, method: str, path: str) -> _Failure | None:
        for failure in self._failures:
            if failure.times > 0 and failure.method == method and re.search(failure.path_pattern, path):
                failure.times -= 1
                return failure
        return None

    def _handle(
        self, method: str, raw_path: str, headers: Any, raw: bytes
    ) -> tuple[int, Any, dict[str, str]]:
        parsed = urllib.parse.urlsplit(raw_path)
        query = dict(urllib.parse.parse_qsl(parsed.query, keep_blank_values=True))
        path = urllib.parse.unquote(parsed.path)
        text = raw.decode("utf-8", errors="replace")
        try:
            body = json.loads(text) if text.strip() else None
        except ValueError:
            body = None
        auth = headers.get("Authorization") or ""
        authorized = auth in (f"token {self.token}", f"Bearer {self.token}")
        inside = path.startswith(self.prefix + "/") or path == self.prefix
        relative = path[len(self.prefix) :] if inside else path
        with self._lock:
            self.requests.append(RecordedRequest(method, relative, query, body, text, authorized))
            if not authorized:
                return (
                    401,
                    {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"},
                    {},
                )
            if not inside:
                return 404, {"message": "Not Found"}, {}
            failure = self._failure_for(method, relative)
            if failure is not None:
                return failure.status, {"message": failure.message}, {}
            try:
                status, payload = self._route(method, relative.rstrip("/") or "/", query, body or {})
            except _ApiError as exc:
                return exc.status, exc.payload, {}
        extra: dict[str, str] = {}
        if isinstance(payload, list):
            payload, extra = self._paginate(payload, parsed.path, query)
        return status, payload, extra

    def _paginate(
        self, items: list[Any], path: str, query: dict[str, str]
    ) -> tuple[list[Any], dict[str, str]]:
        per_page = max(1, min(100, int(query.get("per_page") or 30)))
        page = max(1, int(query.get("page") or 1))
        chunk = items[(page - 1) * per_page : page * per_page]
        if page * per_page >= len(items):
            return chunk, {}
        following = urllib.parse.urlencode({**query, "page": str(page + 1), "per_page": str(per_page)})
        return chunk, {"Link": f'<{self.root}{path}?{following}>; rel="next"'}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms stalls

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                status, payload, extra = server._handle(self.command, self.path, self.headers, raw)
                data = b"" if payload is None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("X-RateLimit-Limit", "5000")
                self.send_header("X-RateLimit-Remaining", "4999")
                for key, value in extra.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

        return Handler
