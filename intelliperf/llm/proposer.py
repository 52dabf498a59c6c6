"""Asking the model for a rewrite: one DSPy call per candidate, its reply and its token counts.

``Proposer`` is the seam the optimization loop talks to; ``DspyProposer`` is the real one (DSPy's
ChatAdapter over LiteLLM). A reply DSPy cannot parse is not an exception: it comes back with
``parse_error`` set and becomes a failed attempt whose reason goes back to the model. Failures of the
provider itself (after LiteLLM's retries) raise LlmError: the loop stops and keeps what it has.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from intelliperf.contract import LlmSettings
from intelliperf.errors import LlmError
from intelliperf.llm.client import key_of, make_lm, usage_of_last_call
from intelliperf.llm.prompts import signature_for

__all__ = ["DspyProposer", "Proposal", "ProposalRequest", "Proposer"]


@dataclass(frozen=True)
class ProposalRequest:
    """Everything the model is told, already rendered as text."""

    formula: str
    guidance: str
    gpu: str
    bottleneck: str
    source: str
    attempts: str


@dataclass(frozen=True)
class Proposal:
    edit: str  # the edit text (the whole reply when it could not be parsed)
    parse_error: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    seconds: float = 0.0


class Proposer(Protocol):
    def propose(self, request: ProposalRequest) -> Proposal: ...


class DspyProposer:
    def __init__(self, settings: LlmSettings) -> None:
        self.settings = settings
        self.lm = make_lm(settings)

    def propose(self, request: ProposalRequest) -> Proposal:
        import dspy
        from dspy.utils.exceptions import AdapterParseError

        predictor = dspy.Predict(signature_for(request.formula, request.guidance))
        adapter = dspy.ChatAdapter(use_json_adapter_fallback=False)
        started = time.perf_counter()
        try:
            with dspy.context(lm=self.lm, adapter=adapter):
                prediction = predictor(
                    gpu=request.gpu,
                    bottleneck=request.bottleneck,
                    source=request.source,
                    attempts=request.attempts,
                )
            edit, parse_error = str(prediction.edit), None
        except AdapterParseError as exc:
            edit = exc.lm_response or ""
            excerpt = " ".join(edit.split())[:200]
            parse_error = (
                "the reply was not in the required format: it must hold the edit as SEARCH/REPLACE blocks "
                f"under the output field's header; it began: {excerpt!r}"
            )
        except Exception as exc:  # LiteLLM's provider errors, after its own retries
            raise LlmError(self._describe(exc), hint=f"model {self.settings.litellm_model}") from None
        usage = usage_of_last_call(self.lm)
        return Proposal(
            edit=edit,
            parse_error=parse_error,
            tokens_in=usage.tokens_in,
            tokens_out=usage.tokens_out,
            seconds=time.perf_counter() - started,
        )

    def _describe(self, exc: Exception) -> str:
        message = str(exc).splitlines()[0] if str(exc) else ""
        key = key_of(self.settings)
        if key:
            message = message.replace(key, "***")
        return f"the LLM call failed ({type(exc).__name__}): {message[:300]}"
