"""The third-party benchmark set's sources, fetched by the manifest beside this script and checked file by
file against the git blob id the manifest gives, so every machine measures the same bytes.

The sources are other people's code and are not committed here. This script puts each program of
``manifest.json`` into ``INTO/<name>/`` (the files of its ``root`` folder at its ``commit``), from:

- ``--from DIR``: a folder holding, per repository ``owner/name``, ``DIR/owner+name/`` as a git
  directory (a bare clone or mirror; ``DIR/owner+name/repo`` too) or as a plain tree of the repository's
  files; for machines without network, such as the GPU machine (carry the ``INTO`` folder there);
- otherwise the network: ``https://raw.githubusercontent.com/<owner>/<name>/<commit>/<path>``
  (``THIRDPARTY_RAW_URL`` replaces the host part).

A program already in ``INTO`` with every file matching is left as it is. A file that is missing or does
not match its blob id is an error that names it; nothing half-written is left in ``INTO/<name>``.

    python benchmarks/thirdparty/fetch.py --into .thirdparty [--from /path/to/mirrors] [--only a,b]

Standard library only: it runs before anything is installed and on the GPU machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

MANIFEST = Path(__file__).resolve().with_name("manifest.json")
RAW_URL = "https://raw.githubusercontent.com"
KINDS = ("cuda", "pytorch", "triton")
HEX40 = re.compile(r"[0-9a-f]{40}")
NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")
REPOSITORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")


class FetchError(Exception):
    """A manifest or a source that cannot be used, with what and why."""


@dataclass(frozen=True)
class Program:
    name: str
    kind: str
    repository: str
    commit: str
    root: str
    files: dict[str, str]  # path under root -> git blob id
    build: str | None
    run: tuple[str, ...]
    why: str

    def repository_path(self, relative: str) -> str:
        return str(PurePosixPath(self.root) / relative) if self.root else relative


def blob_id(data: bytes) -> str:
    """Git's id of a file's content: sha1 over ``blob <length>\\0`` and the bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _safe_relative(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return bool(parts) and not PurePosixPath(path).is_absolute() and ".." not in parts


def parse_manifest(data: object) -> list[Program]:
    """The programs of a manifest, or FetchError naming the first entry that is wrong and how."""
    if not isinstance(data, dict) or not isinstance(data.get("programs"), list):
        raise FetchError('the manifest is an object with a "programs" list')
    programs, seen = [], set()
    for index, entry in enumerate(data["programs"]):
        where = f"programs[{index}]"
        if not isinstance(entry, dict):
            raise FetchError(f"{where}: not an object")
        where = f"{where} ({entry.get('name', '?')})"
        name, kind, repository = entry.get("name"), entry.get("kind"), entry.get("repository")
        commit, root, files = entry.get("commit"), entry.get("root", ""), entry.get("files")
        build, run, why = entry.get("build"), entry.get("run"), entry.get("why")
        problems = [
            (not isinstance(name, str) or not NAME.fullmatch(name), "name: lower case, digits, . _ -"),
            (name in seen, "name: used twice"),
            (kind not in KINDS, f"kind: one of {', '.join(KINDS)}"),
            (not isinstance(repository, str) or not REPOSITORY.fullmatch(repository), "repository: a/b"),
            (not isinstance(commit, str) or not HEX40.fullmatch(commit), "commit: 40 hex digits"),
            (not isinstance(root, str) or (root != "" and not _safe_relative(root)), "root: a relative path"),
            (not isinstance(files, dict) or not files, "files: a map of path to blob id"),
            (build is not None and not isinstance(build, str), "build: a shell line or null"),
            (
                not isinstance(run, list) or not run or not all(isinstance(a, str) and a for a in run),
                "run: a non-empty list of arguments",
            ),
            (not isinstance(why, str) or not why, "why: what the program brings to the set"),
        ]
        wrong = [message for bad, message in problems if bad]
        if not wrong:
            for path, blob in files.items():
                if not _safe_relative(path):
                    wrong.append(f"files: {path!r} is not a relative path inside the root")
                elif not isinstance(blob, str) or not HEX40.fullmatch(blob):
                    wrong.append(f"files: {path}: the blob id is not 40 hex digits")
        if wrong:
            raise FetchError(f"{where}: {'; '.join(wrong)}")
        seen.add(name)
        programs.append(Program(name, kind, repository, commit, root, dict(files), build, tuple(run), why))
    return programs


def read_manifest(path: Path = MANIFEST) -> list[Program]:
    try:
        return parse_manifest(json.loads(path.read_text()))
    except (OSError, ValueError) as err:
        raise FetchError(f"cannot read {path}: {err}") from None


class Source:
    """Where a repository's files come from: ``read(program, relative)`` gives a file's bytes or None."""

    def __init__(self, mirrors: Path | None, raw_url: str) -> None:
        self.mirrors = mirrors
        self.raw_url = raw_url.rstrip("/")

    def describe(self, program: Program) -> str:
        if self.mirrors is None:
            return f"{self.raw_url}/{program.repository}/{program.commit}/"
        return str(self._mirror(program))

    def _mirror(self, program: Program) -> Path:
        assert self.mirrors is not None
        return self.mirrors / program.repository.replace("/", "+")

    def read(self, program: Program, relative: str) -> bytes | None:
        if self.mirrors is None:
            return self._download(program, relative)
        folder = self._mirror(program)
        git_dir = next((d for d in (folder / "repo", folder) if (d / "objects").is_dir()), None)
        if git_dir is not None:
            done = subprocess.run(
                [
                    "git",
                    f"--git-dir={git_dir}",
                    "cat-file",
                    "blob",
                    f"{program.commit}:{program.repository_path(relative)}",
                ],
                capture_output=True,
                timeout=120,
            )
            return done.stdout if done.returncode == 0 else None
        path = folder / program.repository_path(relative)
        return path.read_bytes() if path.is_file() else None

    def _download(self, program: Program, relative: str) -> bytes | None:
        url = f"{self.raw_url}/{program.repository}/{program.commit}/{program.repository_path(relative)}"
        try:
            with urllib.request.urlopen(url, timeout=60) as answer:
                return answer.read()
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return None
            raise FetchError(f"{url}: HTTP {err.code}") from None
        except (urllib.error.URLError, OSError) as err:
            raise FetchError(f"{url}: no network ({err}); fetch elsewhere and pass --from") from None


def in_place(program: Program, target: Path) -> bool:
    """Whether ``target`` already holds exactly the program's files (extra files, such as builds, allowed)."""
    for relative, blob in program.files.items():
        path = target / relative
        if not path.is_file() or blob_id(path.read_bytes()) != blob:
            return False
    return True


def fetch(program: Program, source: Source, into: Path) -> bool:
    """``into/<name>`` holding the program's checked files; False when it already did."""
    target = into / program.name
    if target.is_dir() and in_place(program, target):
        return False
    into.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{program.name}-", dir=into) as scratch:
        staged = Path(scratch) / program.name
        for relative, blob in sorted(program.files.items()):
            data = source.read(program, relative)
            where = f"{program.name}: {program.repository_path(relative)} at {program.commit[:12]}"
            if data is None:
                raise FetchError(f"{where}: not found in {source.describe(program)}")
            if blob_id(data) != blob:
                raise FetchError(f"{where}: its content is blob {blob_id(data)}, the manifest says {blob}")
            path = staged / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        shutil.rmtree(target, ignore_errors=True)
        staged.rename(target)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--into", type=Path, required=True, help="where each program's folder goes")
    parser.add_argument("--from", dest="mirrors", type=Path, default=None, help="local mirrors or trees")
    parser.add_argument("--only", default=None, help="comma-separated program names")
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    args = parser.parse_args(argv)
    try:
        programs = read_manifest(args.manifest)
        if args.only:
            wanted = args.only.split(",")
            unknown = sorted(set(wanted) - {p.name for p in programs})
            if unknown:
                raise FetchError(f"not in the manifest: {', '.join(unknown)}")
            programs = [p for p in programs if p.name in wanted]
        source = Source(args.mirrors, os.environ.get("THIRDPARTY_RAW_URL", RAW_URL))
        for program in programs:
            fetched = fetch(program, source, args.into)
            state = "fetched" if fetched else "already in place"
            files = f"{len(program.files)} file{'' if len(program.files) == 1 else 's'}"
            print(f"thirdparty: {program.name}: {state} ({files})", flush=True)
    except FetchError as err:
        print(f"thirdparty: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
