"""`intelliperf submit`: run a job on an IntelliPerf service instead of this machine.

The project is packed as the GitHub Action packs it (the files git keeps, .gitignore respected), posted
with the job spec the options make (the same options as `intelliperf run`), and, unless told not to wait,
its events are followed live; then the report's table is printed, the report and summary written, and the
command exits with the job's code: 0 when it succeeded, the engine's own code when the engine failed
(5 the build, 6 the application, ...), 1 for another failure (time limit, worker lost, cancelled), 13 when
the service could not be reached or refused the job.

With ``--track`` the job measures and diagnoses only, names the project's git checkout (its ``origin``
remote, commit and branch) so the service files its kernels' times in their series, and the kernels that
moved against the base branch are printed after the report (``GET /v1/jobs/{id}/tracking``).

The service and its token come from the options, else the environment (INTELLIPERF_SERVICE_URL,
INTELLIPERF_TOKEN), else the config file (``service_config_path()``: a TOML file with a ``[service]``
table holding ``url`` and ``token``).
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import tarfile
import time
import tomllib
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from intelliperf.contract import JobSpec, RepositoryRef
from intelliperf.errors import OUTCOME_BY_EXIT_CODE, IntelliPerfError, SpecError, SubmitError

__all__ = [
    "DEFAULT_SERVICE_URL",
    "REPLAY_FOLDER",
    "Submission",
    "exit_code_of",
    "git_checkout",
    "llm_key",
    "pack_with_replay",
    "resolve_service",
    "service_config_path",
    "submit_job",
    "tracking_of",
]

DEFAULT_SERVICE_URL = "http://127.0.0.1:8000"
REPLAY_FOLDER = ".intelliperf-replay"
"""Where in the uploaded archive a ``--replay`` folder from outside the project goes."""
EXIT_OTHER_FAILURE = 1
_CODE_BY_OUTCOME = {outcome: code for code, outcome in OUTCOME_BY_EXIT_CODE.items()}


def service_config_path(environ: Mapping[str, str] = os.environ) -> Path:
    """The config file: $INTELLIPERF_CONFIG, else ``intelliperf/config.toml`` in the user's config folder."""
    if environ.get("INTELLIPERF_CONFIG"):
        return Path(environ["INTELLIPERF_CONFIG"])
    base = Path(environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "intelliperf" / "config.toml"


def resolve_service(
    url: str | None, token: str | None, environ: Mapping[str, str] = os.environ
) -> tuple[str, str]:
    """(url, token): each from the option, else the environment, else the config file; a missing token
    is a SpecError that says where it may come from."""
    config: dict[str, Any] = {}
    path = service_config_path(environ)
    if path.is_file():
        try:
            config = tomllib.loads(path.read_text()).get("service", {})
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise SpecError(f"the config file {path} cannot be read: {exc}") from None
    url = url or environ.get("INTELLIPERF_SERVICE_URL") or config.get("url") or DEFAULT_SERVICE_URL
    token = token or environ.get("INTELLIPERF_TOKEN") or config.get("token")
    if not token:
        raise SpecError(
            'no token for the service: give --token, set INTELLIPERF_TOKEN, or put token = "..." in the '
            f"[service] table of {path}",
            hint="`intelliperf tokens create` makes one; `intelliperf serve` prints where its admin token is",
        )
    return str(url), str(token)


def pack_with_replay(project: Path, replay: Path | None) -> tuple[bytes, str | None, int]:
    """The project as the Action packs it; with ``replay``, that recorded profile too: where it is inside
    the project, as it is; else copied into the archive at REPLAY_FOLDER. Returns (archive, the spec's
    replay folder relative to the project, files packed)."""
    from intelliperf.action._pack import PackError, pack_project

    try:
        packed = pack_project(project)
    except PackError as exc:
        raise SpecError(f"packing the project: {exc}") from None
    if replay is None:
        return packed.data, None, packed.files
    replay = replay.resolve()
    if not replay.is_dir():
        raise SpecError(f"--replay {replay}: no such folder")
    if replay.is_relative_to(project.resolve()):
        return packed.data, replay.relative_to(project.resolve()).as_posix(), packed.files
    return _appended(packed.data, replay), REPLAY_FOLDER, packed.files + sum(1 for _ in _files(replay))


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def _appended(archive: bytes, folder: Path) -> bytes:
    """``archive`` (a tar.gz) with the files of ``folder`` added under REPLAY_FOLDER."""
    members = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as old,
        tarfile.open(fileobj=members, mode="w:gz", format=tarfile.PAX_FORMAT) as new,
    ):
        for member in old:
            new.addfile(member, old.extractfile(member) if member.isfile() else None)
        for path in _files(folder):
            info = tarfile.TarInfo(f"{REPLAY_FOLDER}/{path.relative_to(folder).as_posix()}")
            info.size, info.mode = path.stat().st_size, 0o644
            with path.open("rb") as data:
                new.addfile(info, data)
    return members.getvalue()


