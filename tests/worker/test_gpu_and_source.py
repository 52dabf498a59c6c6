"""What a worker node knows of itself (its GPUs, the processes `intelliperf worker` starts, what it
advertises) and how it fetches a job's project by git."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from intelliperf.contract import RepositoryRef
from worker.cli import worker_commands
from worker.gpu import GpuInfo, detect_gpus, queues_for
from worker.source import SourceError, checkout

SMI_TWO_GPUS = """#!/bin/sh
echo "0, NVIDIA H100 80GB HBM3, 9.0, 81559, 550.54.15"
echo "1, NVIDIA H200, 9.0, 143771, 550.54.15"
"""
NO_GPU = "#!/bin/sh\necho 'No devices were found' >&2\nexit 6\n"


def fake_smi(folder: Path, script: str) -> Path:
    """A stand-in nvidia-smi answering `--query-gpu=index,name,compute_cap,memory.total,driver_version` as
    the real one, beside an amd-smi and a rocm-smi that find no GPU (the probe asks them too)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("nvidia-smi", script), ("amd-smi", NO_GPU), ("rocm-smi", NO_GPU)):
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return folder


def test_gpus_are_read_from_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{fake_smi(tmp_path / 'bin', SMI_TWO_GPUS)}:{os.environ['PATH']}")
    assert detect_gpus() == [
        GpuInfo(0, "nvidia", "NVIDIA H100 80GB HBM3", "sm_90", 81559 * 2**20, "550.54.15"),
        GpuInfo(1, "nvidia", "NVIDIA H200", "sm_90", 143771 * 2**20, "550.54.15"),
    ]
    assert queues_for(detect_gpus()[0]) == ["gpu.nvidia.sm90", "gpu.nvidia.any"]


def test_a_failing_or_missing_nvidia_smi_means_no_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "PATH", str(fake_smi(tmp_path / "bin", "#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n"))
    )
    assert detect_gpus() == []
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert detect_gpus() == []


def test_intelliperf_worker_starts_one_solo_process_per_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{fake_smi(tmp_path / 'bin', SMI_TWO_GPUS)}:{os.environ['PATH']}")
    commands = worker_commands(None)
    assert len(commands) == 2
    for index, (argv, env) in enumerate(commands):
        assert argv[argv.index("-P") + 1] == "solo" and argv[argv.index("--concurrency") + 1] == "1"
        assert argv[argv.index("-Q") + 1] == "gpu.nvidia.sm90,gpu.nvidia.any"
        assert env["CUDA_VISIBLE_DEVICES"] == env["INTELLIPERF_WORKER_GPU_INDEX"] == str(index)
    assert worker_commands(["gpu.nvidia.sm90"])[1][0][-3] == "gpu.nvidia.sm90"
    # no GPU, also on a GPU machine whose real nvidia-smi is in /usr/bin: a failing one comes first
    no_gpu = fake_smi(tmp_path / "no-gpu", NO_GPU)
    monkeypatch.setenv("PATH", f"{no_gpu}:/usr/bin:/bin")
    [(argv, env)] = worker_commands(None)
    assert argv[argv.index("-Q") + 1] == "gpu.nvidia.any" and env["INTELLIPERF_WORKER_NAME"].endswith("-cpu")


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repository(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository with two commits on main: (path, first commit, second commit)."""
    repo = tmp_path / "origin"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    git("config", "user.email", "t@example.com", cwd=repo)
    git("config", "user.name", "t", cwd=repo)
    (repo / "kernel.cu").write_text("// first\n")
    git("add", ".", cwd=repo)
    git("commit", "-qm", "first", cwd=repo)
    first = git("rev-parse", "HEAD", cwd=repo)
    (repo / "kernel.cu").write_text("// second\n")
    git("commit", "-qam", "second", cwd=repo)
    return repo, first, git("rev-parse", "HEAD", cwd=repo)


def test_a_clone_is_at_the_exact_commit_or_the_ref(repository: tuple[Path, str, str], tmp_path: Path) -> None:
    repo, first, _second = repository
    pinned = checkout(RepositoryRef(url=f"file://{repo}", commit=first), tmp_path / "pinned")
    assert (pinned / "kernel.cu").read_text() == "// first\n"
    assert git("rev-parse", "HEAD", cwd=pinned) == first
    branch = checkout(RepositoryRef(url=f"file://{repo}", ref="main"), tmp_path / "branch")
    assert (branch / "kernel.cu").read_text() == "// second\n"


def test_a_missing_commit_or_repository_is_a_clear_error_without_the_token(
    repository: tuple[Path, str, str], tmp_path: Path
) -> None:
    repo, _, _ = repository
    with pytest.raises(SourceError, match="git fetch failed"):
        checkout(RepositoryRef(url=f"file://{repo}", commit="0" * 40), tmp_path / "missing")
    token = "ghs_clone_token_0123456789"
    with pytest.raises(SourceError) as refused:
        checkout(RepositoryRef(url="http://127.0.0.1:9/acme/kernels.git"), tmp_path / "refused", token=token)
    assert "git fetch failed" in str(refused.value) and token not in str(refused.value)
    assert not list(tmp_path.glob("**/askpass.sh"))  # the helper that hands git the token is gone
