"""``litellm:MODEL``: one clear line when the optional extra is missing; with a stand-in ``litellm``
module (the real one is not installed here), the call's arguments, the answer read as OpenAI's, and
LiteLLM's errors mapped onto the limiter's kinds."""

from __future__ import annotations

import sys
import types

import pytest

from assay.errors import AssayError
from assay.models import ModelCallError, resolve
from tests.helpers.fake_openai_server import chat_json


def test_without_litellm_the_spec_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "litellm", None)      # import litellm -> ImportError
    with pytest.raises(AssayError, match=r"litellm is not installed: pip install 'assay\[litellm\]'"):
        resolve("litellm:mistral/mistral-small", cache=None)


class RateLimitError(Exception):
    status_code = 429

    def __init__(self, msg, headers):
        super().__init__(msg)
        self.response = types.SimpleNamespace(headers=headers)


class APIConnectionError(Exception):
    pass


@pytest.fixture
def stand_in(monkeypatch):
    calls, script = [], []

    async def acompletion(**kw):
        calls.append(kw)
        if script:
            raise script.pop(0)
        return types.SimpleNamespace(model_dump=lambda: chat_json('{"score": 4}', model="mistral-small",
                                                                 usage=(12, 3)))

    monkeypatch.setitem(sys.modules, "litellm", types.SimpleNamespace(acompletion=acompletion))
    return calls, script


async def test_a_call_and_its_errors(stand_in):
    calls, script = stand_in
    lm = resolve("litellm:mistral/mistral-small", cache=None)
    g = await lm.model.generate([{"role": "user", "content": "Rate in JSON"}], max_tokens=9, logprobs=True,
                                response_format={"type": "json_object"})
    assert (g.text, g.usage.input_tokens, g.usage.output_tokens) == ('{"score": 4}', 12, 3)
    assert calls[0] == {"model": "mistral/mistral-small", "messages": [{"role": "user", "content": "Rate in JSON"}],
                        "num_retries": 0, "drop_params": True, "timeout": 120.0, "max_tokens": 9, "temperature": 0.0,
                        "response_format": {"type": "json_object"}, "logprobs": True, "top_logprobs": 5}
    script.append(RateLimitError("litellm.RateLimitError: MistralException - slow down", {"Retry-After": "7"}))
    with pytest.raises(ModelCallError) as ei:
        await lm.model.generate([{"role": "user", "content": "x"}])
    assert (ei.value.kind, ei.value.retry_after, ei.value.retryable) == ("rate_limit", 7.0, True)
    script.append(APIConnectionError("litellm.APIConnectionError: refused"))
    with pytest.raises(ModelCallError) as ei:
        await lm.model.generate([{"role": "user", "content": "x"}])
    assert ei.value.kind == "connection" and ei.value.retryable
    with pytest.raises(ModelCallError, match=r"litellm:mistral/mistral-small \(LiteLLM\) gives no next-token"):
        await lm.model.distribution([{"role": "user", "content": "x"}], ["1", "2"])
