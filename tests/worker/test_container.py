"""The container sandbox through the docker SDK, for real: podman serves the Docker Engine API here.

``scripts/podman-up`` (run by ``scripts/services-up``, or here when its socket does not answer) starts
``podman system service`` and builds a Debian bookworm base image locally. The image holds no IntelliPerf:
the tests mount this checkout, its virtual environment and its interpreter read-only at their own paths
and run the engine with the environment's Python: test-only, a stand-in for the worker image. Containers
run with ``network_mode="none"``; the engine diagnoses a profile recorded on the GPU machine (``replay``),
so no GPU is needed and none is attached (the device requests are checked on their own below).
"""

from __future__ import annotations

import gc
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from docker.types import DeviceRequest

from intelliperf.contract import JobSpec
from tests.service.conftest import recorded_example_archive
from worker import container as container_module
from worker.container import (
    ContainerError,
    ContainerExecutor,
    engine_environment,
    executor_for,
    gpu_ids_from_env,
    gpu_options,
)
from worker.executor import EngineEvent, LocalExecutor
from worker.settings import WorkerSettings
from worker.source import from_archive

ROOT = Path(__file__).resolve().parents[2]
SOCKET = "unix:///run/intelliperf-podman.sock"
BASE_IMAGE = "localhost/intelliperf-base:bookworm"
LABEL = "intelliperf.executor=container"
REPLAY_SPEC: dict[str, object] = {
    "applications": [{"command": "./bin/transpose"}],
    "formula": "diagnoseOnly",
    "replay": "profile",
}


# --- GPU attachment, environment, choice of executor: no engine needed ---


def test_nvidia_gpu_of_the_worker_is_requested_by_id() -> None:
    options = gpu_options("nvidia", ["3"])
    assert options == {"device_requests": [DeviceRequest(device_ids=["3"], capabilities=[["gpu"]])]}
    assert options["device_requests"][0]["DeviceIDs"] == ["3"]


def test_nvidia_without_an_index_requests_every_gpu() -> None:
    (request,) = gpu_options("nvidia", None)["device_requests"]
    assert request["Count"] == -1 and request["Capabilities"] == [["gpu"]] and not request["DeviceIDs"]


def test_amd_gpu_gets_kfd_and_dri_with_their_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(container_module, "_device_groups", lambda: ["44", "109"])
    options = gpu_options("amd", ["1"])
    assert options["devices"] == ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"]
    assert options["group_add"] == ["44", "109"]
    assert options["environment"] == {"ROCR_VISIBLE_DEVICES": "1"}
    assert "device_requests" not in options


def test_amd_device_groups_are_the_owners_of_the_nodes(tmp_path: Path) -> None:
    (tmp_path / "dri").mkdir()
    (tmp_path / "kfd").touch()
    (tmp_path / "dri" / "renderD128").touch()
    os.chown(tmp_path / "kfd", -1, 44)
    os.chown(tmp_path / "dri" / "renderD128", -1, 109)
    groups = container_module._device_groups([str(tmp_path / "kfd"), str(tmp_path / "dri")])
    assert groups == ["44", "109"]
    assert container_module._device_groups([str(tmp_path / "missing")]) == ["video", "render"]


def test_gpu_ids_come_from_the_worker_index_then_cuda_visible_devices() -> None:
    assert gpu_ids_from_env({"INTELLIPERF_WORKER_GPU_INDEX": "2", "CUDA_VISIBLE_DEVICES": "5"}) == ["2"]
    assert gpu_ids_from_env({"CUDA_VISIBLE_DEVICES": "0, 1"}) == ["0", "1"]
    assert gpu_ids_from_env({}) is None


def test_container_options_attach_the_spec_vendor_gpu(tmp_path: Path) -> None:
    executor = ContainerExecutor("img", attach_gpu=True, gpu_ids=["0"])
    spec = JobSpec.model_validate({**REPLAY_SPEC, "gpu": {"vendor": "nvidia"}})
    options = executor.container_options(spec, tmp_path / "p", tmp_path / "o")
    assert options["device_requests"][0]["DeviceIDs"] == ["0"]
    spec = JobSpec.model_validate({**REPLAY_SPEC, "gpu": {"vendor": "amd"}})
    options = executor.container_options(spec, tmp_path / "p", tmp_path / "o")
    assert "/dev/kfd:/dev/kfd:rwm" in options["devices"]
    assert options["environment"]["ROCR_VISIBLE_DEVICES"] == "0"
    assert "device_requests" not in ContainerExecutor("img", attach_gpu=False).container_options(
        spec, tmp_path / "p", tmp_path / "o"
    )


def test_the_repository_s_counters_are_mounted_read_only_and_named_to_the_engine(tmp_path: Path) -> None:
    executor = ContainerExecutor("img", attach_gpu=False)
    spec = JobSpec.model_validate(REPLAY_SPEC)
    counters = tmp_path / "counters" / "acme"
    options = executor.container_options(spec, tmp_path / "p", tmp_path / "o", None, counters)
    assert options["volumes"][str(counters)] == {"bind": str(counters), "mode": "ro"}
    assert options["volumes"][str(tmp_path / "o")]["mode"] == "rw"  # where the engine writes new ones
    assert options["command"][-2:] == ["--counters", str(counters)]
    plain = executor.container_options(spec, tmp_path / "p", tmp_path / "o")
    assert "--counters" not in plain["command"] and str(counters) not in plain["volumes"]


