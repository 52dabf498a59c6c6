"""The engine in a container, through the Docker Engine API: the sandbox of issue 6.

``ContainerExecutor`` implements the ``Executor`` protocol of ``worker.executor``: the job's image (its
spec's ``container.image``, else the worker image) runs ``python -m worker.engine_main`` with the project
and output folders bind-mounted at their own paths (so the report names the same paths as the local
executor's), the worker's GPU attached, the spec's memory and CPU limits, and an environment holding
only what the engine needs. Its output comes back through ``parse_line`` as events; at the time limit or
on cancellation the container is stopped (SIGTERM through the container's init, SIGKILL after a grace),
and it is always removed afterwards. An engine that does not answer, or an image it does not have (images
are never pulled: a worker runs what its operator put there), raises ``ContainerError`` with the reason,
which the runner records as the job's error.

Network (``INTELLIPERF_CONTAINER_NETWORK``, default ``bridge``): the job runs the user's build and
application, so it must not reach the worker's own services on 127.0.0.1 (the database, the broker),
which ``host`` would allow; yet the optimization loop must reach the LLM, which ``none`` would forbid.
Docker's ``bridge`` gives exactly that: outbound traffic, no access to the host's loopback. Use ``host``
only when the LLM endpoint is on the worker's loopback (a local vLLM), and ``none`` for workers that only
diagnose; the tests use ``none`` (a bridge's private range is not allowed on the CI machines).

``executor_for(settings)`` picks the executor: ``INTELLIPERF_EXECUTOR=container`` requires an engine,
``local`` never uses one, ``auto`` uses one when it answers and has the worker image, else the local
executor with a warning.
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests
from docker.types import DeviceRequest

from intelliperf.contract import JobSpec
from worker.executor import (
    KILL_GRACE_S,
    POLL_S,
    EngineEvent,
    ExecutionResult,
    Executor,
    LocalExecutor,
    parse_line,
    read_outputs,
)
from worker.job_environment import llm_key_environment
from worker.scratch import process_identity
from worker.settings import WorkerSettings

__all__ = [
    "ContainerError",
    "ContainerExecutor",
    "engine_environment",
    "executor_for",
    "gpu_ids_from_env",
    "gpu_options",
    "socket_refusal",
]

log = logging.getLogger(__name__)

OWNER_LABEL = "intelliperf.owner"
"""The host and the worker process (pid and start time) that started a job's container."""
API_TIMEOUT_S = 60.0
PING_TIMEOUT_S = 5.0
AMD_DEVICES = ("/dev/kfd", "/dev/dri")
DEFAULT_SOCKET = "unix:///var/run/docker.sock"
_ENGINE_ERRORS = (docker.errors.DockerException, requests.RequestException, OSError)


class ContainerError(RuntimeError):
    """The container engine cannot run the job: it does not answer, lacks the image, or refused it."""


def gpu_ids_from_env(environ: Mapping[str, str] = os.environ) -> list[str] | None:
    """The worker's GPUs (``INTELLIPERF_WORKER_GPU_INDEX``, else ``CUDA_VISIBLE_DEVICES``); None: all."""
    value = environ.get("INTELLIPERF_WORKER_GPU_INDEX") or environ.get("CUDA_VISIBLE_DEVICES")
    if not value:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def _device_groups(paths: Iterable[str] = AMD_DEVICES) -> list[str]:
    """Numeric groups owning the AMD device nodes on this host (names need not exist in the image)."""
    groups: set[int] = set()
    for path in map(Path, paths):
        nodes = [path, *sorted(path.iterdir())] if path.is_dir() else [path]
        for node in nodes:
            with contextlib.suppress(OSError):
                groups.add(node.stat().st_gid)
    groups.discard(0)
    return [str(group) for group in sorted(groups)] or ["video", "render"]


def gpu_options(vendor: str, gpu_ids: list[str] | None) -> dict[str, Any]:
    """``containers.create`` keywords attaching the worker's GPUs (all of the vendor's when None)."""
    if vendor == "nvidia":
        if gpu_ids:
            request = DeviceRequest(device_ids=list(gpu_ids), capabilities=[["gpu"]])
        else:
            request = DeviceRequest(count=-1, capabilities=[["gpu"]])
        return {"device_requests": [request]}
    if vendor == "amd":
        options: dict[str, Any] = {
            "devices": [f"{path}:{path}:rwm" for path in AMD_DEVICES],
            "group_add": _device_groups(),
        }
        if gpu_ids:
            options["environment"] = {"ROCR_VISIBLE_DEVICES": ",".join(gpu_ids)}
        return options
    raise ValueError(f"no way to attach a {vendor!r} GPU")


