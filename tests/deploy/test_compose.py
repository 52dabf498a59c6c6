"""docker-compose.yml and the Dockerfile, checked without an engine: no `docker compose` or `podman compose`
exists on these machines, so the file is parsed and held against the Dockerfile and the settings."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from profiler.build import CACHE_VARIABLE
from service.settings import ServiceSettings
from worker.settings import WorkerSettings

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
# variables the images themselves read (the Dockerfile's HEALTHCHECK and CMD), not ServiceSettings
IMAGE_VARIABLES = {"INTELLIPERF_PORT"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def dockerfile_targets() -> set[str]:
    return set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", DOCKERFILE, flags=re.MULTILINE | re.IGNORECASE))


def stage(target: str) -> str:
    """The Dockerfile's lines of one stage."""
    match = re.search(rf"^FROM\s+\S+\s+AS\s+{target}\n(.*?)(?=^FROM\s|\Z)", DOCKERFILE, re.M | re.S)
    assert match, target
    return match.group(1)


def test_the_dockerfile_has_the_three_targets_on_base_images_given_as_arguments() -> None:
    assert {"service", "worker-cuda", "worker-rocm"} <= dockerfile_targets()
    for target, argument in [
        ("service", "SERVICE_BASE"),
        ("worker-cuda", "CUDA_BASE"),
        ("worker-rocm", "ROCM_BASE"),
    ]:
        assert re.search(rf"^FROM \${{{argument}}} AS {target}$", DOCKERFILE, re.M), target
        assert re.search(rf"^ARG {argument}=\S+", DOCKERFILE, re.M), argument
    for target in ("service", "worker-cuda", "worker-rocm"):
        assert re.search(r"^USER 10001", stage(target), re.M), f"{target} runs as root"
    assert "HEALTHCHECK" in stage("service") and "HEALTHCHECK" in stage("worker-cuda")
    assert "nvdisasm" in stage("worker-cuda")  # the counter pass disassembles the kernels it counts
    assert "rocprofv3" in stage("worker-rocm")


def test_every_compose_service_is_built_from_a_dockerfile_target_or_an_image(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"service", "worker", "redis", "postgres"} <= set(services)
    targets = dockerfile_targets()
    for name, service in services.items():
        if "build" in service:
            assert service["build"]["target"] in targets, name
        else:
            assert re.fullmatch(r"[\w./-]+:[\w.-]+", service["image"]), name
        assert "healthcheck" in service or "build" in service, f"{name} has no healthcheck"
    assert services["service"]["build"]["target"] == "service"
    assert services["worker"]["build"]["target"] == "worker-cuda"


def test_the_worker_reserves_the_gpus_and_everything_waits_for_what_it_needs(compose: dict[str, Any]) -> None:
    services = compose["services"]
    devices = services["worker"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]
    for name, needs in {"service": {"postgres", "redis"}, "worker": {"service", "redis"}}.items():
        depends = services[name]["depends_on"]
        assert set(depends) == needs
        assert all(depends[other]["condition"] == "service_healthy" for other in needs)
        for other in needs:
            assert "healthcheck" in services[other] or other == "service"


def test_the_environment_names_are_settings_the_service_reads(compose: dict[str, Any]) -> None:
    fields = {*ServiceSettings.model_fields, *WorkerSettings.model_fields}
    known = {f"INTELLIPERF_{name.upper()}" for name in fields} | IMAGE_VARIABLES
    # and the few the workers read straight from the environment (os.environ.get("INTELLIPERF_..."))
    for source in [*(ROOT / "worker").glob("*.py"), *(ROOT / "service").glob("*.py")]:
        known |= set(re.findall(r"environ\.get\(\"(INTELLIPERF_\w+)\"", source.read_text()))
    known.add(CACHE_VARIABLE)  # where the native profiler's built library is kept (profiler/build.py)
    services = compose["services"]
    for name in ("service", "worker"):
        env = services[name]["environment"]
        unknown = {key for key in env if key.startswith("INTELLIPERF_")} - known
        assert not unknown, f"{name}: {unknown} are not settings the service or the worker reads"
        # one broker and one worker token for the service and every worker
        assert env["INTELLIPERF_BROKER_URL"] == "redis://redis:6379/0"
        assert env["INTELLIPERF_WORKER_TOKEN"].startswith("${INTELLIPERF_WORKER_TOKEN:?")
    service, worker = services["service"]["environment"], services["worker"]["environment"]
    # the database and the secret key stay with the service: a GPU node has the service's URL instead
    assert service["INTELLIPERF_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert service["INTELLIPERF_DATABASE_URL"].endswith("@postgres:5432/intelliperf")
    assert service["INTELLIPERF_SECRET_KEY"].startswith("${INTELLIPERF_SECRET_KEY:?")
    assert not {"INTELLIPERF_DATABASE_URL", "INTELLIPERF_SECRET_KEY"} & set(worker)
    assert worker["INTELLIPERF_SERVICE_URL"] == "http://service:8000"
    # the admin token comes from the env file, never written into the compose file
    assert services["service"]["env_file"] == [".env"]
    text = (ROOT / "docker-compose.yml").read_text()
    assert not re.search(r"^\s*INTELLIPERF_ADMIN_TOKEN:", text, re.M)
    for key in re.findall(r"^ENV\s+(.*?)(?=^\S)", DOCKERFILE, re.M | re.S):
        for variable in re.findall(r"(INTELLIPERF_\w+)=", key):
            assert variable in known, variable


def test_compose_volumes_are_declared(compose: dict[str, Any]) -> None:
    declared = set(compose["volumes"])
    for service in compose["services"].values():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            assert source in declared or source.startswith(("/", ".")), volume


def test_jobs_run_in_containers_of_their_own_on_the_gpu_node(compose: dict[str, Any]) -> None:
    """A job is untrusted code: the compose default is the container executor, whose job containers (started
    through the host's engine) find their folders because the jobs folder has the same path on both sides."""
    worker = compose["services"]["worker"]
    env = worker["environment"]
    assert env["INTELLIPERF_EXECUTOR"] == "container"
    assert env["INTELLIPERF_WORKER_IMAGE"] == worker["image"]
    jobs = env["INTELLIPERF_JOBS_DIR"]
    assert f"{jobs}:{jobs}" in worker["volumes"]
    assert "/var/run/docker.sock:/var/run/docker.sock" in worker["volumes"]