def test_only_the_job_s_own_llm_key_goes_and_only_to_jobs_that_may_call_the_llm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {"LLM_GATEWAY_KEY": "sk-worker", "OPENAI_API_KEY": "sk-openai"}.items():
        monkeypatch.setenv(name, value)  # the worker's own keys: never a job's
    job_env = {"LLM_GATEWAY_KEY": "sk-job-own", "OTHER": "x"}
    optimize = JobSpec.model_validate({"applications": [{"command": "./a"}], "build_command": "make"})
    assert engine_environment(optimize, job_env) == {
        "PYTHONUNBUFFERED": "1",
        "HOME": "/tmp",
        "LLM_GATEWAY_KEY": "sk-job-own",
    }
    assert engine_environment(optimize) == {"PYTHONUNBUFFERED": "1", "HOME": "/tmp"}
    assert engine_environment(JobSpec.model_validate(REPLAY_SPEC), job_env) == {
        "PYTHONUNBUFFERED": "1",
        "HOME": "/tmp",
    }


def test_the_job_s_own_llm_key_wins_over_the_worker_s(tmp_path: Path) -> None:
    optimize = JobSpec.model_validate({"applications": [{"command": "./a"}], "build_command": "make"})
    executor = ContainerExecutor("img", attach_gpu=False)
    options = executor.container_options(optimize, tmp_path, tmp_path, {"LLM_GATEWAY_KEY": "sk-job-own"})
    assert options["environment"]["LLM_GATEWAY_KEY"] == "sk-job-own"
    diagnose = JobSpec.model_validate(REPLAY_SPEC)
    assert (
        "LLM_GATEWAY_KEY"
        not in executor.container_options(diagnose, tmp_path, tmp_path, {"LLM_GATEWAY_KEY": "sk-job-own"})[
            "environment"
        ]
    )


def test_no_engine_means_the_local_executor_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    settings = WorkerSettings(executor="auto", docker_host="unix:///nonexistent/docker.sock")
    with caplog.at_level(logging.WARNING, logger="worker.container"):
        assert isinstance(executor_for(settings), LocalExecutor)
    assert "does not answer" in caplog.text and "without the container sandbox" in caplog.text
    assert isinstance(executor_for(WorkerSettings(executor="local")), LocalExecutor)
    with pytest.raises(ContainerError, match="does not answer"):
        executor_for(WorkerSettings(executor="container", docker_host="unix:///nonexistent/docker.sock"))


def run_job(
    executor: ContainerExecutor, project: Path, out: Path, spec: dict[str, object] = REPLAY_SPEC
) -> None:
    """A job that is expected never to start (the caller asserts the ContainerError)."""
    executor.run(
        JobSpec.model_validate(spec),
        project,
        out,
        on_events=lambda _: None,
        should_cancel=lambda: False,
        time_limit_s=60,
    )


def test_an_unreachable_engine_is_a_clear_error(tmp_path: Path) -> None:
    executor = ContainerExecutor("img", docker_host="unix:///nonexistent/docker.sock", attach_gpu=False)
    with pytest.raises(ContainerError, match="does not answer"):
        run_job(executor, tmp_path, tmp_path / "out")


def test_a_socket_its_engine_left_behind_is_a_clear_error_and_leaks_nothing(tmp_path: Path) -> None:
    """The engine stopped and left its socket file: connecting is refused. Warnings are errors here, so a
    socket left open by the failed connection fails this test."""
    stale = tmp_path / "engine.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(stale))  # bound, never listening, then closed: the file stays
    assert stale.is_socket()
    executor = ContainerExecutor("img", docker_host=f"unix://{stale}", attach_gpu=False)
    with pytest.raises(ContainerError, match=f"does not answer: {stale}: Connection refused"):
        executor.ping()
    with pytest.raises(ContainerError, match="Connection refused"):
        run_job(executor, tmp_path, tmp_path / "out")
    gc.collect()


# --- through podman ---


def _answers(base_url: str) -> bool:
    """Through the executor's own ping: a client made straight on a socket that refuses leaks its socket,
    which (warnings being errors) fails whichever test is running when it is collected."""
    try:
        ContainerExecutor("any", docker_host=base_url, attach_gpu=False).ping()
    except ContainerError:
        return False
    return True


@pytest.fixture(scope="session")
def docker_host() -> str:
    base_url = os.environ.get("INTELLIPERF_DOCKER_HOST", SOCKET)
    if not _answers(base_url) or base_url == SOCKET:
        # idempotent: starts the service and builds the base image only where they are missing
        done = subprocess.run([ROOT / "scripts" / "podman-up"], capture_output=True, text=True)
        if done.returncode != 0 and not _answers(base_url):
            pytest.skip(f"NO CONTAINER ENGINE: scripts/podman-up failed:\n{done.stdout}{done.stderr}")
    return base_url


