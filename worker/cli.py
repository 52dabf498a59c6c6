"""`intelliperf worker`: one Celery worker process per visible GPU, each on its GPU's queue."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Annotated

import typer
from rich.console import Console

from worker.gpu import detect_gpus, queues_for, visible_devices

__all__ = ["register", "start_local_workers", "worker_commands"]

stderr = Console(stderr=True, soft_wrap=True)
ROOT = str(Path(__file__).resolve().parent.parent)


def worker_commands(
    queues: list[str] | None, *, quiet: bool = False
) -> list[tuple[list[str], dict[str, str]]]:
    """The celery command and environment of each worker process: one per visible GPU, else one.

    Each process's name is the operator's INTELLIPERF_WORKER_NAME, else the host's name and this process's
    id, followed by what it serves (``-cpu``, ``-gpu0``, ``-amd-gpu0``): two ``intelliperf worker`` on one
    host never share a name, which the service would take for one worker restarting.

    ``quiet`` (the local workers of `intelliperf serve` without ``-v``): no banner (celery ``--quiet``) and
    warnings and errors only; the service reports their jobs' events itself."""
    host = socket.gethostname()
    prefix = os.environ.get("INTELLIPERF_WORKER_NAME") or f"{host}-{os.getpid()}"
    base = [sys.executable, "-m", "celery", *(["--quiet"] if quiet else []), "-A", "worker.app", "worker"]
    base += ["-P", "solo", "--concurrency", "1", "--without-gossip", "--without-mingle"]
    base += ["--loglevel", "WARNING" if quiet else "INFO"]
    gpus = detect_gpus()
    if not gpus:
        name = f"{prefix}-cpu"
        env = {"INTELLIPERF_WORKER_NAME": name}
        return [([*base, "-Q", ",".join(queues or queues_for(None)), "-n", f"{name}@{host}"], env)]
    commands = []
    for gpu in gpus:
        # each vendor numbers its GPUs from 0: on a node with both, AMD's workers need names of their own
        name = (
            f"{prefix}-gpu{gpu.index}" if gpu.vendor == "nvidia" else f"{prefix}-{gpu.vendor}-gpu{gpu.index}"
        )
        env = {
            "INTELLIPERF_WORKER_NAME": name,
            "INTELLIPERF_WORKER_GPU_INDEX": str(gpu.index),
            "INTELLIPERF_WORKER_GPU_VENDOR": gpu.vendor,
            **visible_devices(gpu),
        }
        commands.append(([*base, "-Q", ",".join(queues or queues_for(gpu)), "-n", f"{name}@{host}"], env))
    return commands


def _supervise(commands: list[tuple[list[str], dict[str, str]]]) -> int:
    processes = []
    for argv, env in commands:
        full_env = _environment(env)
        stderr.print(f"starting worker {env['INTELLIPERF_WORKER_NAME']} on {argv[argv.index('-Q') + 1]}")
        processes.append(subprocess.Popen(argv, env=full_env))

    def forward(signum: int, _frame: object) -> None:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    codes = [process.wait() for process in processes]
    return max(codes, default=0)


def worker(
    queue: Annotated[
        list[str] | None, typer.Option("--queue", "-Q", help="Consume these queues instead of the GPU's own")
    ] = None,
) -> None:
    """Start one Celery worker process per visible GPU (solo pool), each on its GPU's queue."""
    raise typer.Exit(code=_supervise(worker_commands(queue)))


def _environment(env: dict[str, str]) -> dict[str, str]:
    full_env = {**os.environ, **env}
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, full_env.get("PYTHONPATH")]))
    return full_env


def _copy(source: IO[bytes], log: IO[bytes]) -> None:
    """A worker's output, line by line, to the console and the log (verbose `serve`)."""
    with log:
        for line in source:
            for sink in (sys.stderr.buffer, log):
                sink.write(line)
                sink.flush()


def start_local_workers(
    service_url: str, *, log: Path | None = None, verbose: bool = True
) -> list[subprocess.Popen[bytes]]:
    """The embedded default's workers (`intelliperf serve --worker`), started beside the API at
    ``service_url`` (the worker token and the data folder are in the environment they inherit).

    With ``log``, their output is appended to it: only their warnings and errors, without Celery's banner,
    unless ``verbose``, which also copies their output (banner and INFO, as `intelliperf worker` writes
    them) to this process's standard error. Without ``log``, they write to the console at INFO."""
    processes = []
    for argv, env in worker_commands(None, quiet=log is not None and not verbose):
        full_env = _environment({**env, "INTELLIPERF_SERVICE_URL": service_url, "PYTHONUNBUFFERED": "1"})
        if log is None:
            processes.append(subprocess.Popen(argv, env=full_env))
            continue
        sink = log.open("ab")
        if not verbose:
            with sink:
                processes.append(subprocess.Popen(argv, env=full_env, stdout=sink, stderr=subprocess.STDOUT))
            continue
        process = subprocess.Popen(argv, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert process.stdout is not None
        threading.Thread(target=_copy, args=(process.stdout, sink), name="worker-output", daemon=True).start()
        processes.append(process)
    return processes


def register(app: typer.Typer) -> None:
    app.command(help=worker.__doc__)(worker)
