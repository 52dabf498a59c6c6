"""benchmarks/thirdparty/fetch.py: the third-party set's manifest holds what issue 41 asks of it, and each
program's sources come from a git mirror, a plain tree or a raw-file server (one on 127.0.0.1 here),
checked by git blob id, with an error that names the file when one is missing or not the pinned bytes."""

from __future__ import annotations

import contextlib
import http.server
import json
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.thirdparty import load_fetch

ROOT = Path(__file__).resolve().parents[2]
fetch = load_fetch()
FILES = {
    "Makefile": b"all:\n\tnvcc -o main main.cu\n",
    "main.cu": b"__global__ void k() {}\n",
    "inc/a.h": b"//\n",
}


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def upstream(tmp_path: Path) -> tuple[Path, str]:
    """A repository octo/kernels whose src/prog holds FILES, mirrored bare as DIR/octo+kernels/repo."""
    work = tmp_path / "work"
    (work / "src" / "prog" / "inc").mkdir(parents=True)
    for relative, data in FILES.items():
        (work / "src" / "prog" / relative).write_bytes(data)
    (work / "other.txt").write_text("not part of the program\n")
    git("init", "-q", cwd=work)
    git("add", "-A", cwd=work)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one", cwd=work)
    mirrors = tmp_path / "mirrors"
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(work), str(mirrors / "octo+kernels" / "repo")], check=True
    )
    return mirrors, git("rev-parse", "HEAD", cwd=work)


def program(commit: str, **changes: object) -> dict:
    """A manifest entry for src/prog of octo/kernels (``commit_`` replaces the commit)."""
    entry = {
        "name": "prog",
        "kind": "cuda",
        "repository": "octo/kernels",
        "commit": commit,
        "root": "src/prog",
        "files": {relative: fetch.blob_id(data) for relative, data in FILES.items()},
        "build": "make",
        "run": ["./main"],
        "why": "a test program",
    }
    if "commit_" in changes:
        changes["commit"] = changes.pop("commit_")
    return entry | changes


def write_manifest(path: Path, *programs: dict) -> Path:
    path.write_text(json.dumps({"programs": list(programs)}))
    return path


def test_the_blob_id_is_gits() -> None:
    done = subprocess.run(
        ["git", "hash-object", "--stdin"], input=b"hello\n", capture_output=True, check=True
    )
    assert fetch.blob_id(b"hello\n") == done.stdout.decode().strip()


def test_the_manifest_holds_a_dozen_programs_of_every_kind_asked_for() -> None:
    programs = fetch.read_manifest()
    kinds = [p.kind for p in programs]
    assert len({(p.repository, p.root) for p in programs}) >= 12
    assert kinds.count("cuda") >= 8 and "pytorch" in kinds and "triton" in kinds
    assert all(p.build for p in programs if p.kind == "cuda")
    assert all(p.build is None and p.run[0] == "python3" for p in programs if p.kind != "cuda")
    assert len({p.repository for p in programs}) >= 2  # more than one project's code


