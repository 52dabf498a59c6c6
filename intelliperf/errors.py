"""The exception tree. Every error a user can cause or meet has its own class and exit code.

    IntelliPerfError                      exit 1
    ├── SpecError                         exit 2   malformed job spec or option
    ├── NoGpuError                        exit 3   no NVIDIA GPU / driver visible
    ├── ToolMissingError                  exit 4   nvdisasm, nvcc or a compiler is not installed
    ├── BuildError                        exit 5   the user's build command failed
    ├── AppError                          exit 6   the application is missing, crashed or timed out
    ├── KernelNotFoundError               exit 7   -k/--kernel matched no launched kernel
    ├── NoLineInfoError                   exit 8   the kernel was built without -lineinfo
    ├── ProfileError                      exit 9   the tracer or the counter pass failed on a running program
    ├── NativeBuildError                  exit 10  the Accordo capture library failed to compile
    ├── ValidationError                   exit 11  Accordo could not judge (not: the candidate was wrong)
    ├── LlmError                          exit 12  no LLM key, or the provider refused or cannot be reached
    └── SubmitError                       exit 13  the IntelliPerf service could not be reached or refused

The CLI prints ``str(error)`` and exits with ``error.exit_code``; no traceback reaches the user.
"""

from __future__ import annotations

__all__ = [
    "OUTCOME_BY_EXIT_CODE",
    "AppError",
    "BuildError",
    "IntelliPerfError",
    "KernelNotFoundError",
    "NativeBuildError",
    "NoGpuError",
    "NoLineInfoError",
    "ProfileError",
    "SpecError",
    "SubmitError",
    "ToolMissingError",
    "ValidationError",
    "plain_message",
]


class IntelliPerfError(Exception):
    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None, log_tail: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.log_tail = log_tail

    def __str__(self) -> str:
        parts = [self.message]
        if self.log_tail:
            parts.append("--- last output ---\n" + self.log_tail.rstrip())
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)


class SpecError(IntelliPerfError):
    exit_code = 2


class NoGpuError(IntelliPerfError):
    exit_code = 3


class ToolMissingError(IntelliPerfError):
    exit_code = 4


class BuildError(IntelliPerfError):
    exit_code = 5


class AppError(IntelliPerfError):
    exit_code = 6


class KernelNotFoundError(IntelliPerfError):
    exit_code = 7


class NoLineInfoError(IntelliPerfError):
    exit_code = 8


class ProfileError(IntelliPerfError):
    exit_code = 9


class NativeBuildError(IntelliPerfError):
    exit_code = 10


class ValidationError(IntelliPerfError):
    exit_code = 11


class LlmError(IntelliPerfError):
    """No key, an endpoint that refuses it or cannot be reached."""

    exit_code = 12


class SubmitError(IntelliPerfError):
    """The IntelliPerf service (``intelliperf submit``) could not be reached, or refused the request."""

    exit_code = 13


OUTCOME_BY_EXIT_CODE = {
    error.exit_code: outcome
    for error, outcome in (
        (SpecError, "bad_spec"),
        (NoGpuError, "no_gpu"),
        (ToolMissingError, "tool_missing"),
        (BuildError, "build_failed"),
        (AppError, "app_failed"),
        (KernelNotFoundError, "kernel_not_found"),
        (NoLineInfoError, "no_line_info"),
        (ProfileError, "profiler_failed"),
        (NativeBuildError, "native_build_failed"),
        (ValidationError, "validation_error"),
        (LlmError, "llm_error"),
    )
}
"""The outcome a service job records when its engine exits with each code: the worker writes it, and
``intelliperf submit`` exits with the code again."""


def plain_message(message: str) -> str:
    """A pydantic error's message without the "Value error, " or "Assertion failed, " it puts before the
    text a validator raised: what the user reads is the rule, not the exception's class."""
    return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")


def tail(text: str | bytes | None, lines: int = 25) -> str:
    """The last lines of a process's output, decoded leniently, for error messages."""
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])