def engine_environment(spec: JobSpec, job_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the engine needs and nothing of the worker's: the job's own LLM key (``job_env``, sent with
    the job) only for a job that may call the LLM (worker.job_environment)."""
    return {"PYTHONUNBUFFERED": "1", "HOME": "/tmp"} | llm_key_environment(spec, job_env)


class ContainerExecutor:
    """The engine in a container of the job's image, one container per job, removed afterwards."""

    def __init__(
        self,
        image: str,
        *,
        docker_host: str | None = None,
        network_mode: str = "bridge",
        attach_gpu: bool = True,
        gpu_ids: list[str] | None = None,
        python: str = "python3",
        volumes: Mapping[str, str] | None = None,
        user: str | None = None,
    ) -> None:
        """``volumes``: extra host folders mounted read-only at the same path (the tests mount this
        checkout's interpreter and virtual environment into a bare image); ``user``: uid:gid the engine
        runs as, by default this worker's, so the files it writes are the worker's to delete."""
        self.image = image
        self.docker_host = docker_host
        self.network_mode = network_mode
        self.attach_gpu = attach_gpu
        self.gpu_ids = gpu_ids
        self.python = python
        self.volumes = dict(volumes or {})
        self.user = user or f"{os.getuid()}:{os.getgid()}"

    @classmethod
    def from_settings(cls, settings: WorkerSettings) -> ContainerExecutor:
        gpu_ids = gpu_ids_from_env()
        has_gpu = gpu_ids is not None or _gpu_present() or Path("/dev/kfd").exists()
        return cls(
            settings.worker_image,
            docker_host=settings.docker_host,
            network_mode=settings.container_network,
            attach_gpu=has_gpu,
            gpu_ids=gpu_ids,
        )

    def client(self, timeout: float | None = API_TIMEOUT_S) -> docker.DockerClient:
        """``timeout=None`` for the log stream: a build may print nothing for longer than any timeout."""
        path = _unix_socket(self.docker_host or os.environ.get("DOCKER_HOST") or DEFAULT_SOCKET)
        refused = socket_refusal(path) if path is not None else None
        if refused is not None:
            # checked here: a client whose connection fails leaks the socket it opened
            raise ContainerError(f"the container engine at {self.where} does not answer: {refused}")
        try:
            if self.docker_host:
                return docker.DockerClient(base_url=self.docker_host, timeout=timeout)
            return docker.from_env(timeout=timeout)  # type: ignore[arg-type]
        except _ENGINE_ERRORS as exc:
            raise ContainerError(f"the container engine at {self.where} does not answer: {exc}") from None

    @property
    def where(self) -> str:
        return self.docker_host or os.environ.get("DOCKER_HOST") or "the default Docker socket"

    def ping(self) -> None:
        try:
            with contextlib.closing(self.client(PING_TIMEOUT_S)) as client:
                client.ping()
        except _ENGINE_ERRORS as exc:
            raise ContainerError(f"the container engine at {self.where} does not answer: {exc}") from None

    def remove_orphaned(self) -> list[str]:
        """Remove the job containers of this host whose worker process is gone (killed mid-job: nothing
        stopped its container); returns their ids."""
        host = socket.gethostname()
        removed = []
        with contextlib.closing(self.client()) as client:
            for container in client.containers.list(all=True, filters={"label": OWNER_LABEL}):
                owner_host, _, owner = container.labels.get(OWNER_LABEL, "").partition(" ")
                pid = owner.split(" ", 1)[0]
                if owner_host != host or (pid.isdigit() and process_identity(int(pid)) == owner):
                    continue
                with contextlib.suppress(*_ENGINE_ERRORS):
                    container.remove(force=True)
                    removed.append(container.id)
        if removed:
            log.warning("removed %d container(s) of jobs whose worker died", len(removed))
        return removed

    def has_image(self, image: str) -> bool:
        try:
            with contextlib.closing(self.client()) as client:
                client.images.get(image)
        except docker.errors.ImageNotFound:
            return False
        except _ENGINE_ERRORS as exc:
            raise ContainerError(f"the container engine at {self.where} does not answer: {exc}") from None
        return True

    def container_options(
        self,
        spec: JobSpec,
        project: Path,
        out: Path,
        job_env: Mapping[str, str] | None = None,
        counters: Path | None = None,
    ) -> dict[str, Any]:
        """Everything ``containers.create`` gets (the tests read the limits back from the engine).
        ``job_env``: the job's own secrets (its LLM key); ``counters``: its repository's counter entries,
        downloaded for it, mounted read-only (the worker publishes what the job writes into ``out``)."""
        mounts = {str(path): {"bind": str(path), "mode": "ro"} for path in self.volumes}
        if counters is not None:
            mounts[str(counters)] = {"bind": str(counters), "mode": "ro"}
        mounts[str(project)] = {"bind": str(project), "mode": "rw"}
        mounts[str(out)] = {"bind": str(out), "mode": "rw"}
        environment = engine_environment(spec, job_env)
        options: dict[str, Any] = {}
        if self.attach_gpu:
            options = gpu_options(spec.gpu.vendor, self.gpu_ids)
            environment.update(options.pop("environment", {}))
        command = [self.python, "-m", "worker.engine_main", "--spec", str(out / "spec.json")]
        command += ["--project", str(project), "--out", str(out)]
        command += ["--counters", str(counters)] if counters is not None else []
        return {
            "image": spec.container.image or self.image,
            "command": command,
            "working_dir": str(project),
            "volumes": mounts,
            "environment": environment,
            "network_mode": self.network_mode,
            "mem_limit": spec.container.memory_limit,
            "memswap_limit": spec.container.memory_limit,  # no swap beyond the limit
            "nano_cpus": int(spec.container.cpus * 1e9),
            "user": self.user,
            "init": True,  # the engine is not PID 1, so SIGTERM stops it
            "labels": {
                "intelliperf.executor": "container",
                OWNER_LABEL: f"{socket.gethostname()} {process_identity(os.getpid())}",
            },
            "detach": True,
            **options,
        }

    def run(
        self,
        spec: JobSpec,
        project: Path,
        out: Path,
        *,
        on_events: Callable[[list[EngineEvent]], None],
        should_cancel: Callable[[], bool],
        time_limit_s: float,
        env: Mapping[str, str] | None = None,
        scratch: Path | None = None,
        counters: Path | None = None,
    ) -> ExecutionResult:
        """``scratch`` is not used: the container holds the job's processes, and its engine removes it."""
        project, out = project.resolve(), out.resolve()
        out.mkdir(parents=True, exist_ok=True)
        (out / "spec.json").write_text(spec.model_dump_json())  # what the engine in the container reads
        options = self.container_options(spec, project, out, env, counters)
        deadline = time.monotonic() + time_limit_s
        with contextlib.closing(self.client()) as client:
            container = _create(client, options)
            try:
                return self._supervise(container, out, on_events, should_cancel, deadline)
            finally:
                try:
                    container.remove(force=True)
                except _ENGINE_ERRORS as exc:
                    log.warning("container %s could not be removed: %s", container.short_id, exc)

    def _supervise(
        self,
        container: Any,
        out: Path,
        on_events: Callable[[list[EngineEvent]], None],
        should_cancel: Callable[[], bool],
        deadline: float,
    ) -> ExecutionResult:
        try:
            container.start()
        except _ENGINE_ERRORS as exc:
            raise ContainerError(f"the container engine could not start the job's container: {exc}") from None
        lines: queue.Queue[str | None] = queue.Queue()
        stream_client = self.client(timeout=None)
        stream = stream_client.containers.get(container.id)
        threading.Thread(target=_pump_logs, args=(stream, stream_client, lines), daemon=True).start()
        tail: list[str] = []
        error: EngineEvent | None = None
        timed_out = cancelled = finished = False
        stopped_at: float | None = None
        while not finished:
            batch: list[str] = []
            with contextlib.suppress(queue.Empty):
                while True:
                    line = lines.get_nowait()
                    if line is None:
                        finished = True
                        break
                    batch.append(line)
            events = [parse_line(line) for line in batch]
            for event in events:
                if event.kind == "error":
                    error = event
                tail = [*tail, event.message][-40:]
            if events:
                on_events(events)
            if finished:
                break
            if stopped_at is None:
                if time.monotonic() > deadline:
                    timed_out = True
                elif should_cancel():
                    cancelled = True
                if timed_out or cancelled:
                    _stop(container)
                    stopped_at = time.monotonic()
            elif time.monotonic() - stopped_at > KILL_GRACE_S:
                break  # stopped, yet the engine's log stream did not end: do not wait on it
            time.sleep(POLL_S)
        report, summary = read_outputs(out)
        return ExecutionResult(
            exit_code=_exit_code(container),
            timed_out=timed_out,
            cancelled=cancelled,
            error=error,
            report=report,
            summary=summary,
            log_tail="\n".join(tail),
        )


def _unix_socket(url: str) -> Path | None:
    for prefix in ("unix://", "http+unix://"):
        if url.startswith(prefix):
            return Path(url.removeprefix(prefix))
    return None


def socket_refusal(path: Path) -> str | None:
    """Why a connection to the engine's unix socket fails (no socket file; one its engine left behind when
    it stopped: refused), or None when it connects. Asked with a socket that is always closed: docker-py
    (and httpx) leave the socket of a failed connect unclosed, a ResourceWarning."""
    if not path.is_socket():
        return f"no {path}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(PING_TIMEOUT_S)
        try:
            probe.connect(str(path))
        except OSError as exc:
            return f"{path}: {exc.strerror or exc}"
    return None


def _gpu_present() -> bool:
    """Whether the one device probe finds a GPU of any vendor on this node."""
    from worker.gpu import detect_gpus

    return bool(detect_gpus())


def _create(client: docker.DockerClient, options: dict[str, Any]) -> Any:
    image = options["image"]
    options = {key: value for key, value in options.items() if key != "image"}
    try:
        return client.containers.create(image, **options)
    except docker.errors.ImageNotFound:
        raise ContainerError(
            f"the image {image!r} is not on this worker's container engine (images are never pulled: "
            "load it on the worker, or name one it has in the spec's container.image)"
        ) from None
    except docker.errors.APIError as exc:
        if exc.status_code == 404:
            raise ContainerError(f"the image {image!r} is not on this worker's container engine") from None
        raise ContainerError(f"the container engine refused the job's container: {exc.explanation}") from None
    except _ENGINE_ERRORS as exc:
        raise ContainerError(f"the container engine does not answer: {exc}") from None


def _pump_logs(container: Any, client: docker.DockerClient, sink: queue.Queue[str | None]) -> None:
    """The container's stdout and stderr as lines, until it exits; a broken stream ends it too."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    logs = None
    try:
        logs = container.logs(stream=True, follow=True, stdout=True, stderr=True)
        for chunk in logs:
            pending += decoder.decode(chunk)
            *complete, pending = pending.split("\n")
            for line in complete:
                sink.put(line)
    except _ENGINE_ERRORS as exc:
        sink.put(f"the container's log stream broke: {exc}")
    finally:
        pending += decoder.decode(b"", final=True)
        if pending:
            sink.put(pending)
        sink.put(None)
        if logs is not None:  # the stream holds its own socket, which client.close() leaves open
            with contextlib.suppress(*_ENGINE_ERRORS, OSError):
                logs.close()
        client.close()


def _stop(container: Any) -> None:
    """SIGTERM to the engine (through the container's init), SIGKILL after the grace period."""
    try:
        container.stop(timeout=int(KILL_GRACE_S))
    except docker.errors.NotFound:
        return
    except _ENGINE_ERRORS as exc:
        log.warning("container %s did not stop (%s): killing it", container.short_id, exc)
        with contextlib.suppress(*_ENGINE_ERRORS):
            container.kill()


def _exit_code(container: Any) -> int | None:
    try:
        status = container.wait(timeout=KILL_GRACE_S)
    except _ENGINE_ERRORS:
        return None
    code = status.get("StatusCode")
    return int(code) if isinstance(code, int) else None


def executor_for(settings: WorkerSettings) -> Executor:
    """The container executor where a container engine answers (per ``settings.executor``), else local."""
    if settings.executor == "local":
        return LocalExecutor()
    executor = ContainerExecutor.from_settings(settings)
    try:
        executor.ping()
        has_image = executor.has_image(executor.image)
    except ContainerError as exc:
        if settings.executor == "container":
            raise
        log.warning("%s: jobs run in a local subprocess, without the container sandbox", exc)
        return LocalExecutor()
    if not has_image:
        if settings.executor == "auto":
            log.warning(
                "the worker image %r is not on the container engine: jobs run in a local subprocess, "
                "without the container sandbox",
                executor.image,
            )
            return LocalExecutor()
        log.warning("the worker image %r is missing: jobs naming no image fail", executor.image)
    return executor