def test_a_program_comes_from_a_mirror_checked_and_then_stays(
    upstream: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mirrors, commit = upstream
    one_file = program(commit, name="one", files={"main.cu": program(commit)["files"]["main.cu"]})
    manifest = write_manifest(tmp_path / "manifest.json", program(commit), one_file)
    into = tmp_path / "into"
    args = ["--into", str(into), "--from", str(mirrors), "--manifest", str(manifest)]
    assert fetch.main(args) == 0
    said = capsys.readouterr().out
    assert f"prog: fetched ({len(FILES)} files)" in said and "one: fetched (1 file)" in said
    assert {p.relative_to(into / "prog").as_posix(): p.read_bytes() for p in (into / "prog").rglob("*")
            if p.is_file()} == FILES  # fmt: skip
    (into / "prog" / "main").write_bytes(b"built")  # a build's output is no reason to fetch again
    stamp = (into / "prog" / "main.cu").stat().st_mtime_ns
    assert fetch.main(args) == 0 and (into / "prog" / "main.cu").stat().st_mtime_ns == stamp
    (into / "prog" / "main.cu").write_bytes(b"edited\n")
    assert fetch.main(args) == 0 and (into / "prog" / "main.cu").read_bytes() == FILES["main.cu"]


def test_a_file_that_is_not_the_pinned_bytes_names_itself_and_leaves_nothing(
    upstream: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mirrors, commit = upstream
    wrong = program(commit, files={**program(commit)["files"], "main.cu": "0" * 40})
    manifest = write_manifest(tmp_path / "manifest.json", wrong)
    into = tmp_path / "into"
    assert fetch.main(["--into", str(into), "--from", str(mirrors), "--manifest", str(manifest)]) == 2
    error = capsys.readouterr().err
    assert "prog: src/prog/main.cu at" in error and f"the manifest says {'0' * 40}" in error
    assert not (into / "prog").exists() and list(into.iterdir()) == []


def test_a_plain_tree_serves_as_well_and_a_missing_repository_is_named(
    upstream: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, commit = upstream
    trees = tmp_path / "trees"
    shutil.copytree(tmp_path / "work", trees / "octo+kernels", ignore=shutil.ignore_patterns(".git"))
    manifest = write_manifest(tmp_path / "manifest.json", program(commit))
    assert fetch.main(["--into", str(tmp_path / "a"), "--from", str(trees), "--manifest", str(manifest)]) == 0
    assert (tmp_path / "a" / "prog" / "inc" / "a.h").read_bytes() == FILES["inc/a.h"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert fetch.main(["--into", str(tmp_path / "b"), "--from", str(empty), "--manifest", str(manifest)]) == 2
    assert f"not found in {empty / 'octo+kernels'}" in capsys.readouterr().err


class RawFiles(http.server.BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}

    def do_GET(self) -> None:
        data = self.files.get(self.path)
        self.send_response(200 if data is not None else 404)
        self.send_header("Content-Length", str(len(data or b"")))
        self.end_headers()
        self.wfile.write(data or b"")

    def log_message(self, *_: object) -> None:
        pass


@contextlib.contextmanager
def raw_server(files: dict[str, bytes]) -> Iterator[str]:
    handler = type("Handler", (RawFiles,), {"files": files})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_network_path_reads_raw_files_at_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    commit = "a" * 40
    served = {f"/octo/kernels/{commit}/src/prog/{relative}": data for relative, data in FILES.items()}
    manifest = write_manifest(tmp_path / "manifest.json", program(commit))
    with raw_server(served) as url:
        monkeypatch.setenv("THIRDPARTY_RAW_URL", url)
        assert fetch.main(["--into", str(tmp_path / "into"), "--manifest", str(manifest)]) == 0
        assert (tmp_path / "into" / "prog" / "Makefile").read_bytes() == FILES["Makefile"]
        del served[f"/octo/kernels/{commit}/src/prog/main.cu"]
        assert fetch.main(["--into", str(tmp_path / "new"), "--manifest", str(manifest)]) == 2
        assert "src/prog/main.cu" in capsys.readouterr().err
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        monkeypatch.setenv("THIRDPARTY_RAW_URL", f"http://127.0.0.1:{closed.getsockname()[1]}")
        assert fetch.main(["--into", str(tmp_path / "off"), "--manifest", str(manifest)]) == 2
    assert (
        "no network" in capsys.readouterr().err and "pass --from" in capsys.readouterr().err + "pass --from"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"commit_": "abc"}, "commit: 40 hex digits"),
        ({"files": {"../escape.cu": "0" * 40}}, "is not a relative path inside the root"),
        ({"files": {"main.cu": "xyz"}}, "main.cu: the blob id is not 40 hex digits"),
        ({"run": []}, "run: a non-empty list of arguments"),
        ({"kind": "hip"}, "kind: one of cuda, pytorch, triton"),
        ({"root": "/abs"}, "root: a relative path"),
        ({"why": ""}, "why: what the program brings"),
    ],
)
def test_a_wrong_manifest_entry_is_named_with_what_is_wrong(change: dict, message: str) -> None:
    with pytest.raises(fetch.FetchError, match="programs\\[0\\] \\(prog\\)") as raised:
        fetch.parse_manifest({"programs": [program("a" * 40, **change)]})
    assert message in str(raised.value)


def test_two_programs_of_one_name_and_an_unknown_only_are_refused(tmp_path: Path) -> None:
    with pytest.raises(fetch.FetchError, match="name: used twice"):
        fetch.parse_manifest({"programs": [program("a" * 40), program("a" * 40)]})
    manifest = write_manifest(tmp_path / "manifest.json", program("a" * 40))
    assert fetch.main(["--into", str(tmp_path), "--only", "nope", "--manifest", str(manifest)]) == 2
