"""The language model behind the optimization loop: a ``dspy.LM`` (LiteLLM underneath, so any provider
or an OpenAI-compatible ``api_base``), its key from the environment, and a credential check that runs
before any expensive profiling.

The key is read from ``LlmSettings.key_env`` (default ``LLM_GATEWAY_KEY``); without it LiteLLM falls
back to the provider's own variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ...). The key is never
logged or put in a report; errors name the variable, not its value.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import httpx

from intelliperf.contract import LlmSettings
from intelliperf.errors import LlmError

__all__ = ["LlmError", "LlmUsage", "check_credentials", "key_of", "make_lm", "usage_of_last_call"]


@dataclass(frozen=True)
class LlmUsage:
    tokens_in: int | None
    tokens_out: int | None


def key_of(settings: LlmSettings) -> str | None:
    return next((os.environ[name] for name in settings.key_variables if os.environ.get(name)), None)


def _key_hint(settings: LlmSettings) -> str:
    return " or ".join(f"${name}" for name in settings.key_variables)


def make_lm(settings: LlmSettings) -> Any:
    """A ``dspy.LM`` for ``settings`` (no disk cache: a rerun must ask again). Raises LlmError when no key
    is set (a local ``api_base`` still needs one; any value works for servers that ignore it)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price-list download at import
    import dspy

    key = key_of(settings)
    if key is None:
        raise LlmError(
            f"no key for the LLM provider: set {_key_hint(settings)}",
            hint="for a local server that ignores keys, any value works",
        )
    return dspy.LM(
        settings.litellm_model,
        api_base=settings.api_base,
        api_key=key,
        temperature=settings.temperature,
        timeout=settings.timeout_s,
        num_retries=settings.max_retries,
        cache=False,
        max_tokens=16000,
    )


def check_credentials(settings: LlmSettings, *, timeout_s: float = 10.0) -> None:
    """Fail fast, before profiling: the key is set and, for an ``api_base``, the endpoint accepts it
    (``GET {api_base}/models``). Hosted providers are not called here; a wrong key there shows on the first
    attempt."""
    key = key_of(settings)
    if key is None:
        raise LlmError(f"no key for the LLM provider: set {_key_hint(settings)}")
    if settings.api_base is None:
        return
    url = settings.api_base.rstrip("/") + "/models"
    try:
        response = httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise LlmError(f"cannot reach the LLM endpoint {settings.api_base}: {type(exc).__name__}") from None
    if response.status_code in (401, 403):
        raise LlmError(f"the LLM endpoint {settings.api_base} rejected the key in {_key_hint(settings)}")
    if response.status_code >= 500:
        raise LlmError(f"the LLM endpoint {settings.api_base} answered {response.status_code}")


def usage_of_last_call(lm: Any) -> LlmUsage:
    """Token counts of the LM's last call, from its history (None where the provider gave none)."""
    history = getattr(lm, "history", None) or []
    if not history:
        return LlmUsage(None, None)
    usage = history[-1].get("usage") or {}
    return LlmUsage(usage.get("prompt_tokens"), usage.get("completion_tokens"))
