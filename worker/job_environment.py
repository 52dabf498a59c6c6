"""The environment a job's engine starts with: built from an allow-list, never inherited whole.

A job is untrusted code: its build and run commands are the submitter's, and they see every variable the
engine has. So the engine gets what finding a GPU, a compiler and a locale needs, the engine's own settings,
a home and temporary folder of its own, and the job's own LLM key when the job calls the LLM; never the
worker's token, broker URL, GitHub token, LLM key or anything else the worker was started with.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from intelliperf.contract import JobSpec
from intelliperf.settings import Settings

__all__ = [
    "ALLOWED_NAMES",
    "ALLOWED_PREFIXES",
    "engine_settings_names",
    "host_environment",
    "llm_key_environment",
]

ALLOWED_NAMES = frozenset(
    {
        "PATH",
        "LD_LIBRARY_PATH",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        # the LLM may be reached through the node's proxy, with the node's certificate authorities
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
    }
)
ALLOWED_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "ROCR_", "HIP_", "ROCM_", "HSA_", "TRITON_")
"""Locale, and the GPU runtimes' own variables (visible devices, the toolkit's paths, Triton's options)."""


def engine_settings_names() -> frozenset[str]:
    """The variables the engine's settings (intelliperf.settings) read: the operator's tuning of it."""
    prefix = str(Settings.model_config.get("env_prefix", ""))
    names: set[str] = set()
    for name, field in Settings.model_fields.items():
        names.add(f"{prefix}{name}".upper())
        alias = field.validation_alias
        choices = getattr(alias, "choices", [alias] if isinstance(alias, str) else [])
        names.update(choice.upper() for choice in choices if isinstance(choice, str))
    return frozenset(names)


def host_environment(environ: Mapping[str, str], home: Path, tmp: Path) -> dict[str, str]:
    """What a job run on this host (no container) gets of ``environ``, with ``home`` and ``tmp`` its own."""
    allowed = ALLOWED_NAMES | engine_settings_names()
    env = {k: v for k, v in environ.items() if k in allowed or k.startswith(ALLOWED_PREFIXES)}
    env |= {
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "PYTHONUNBUFFERED": "1",
    }
    return env


def llm_key_environment(spec: JobSpec, job_env: Mapping[str, str] | None) -> dict[str, str]:
    """The job's own LLM key (sent with the job, under its spec's ``llm.key_env``), for a job that calls
    the LLM; nothing for a diagnosis. The worker's own keys never reach a job."""
    if not spec.optimizes or not job_env:
        return {}
    return {name: value for name, value in job_env.items() if name == spec.llm.key_env and value}