@pytest.fixture
def client(docker_host: str) -> Iterator[docker.DockerClient]:
    client = docker.DockerClient(base_url=docker_host)
    yield client
    left = client.containers.list(all=True, filters={"label": LABEL})
    for container in left:
        container.remove(force=True)
    client.close()
    assert not left, "a job's container was left behind"


@pytest.fixture
def executor(docker_host: str) -> ContainerExecutor:
    mounts = {sys.base_prefix: "", str(ROOT): ""}
    if not Path(sys.prefix).is_relative_to(ROOT):
        mounts[sys.prefix] = ""
    return ContainerExecutor(
        BASE_IMAGE,
        docker_host=docker_host,
        network_mode="none",
        attach_gpu=False,
        python=str(Path(sys.prefix) / "bin" / "python"),
        volumes=mounts,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return from_archive(recorded_example_archive(), tmp_path / "src")


def test_the_engine_runs_in_a_container_without_network(
    executor: ContainerExecutor,
    client: docker.DockerClient,
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[EngineEvent] = []
    seen: list[dict[str, object]] = []

    def inspect(batch: list[EngineEvent]) -> None:
        events.extend(batch)
        if not seen:
            (running,) = client.containers.list(all=True, filters={"label": LABEL})
            seen.append(running.attrs)

    spec = {**REPLAY_SPEC, "container": {"memory_limit": "512m", "cpus": 1.5}}
    monkeypatch.setenv("LLM_GATEWAY_KEY", "sk-never-in-a-diagnosis-container")
    result = executor.run(
        JobSpec.model_validate(spec),
        project,
        tmp_path / "out",
        on_events=inspect,
        should_cancel=lambda: False,
        time_limit_s=120,
    )
    assert result.exit_code == 0, result.log_tail
    assert not (result.timed_out or result.cancelled) and result.error is None
    assert result.report is not None and result.report["diagnoses"]
    assert result.summary and "transpose" in result.summary
    stages = {event.stage for event in events if event.kind == "stage"}
    assert {"device", "timing", "counters", "diagnose"} <= stages
    host_config, config = seen[0]["HostConfig"], seen[0]["Config"]
    assert host_config["NetworkMode"] == "none"
    assert host_config["Memory"] == 512 * 2**20
    assert host_config["NanoCpus"] == 1_500_000_000
    env = "\n".join(config["Env"])
    assert "PYTHONUNBUFFERED=1" in env and "sk-never" not in env and "INTELLIPERF_" not in env


def test_a_hanging_container_is_stopped_at_the_time_limit(
    executor: ContainerExecutor, client: docker.DockerClient, project: Path, tmp_path: Path
) -> None:
    events: list[EngineEvent] = []
    spec = {**REPLAY_SPEC, "build_command": "sleep 600"}
    start = time.monotonic()
    result = executor.run(
        JobSpec.model_validate(spec),
        project,
        tmp_path / "out",
        on_events=events.extend,
        should_cancel=lambda: False,
        time_limit_s=8,
    )
    elapsed = time.monotonic() - start
    assert result.timed_out and not result.cancelled
    assert any(event.stage == "build" for event in events), result.log_tail  # it hung in the build
    assert result.report is None and result.exit_code != 0
    assert 8 <= elapsed < 8 + 15


def test_cancellation_stops_the_container(
    executor: ContainerExecutor, client: docker.DockerClient, project: Path, tmp_path: Path
) -> None:
    events: list[EngineEvent] = []
    spec = {**REPLAY_SPEC, "build_command": "sleep 600"}
    start = time.monotonic()
    result = executor.run(
        JobSpec.model_validate(spec),
        project,
        tmp_path / "out",
        on_events=events.extend,
        should_cancel=lambda: any(event.stage == "build" for event in events),
        time_limit_s=300,
    )
    assert result.cancelled and not result.timed_out
    assert result.report is None and result.exit_code != 0
    assert time.monotonic() - start < 30


def test_a_missing_image_is_a_clear_error(
    executor: ContainerExecutor, client: docker.DockerClient, project: Path, tmp_path: Path
) -> None:
    spec = {**REPLAY_SPEC, "container": {"image": "localhost/intelliperf-no-such-image:1"}}
    with pytest.raises(ContainerError, match="'localhost/intelliperf-no-such-image:1' is not on this worker"):
        run_job(executor, project, tmp_path / "out", spec)


def test_the_container_executor_is_chosen_where_the_engine_answers(docker_host: str) -> None:
    chosen = executor_for(WorkerSettings(executor="auto", docker_host=docker_host, worker_image=BASE_IMAGE))
    assert isinstance(chosen, ContainerExecutor) and chosen.image == BASE_IMAGE
    missing = WorkerSettings(executor="auto", docker_host=docker_host, worker_image="localhost/nope:1")
    assert isinstance(executor_for(missing), LocalExecutor)
