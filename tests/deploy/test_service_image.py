"""The `service` image, built and run for real: podman serves the Docker Engine API here.

``scripts/build-service-image`` makes a wheelhouse from uv.lock (PyPI once, then kept in .wheelhouse/) and
builds the Dockerfile's ``service`` target offline (``--network none``) from the local Debian bookworm
image that ``scripts/podman-up`` makes; an image whose inputs are unchanged is reused. The container runs
with ``network_mode="host"`` on a free port of 127.0.0.1, on a fresh PostgreSQL database of the machine's
and the embedded filesystem broker (in the container's data folder).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest

from tests.service.conftest import free_port, postgres_database
from worker.container import socket_refusal

ROOT = Path(__file__).resolve().parents[2]
SOCKET = "unix:///run/intelliperf-podman.sock"
IMAGE = "localhost/intelliperf-service:test"
ADMIN = "deploy-test-admin-token"
JOB = {"repository": {"url": "https://github.com/acme/kernels.git"}, "applications": [{"command": "./app"}]}

pytestmark = pytest.mark.timeout(900)


def _engine() -> docker.DockerClient | None:
    if socket_refusal(Path(SOCKET.removeprefix("unix://"))) is not None:
        return None
    client = None
    try:
        client = docker.DockerClient(base_url=SOCKET, timeout=120)
        client.ping()
    except Exception:
        if client is not None:
            client.close()
        return None
    return client


@pytest.fixture(scope="module")
def engine() -> Iterator[docker.DockerClient]:
    client = _engine()
    if client is None:
        up = subprocess.run([ROOT / "scripts" / "podman-up"], capture_output=True, text=True, timeout=600)
        client = _engine()
        if client is None:
            message = (
                "!!! PODMAN CANNOT RUN HERE: the service image is NOT tested. scripts/podman-up said:\n"
                + up.stdout
                + up.stderr
            )
            print(message)
            pytest.skip(message)
    yield client
    client.close()


@pytest.fixture(scope="module")
def image(engine: docker.DockerClient) -> Any:
    started = time.monotonic()
    build = subprocess.run(
        [ROOT / "scripts" / "build-service-image"], capture_output=True, text=True, timeout=840, cwd=ROOT
    )
    assert build.returncode == 0, build.stdout + build.stderr
    print(build.stdout.strip(), f"\nbuild-service-image took {time.monotonic() - started:.1f} s")
    return engine.images.get(IMAGE)


def healthcheck(image: Any) -> dict[str, Any]:
    """The image's HEALTHCHECK: Docker reports it in Config; podman's compat API leaves it out there
    (podman keeps it, the image is built in Docker format), its own API has it."""
    found = image.attrs["Config"].get("Healthcheck")
    if found:
        return dict(found)
    with httpx.Client(transport=httpx.HTTPTransport(uds=SOCKET.removeprefix("unix://"))) as podman:
        response = podman.get(f"http://podman/v4.0.0/libpod/images/{image.id}/json", timeout=30)
    response.raise_for_status()
    return dict(response.json().get("Healthcheck") or {})


def test_the_image_runs_as_a_user_declares_a_healthcheck_and_has_no_cuda(image: Any) -> None:
    config = image.attrs["Config"]
    user = config.get("User") or ""
    assert user and user.split(":")[0] not in {"0", "root"}, f"the image runs as {user or 'root'}"
    declared = healthcheck(image)
    assert declared["Test"][0] == "CMD" and "/healthz" in " ".join(declared["Test"]), declared
    assert "intelliperf serve --no-worker" in " ".join(config["Cmd"])
    env = dict(item.split("=", 1) for item in config["Env"])
    assert "cuda" not in env["PATH"].lower()
    assert not any(key.startswith(("CUDA", "NVIDIA")) for key in env), env
    size_mb = image.attrs["Size"] / 1e6
    print(f"{IMAGE}: {size_mb:.0f} MB")
    # the bookworm base is about 170 MB, the service's Python environment about 210 MB; a CUDA toolkit
    # alone would be several GB
    assert size_mb < 700


@pytest.fixture
def service(engine: docker.DockerClient, image: Any) -> Iterator[tuple[str, Any]]:
    port = free_port()
    with postgres_database() as database_url:
        container = engine.containers.run(
            IMAGE,
            detach=True,
            network_mode="host",
            environment={
                "INTELLIPERF_PORT": str(port),
                "INTELLIPERF_DATABASE_URL": database_url,
                "INTELLIPERF_ADMIN_TOKEN": ADMIN,
            },
            labels={"intelliperf.test": "deploy"},
        )
        try:
            yield f"http://127.0.0.1:{port}", container
        finally:
            logs = container.logs().decode(errors="replace")
            container.remove(force=True)
            print(logs[-4000:])


def _wait_until_up(url: str, container: Any) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        container.reload()
        assert container.status in {"created", "running"}, container.logs().decode(errors="replace")
        time.sleep(0.5)
    pytest.fail(f"the service did not answer {url}/healthz in 90 s")


def test_the_service_container_answers_and_takes_a_job(
    engine: docker.DockerClient, service: tuple[str, Any]
) -> None:
    url, container = service
    _wait_until_up(url, container)
    ready = httpx.get(f"{url}/readyz", timeout=10)
    assert ready.status_code == 200, ready.text
    assert httpx.get(f"{url}/v1/jobs", timeout=10).status_code == 401
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10) as client:
        submitted = client.post("/v1/jobs", json=JOB)
        assert submitted.status_code == 201, submitted.text
        job = submitted.json()
        assert job["status"] == "queued"
        again = client.get(f"/v1/jobs/{job['id']}")
        assert again.status_code == 200
        assert again.json()["repository"] == "acme/kernels"
        assert again.json()["spec"]["applications"][0]["command"] == ["./app"]

    # the serving process runs as the image's user (its uid read from this host's /proc: no exec)
    container.reload()
    status = Path(f"/proc/{container.attrs['State']['Pid']}/status").read_text()
    uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
    assert set(uids) == {"10001"}, status

    # the declared HEALTHCHECK's own command succeeds (in a second container, not an exec: an exec
    # leaves a conmon process behind for minutes)
    test = healthcheck(container.image)["Test"]
    output = engine.containers.run(
        IMAGE,
        command=test[1:],
        network_mode="host",
        environment={"INTELLIPERF_PORT": url.rsplit(":", 1)[1]},
        remove=True,
    )
    assert output == b""
