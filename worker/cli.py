"""`intelliperf worker`: one Celery worker process per visible GPU, each on its GPU's queue."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from worker.gpu import detect_gpus, queues_for, visible_devices

__all__ = ["register", "start_local_workers", "worker_commands"]

stderr = Console(stderr=True, soft_wrap=True)
ROOT = str(Path(__file__).resolve().parent.parent)


def worker_commands(queues: list[str] | None) -> list[tuple[list[str], dict[str, str]]]:
    """The celery command and environment of each worker process: one per visible GPU, else one.

    Each process's name is the operator's INTELLIPERF_WORKER_NAME, else the host's name and this process's
    id, followed by what it serves (``-cpu``, ``-gpu0``, ``-amd-gpu0``): two ``intelliperf worker`` on one
    host never share a name, which the service would take for one worker restarting."""
    host = socket.gethostname()
    prefix = os.environ.get("INTELLIPERF_WORKER_NAME") or f"{host}-{os.getpid()}"
    base = [sys.executable, "-m", "celery", "-A", "worker.app", "worker", "-P", "solo", "--concurrency", "1"]
    base += ["--without-gossip", "--without-mingle", "--loglevel", "INFO"]
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


def start_local_workers(service_url: str) -> list[subprocess.Popen[bytes]]:
    """The embedded default's workers (`intelliperf serve --worker`), started beside the API at
    ``service_url`` (the worker token is in the environment they inherit)."""
    return [
        subprocess.Popen(argv, env=_environment({**env, "INTELLIPERF_SERVICE_URL": service_url}))
        for argv, env in worker_commands(None)
    ]


def register(app: typer.Typer) -> None:
    app.command(help=worker.__doc__)(worker)
