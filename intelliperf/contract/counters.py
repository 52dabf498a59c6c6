"""A counter entry's format: one kernel's counters stored for reuse by content hash
(intelliperf.engine.counter_store writes and reads them), and the check of an entry's untrusted bytes, which
the engine makes before reusing one and the service before keeping one a job published
(service.counter_entries). The name of an entry is the sha256 of its key (``COUNTER_KEY``)."""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from intelliperf.contract.profile import KernelProfile
from intelliperf.contract.report import DeviceInfo

__all__ = [
    "COUNTER_KEY",
    "ENTRY_LIMIT_BYTES",
    "PROFILE",
    "STORE_FORMAT",
    "CounterKey",
    "StoredCounters",
    "entry_bytes",
    "entry_refusal",
    "read_entry",
    "refusal_reason",
]

COUNTER_KEY = r"^[0-9a-f]{64}$"
"""An entry's name: the sha256 of its ``CounterKey`` (the stem of its file's name)."""
STORE_FORMAT = 1
ENTRY_LIMIT_BYTES = 64 * 2**20
"""An entry larger than this is not read (a kernel's profile with its source is a few MiB at most)."""
PROFILE = TypeAdapter(KernelProfile)
"""What an entry's profile must validate as."""


class CounterKey(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal[1] = STORE_FORMAT
    vendor: str
    device: str
    arch: str
    kernel: str
    code_hash: str = Field(pattern=r"^[0-9a-f]{16}$")
    shape_hash: str = Field(pattern=r"^[0-9a-f]{16}$")
    quantities: tuple[str, ...]

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()


class StoredCounters(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key: CounterKey
    profile: dict[str, Any]
    source_files: dict[str, str] = Field(description="Workspace-relative path -> sha256 of its bytes")
    device: DeviceInfo
    commit: str | None
    measured_at: datetime
    counters_s: float = Field(ge=0)


def entry_bytes(path: Path) -> bytes:
    """The bytes of the entry file ``path``, refused (ValueError) before reading when it is over the limit;
    OSError where it cannot be read."""
    if path.stat().st_size > ENTRY_LIMIT_BYTES:
        raise ValueError(f"larger than {ENTRY_LIMIT_BYTES} bytes")
    return path.read_bytes()


def read_entry(data: bytes, digest: str) -> StoredCounters:
    """An entry read from untrusted bytes (``entry_bytes``) stored under the name ``digest``; ValueError (a
    pydantic ValidationError is one) where it is malformed, under another key's name, or its profile is not
    a profile."""
    entry = StoredCounters.model_validate_json(data)
    if entry.key.digest != digest:
        raise ValueError("its key is not the one its name says")
    PROFILE.validate_python(entry.profile)
    return entry


def entry_refusal(data: bytes, digest: str) -> str | None:
    """Why ``data`` cannot be kept as the entry named ``digest`` (over the limit, malformed, another key's,
    a profile that is none), None where it can."""
    if len(data) > ENTRY_LIMIT_BYTES:
        return f"larger than {ENTRY_LIMIT_BYTES} bytes"
    try:
        read_entry(data, digest)
    except ValueError as error:
        return refusal_reason(error)
    return None


def refusal_reason(error: Exception) -> str:
    """What is wrong, in a line: a validation error's first error and where (never the input's text)."""
    if isinstance(error, ValidationError):
        first = error.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "the entry"
        return f"{error.error_count()} validation error(s), the first at {where}: {first['msg']}"
    return str(error).splitlines()[0] if str(error) else type(error).__name__