def llm_key(spec: JobSpec, environ: Mapping[str, str] = os.environ) -> str | None:
    """The LLM key to send with a job that calls the LLM: from ``spec.llm.key_env``, else the provider's
    own variable (OPENAI_API_KEY, ...), as `intelliperf run` would read it; None for a diagnosis."""
    if not spec.optimizes:
        return None
    return next((environ[name] for name in spec.llm.key_variables if environ.get(name)), None)


def exit_code_of(job: Mapping[str, Any]) -> int:
    """The command's exit code for a finished job (the module's docstring says which)."""
    if job.get("status") == "succeeded":
        return 0
    return _CODE_BY_OUTCOME.get(str(job.get("outcome")), EXIT_OTHER_FAILURE)


def _git(project: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(project), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def https_clone_url(remote: str) -> str:
    """``git@host:owner/name.git`` as ``https://host/owner/name.git`` (the service takes https only)."""
    scp = re.fullmatch(r"[^@/:]+@([^:/]+):(.+)", remote)
    if scp:
        return f"https://{scp[1]}/{scp[2]}"
    return re.sub(r"^ssh://[^@/]+@([^/:]+)(?::\d+)?/", r"https://\1/", remote)


def git_checkout(project: Path) -> RepositoryRef:
    """The repository, commit and branch of the git checkout ``project`` is in; SpecError when it is none or
    has no ``origin`` remote."""
    remote = _git(project, "remote", "get-url", "origin")
    commit = _git(project, "rev-parse", "HEAD")
    if remote is None or commit is None:
        raise SpecError(
            f"--track files the job's kernel times under its repository and commit: {project} must be in a "
            "git checkout with a commit and an 'origin' remote"
        )
    branch = _git(project, "rev-parse", "--abbrev-ref", "HEAD")
    return RepositoryRef(
        url=https_clone_url(remote), ref=branch if branch and branch != "HEAD" else "main", commit=commit
    )


def tracking_of(url: str, token: str, job_id: str) -> dict[str, Any]:
    """The finished job's kernels against the base branch. Raises SubmitError."""
    from intelliperf.action._client import ServiceClient, ServiceError

    with ServiceClient(url, token) as client:
        try:
            return client.tracking(job_id)
        except ServiceError as exc:
            raise SubmitError(str(exc)) from None


@dataclass(frozen=True)
class Submission:
    job: dict[str, Any]
    report: dict[str, Any] | None
    followed: bool


def submit_job(
    spec: JobSpec,
    archive: bytes,
    *,
    url: str,
    token: str,
    secrets: Mapping[str, str],
    follow: bool,
    timeout_s: float,
    on_line: Callable[[str], None],
    priority: int | None = None,
    retry_wait_s: float = 1.0,
) -> Submission:
    """Post the job and, with ``follow``, pass its events to ``on_line`` until it ends (cancelling it when
    ``timeout_s`` passes or the user interrupts). Raises SubmitError when the service cannot be reached or
    refuses the job."""
    from intelliperf.action._client import ServiceClient, ServiceError
    from intelliperf.action._follow import TimedOut, follow_job

    with ServiceClient(url, token) as client:
        try:
            job, _ = client.submit(
                spec,
                archive=archive,
                secrets=dict(secrets),
                idempotency_key=f"submit-{uuid.uuid4().hex}",  # its own retries make one job
                priority=priority,
                retry_wait_s=retry_wait_s,
            )
            job_id = str(job["id"])
            on_line(f"job {job_id} submitted to {url}")
            if not follow:
                return Submission(job, None, followed=False)
            try:
                follow_job(
                    client, job_id, time.monotonic() + timeout_s, on_line=on_line, retry_wait_s=retry_wait_s
                )
            except (TimedOut, KeyboardInterrupt) as stop:
                client.cancel(job_id)
                why = "did not finish in time" if isinstance(stop, TimedOut) else "was interrupted"
                raise IntelliPerfError(f"job {job_id} {why}: it is cancelled") from None
            return Submission(client.job(job_id), client.report(job_id), followed=True)
        except ServiceError as exc:
            raise SubmitError(str(exc)) from None
