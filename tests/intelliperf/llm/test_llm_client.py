"""The LLM client against a scripted OpenAI-compatible server on 127.0.0.1 (real HTTP, real DSPy/LiteLLM)."""

from __future__ import annotations

import time

import dspy
import pytest

from intelliperf.contract import LlmSettings
from intelliperf.errors import LlmError
from intelliperf.llm.client import check_credentials, make_lm, usage_of_last_call
from tests.support.parallel import free_port
from tests.support.scripted_llm import Failure, ScriptedLLM, dspy_reply

KEY = "sk-scripted-0123456789"


class Echo(dspy.Signature):
    """Answer the question."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


def settings(api_base: str | None, **kw) -> LlmSettings:
    return LlmSettings(model="scripted", provider="openai", api_base=api_base, **kw)


def test_missing_key_names_the_variables_not_a_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLM_GATEWAY_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LlmError, match=r"set \$LLM_GATEWAY_KEY or \$OPENAI_API_KEY"):
        check_credentials(settings(None))
    with pytest.raises(LlmError):
        make_lm(settings(None))


def test_credentials_are_checked_against_the_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedLLM([], key=KEY) as server:
        monkeypatch.setenv("LLM_GATEWAY_KEY", KEY)
        check_credentials(settings(server.api_base))
        monkeypatch.setenv("LLM_GATEWAY_KEY", "sk-wrong")
        with pytest.raises(LlmError, match="rejected the key in") as caught:
            check_credentials(settings(server.api_base))
        assert "sk-wrong" not in str(caught.value)
    with pytest.raises(LlmError, match="cannot reach"):
        check_credentials(settings(f"http://127.0.0.1:{free_port()}/v1"))


def test_provider_variable_is_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLM_GATEWAY_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with ScriptedLLM([], key=KEY) as server:
        check_credentials(settings(server.api_base))


def test_a_dspy_call_goes_through_with_token_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_GATEWAY_KEY", KEY)
    with ScriptedLLM([dspy_reply(answer="forty-two")], key=KEY) as server:
        lm = make_lm(settings(server.api_base, max_retries=0))
        with dspy.context(lm=lm, adapter=dspy.ChatAdapter(use_json_adapter_fallback=False)):
            result = dspy.Predict(Echo)(question="What is six times seven?")
        assert result.answer == "forty-two"
        [request] = server.requests
        assert request["model"] == "scripted"
        assert "What is six times seven?" in request["messages"][-1]["content"]
        usage = usage_of_last_call(lm)
        assert usage.tokens_in and usage.tokens_in > 10 and usage.tokens_out and usage.tokens_out > 0


def test_transient_errors_are_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_GATEWAY_KEY", KEY)
    with ScriptedLLM([Failure(503), dspy_reply(answer="ok")], key=KEY) as server:
        lm = make_lm(settings(server.api_base, max_retries=2))
        started = time.monotonic()
        with dspy.context(lm=lm, adapter=dspy.ChatAdapter(use_json_adapter_fallback=False)):
            result = dspy.Predict(Echo)(question="again?")
        assert result.answer == "ok"
        assert len(server.requests) == 2
        assert time.monotonic() - started < 60
