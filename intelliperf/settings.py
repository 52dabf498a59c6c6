"""Settings from the environment (INTELLIPERF_*). One object, read once per process."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "get_settings"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTELLIPERF_", extra="ignore", env_ignore_empty=True)

    cuda_home: Path = Field(default=Path("/usr/local/cuda"), description="CUDA toolkit root")
    rocprofv3: str = Field(default="rocprofv3", description="ROCm's rocprofv3 CLI: a name on PATH or a path")
    work_dir: Path | None = Field(
        default=None, description="Where scratch workspaces go (default: system temp)"
    )
    keep_workspace: bool = Field(default=False, description="Keep scratch workspaces for debugging")
    counters_timeout_s: float = Field(
        default=900,
        gt=0,
        description="Limit on each run of the counter pass, seconds",
        validation_alias=AliasChoices("INTELLIPERF_COUNTERS_TIMEOUT_S", "INTELLIPERF_NCU_TIMEOUT_S"),
    )
    capture_budget_bytes: int | None = Field(
        default=None,
        gt=0,
        description="Bound on the buffer bytes one validation capture writes (unset: Accordo's 8 GiB); a "
        "program whose kernel reads more fails with a message saying so",
    )


@cache
def get_settings() -> Settings:
    return Settings()
