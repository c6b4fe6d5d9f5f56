"""Log-likelihood scoring and raw completion on the real embedded model (Gemma 3 270M): in process
(:class:`~assay.models.local.LlamaCppModel`) and through llama-cpp-python's server on loopback
(:class:`~assay.models.openai_compat.OpenAICompat` over ``/v1/completions`` with ``echo``); the
scripted fake endpoint only for a server that echoes no prompt log-probabilities."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed: run "
                    "scripts/install_local_backend.sh .venv/bin/python (make test does)")

from assay.models.base import Generation, ModelCallError, gives_logliks, loglik_generation, read_logliks  # noqa: E402
from assay.models.cache import CallCache  # noqa: E402
from assay.models.embedded import embedded_judge  # noqa: E402
from assay.models.limited import LimitedModel  # noqa: E402
from assay.models.local import LlamaCppModel  # noqa: E402
from assay.models.openai_compat import OpenAICompat  # noqa: E402

ALIAS = "gemma-3-270m"          # the llama_server fixture's model alias
CAPITAL = "The capital of France is"
CASES = [
    (CAPITAL, [" Paris", " banana", " the city of Paris"]),
    ("Question: What is two plus two?\nAnswer:", [" 4", " five", " 22"]),
    ("The capital of France is ", ["Paris", "banana"]),   # trailing space: moved to the continuation
]


@pytest.fixture(scope="module")
def local() -> LlamaCppModel:
    model = embedded_judge()
    assert isinstance(model, LlamaCppModel)    # the embedded judge is the bare in-process model
    return model


@pytest.fixture
async def server(llama_server: str) -> Any:
    model = OpenAICompat.endpoint(llama_server, ALIAS)
    yield model
    await model.aclose()


def test_loglik_generation_round_trips() -> None:
    gen = loglik_generation([-1.5, -20.0], [True, False], prompt_tokens=12, model="m")
    assert read_logliks(gen) == ([-1.5, -20.0], [True, False])
    assert gen.usage.input_tokens == 12 and gen.usage.output_tokens == 0
    with pytest.raises(ValueError):
        loglik_generation([-1.0], [True, False])
    with pytest.raises(ModelCallError):
        read_logliks(Generation(text="not json"))


def test_gives_logliks(local: LlamaCppModel) -> None:
    assert gives_logliks(local) and gives_logliks(LimitedModel(local))
    endpoint = OpenAICompat.endpoint("http://127.0.0.1:9/v1", "m")
    assert gives_logliks(endpoint)                 # unknown until tried
    endpoint.logliks_supported = False
    assert not gives_logliks(endpoint) and not LimitedModel(endpoint).gives_logliks

    class ChatOnly:
        name = "chat-only"

        async def generate(self, messages: Any, **kw: Any) -> Any: ...

    assert not gives_logliks(ChatOnly()) and not LimitedModel(ChatOnly()).gives_logliks


async def test_local_likely_continuation_scores_higher(local: LlamaCppModel) -> None:
    gen = await local.loglikelihood(CAPITAL, [" Paris", " banana"])
    (paris, banana), greedy = read_logliks(gen)
    assert paris > banana + 5.0
    assert paris < 0.0 and banana < 0.0 and len(greedy) == 2
    assert gen.usage.input_tokens > 0 and gen.usage.output_tokens == 0 and gen.model == local.name
    # the trailing-space context is scored as the context without it + a space-led continuation
    again = await local.loglikelihood(CAPITAL + " ", ["Paris", "banana"])
    assert read_logliks(again)[0] == pytest.approx([paris, banana], abs=1e-9)


async def test_local_scores_do_not_depend_on_the_other_continuations(local: LlamaCppModel) -> None:
    both, _ = read_logliks(await local.loglikelihood(CAPITAL, [" banana", " Paris", " the city of Paris"]))
    for i, c in enumerate([" banana", " Paris", " the city of Paris"]):
        alone, _ = read_logliks(await local.loglikelihood(CAPITAL, [c]))
        assert alone[0] == pytest.approx(both[i], abs=1e-6)


async def test_local_greedy_flags_agree_with_complete(local: LlamaCppModel) -> None:
    out = await local.complete(CAPITAL, max_tokens=3)
    assert out.finish_reason == "length" and out.usage.output_tokens == 3 and out.text
    (ll,), (greedy,) = read_logliks(await local.loglikelihood(CAPITAL, [out.text]))
    assert greedy is True and ll < 0.0
    (_, ), (banana_greedy,) = read_logliks(await local.loglikelihood(CAPITAL, [" banana"]))
    assert banana_greedy is False


async def test_local_complete_honours_stop_and_max_tokens(local: LlamaCppModel) -> None:
    full = await local.complete("1, 2, 3, 4,", max_tokens=12)
    assert " 7" in full.text          # the model counts on: the stop string below is really reached
    cut = await local.complete("1, 2, 3, 4,", max_tokens=12, stop=[" 7"])
    assert cut.finish_reason == "stop" and " 7" not in cut.text
    assert full.text.startswith(cut.text) and cut.text.startswith(" 5")
    short = await local.complete("1, 2, 3, 4,", max_tokens=2)
    assert short.finish_reason == "length" and short.usage.output_tokens == 2
    with pytest.raises(ValueError):
        await local.complete("x", max_tokens=0)
    with pytest.raises(ValueError):
        await local.loglikelihood("x", [""])


async def test_server_agrees_with_in_process(local: LlamaCppModel, server: OpenAICompat) -> None:
    """The same GGUF in both: llama-cpp-python adds BOS to the raw prompt as assay does, and the
    server's echo drops it, so the tokens match. The numbers differ only by how llama.cpp groups
    tokens into batches (the server evaluates the whole text at once; in process each continuation
    token is evaluated after the context, one at a time)."""
    for ctx, conts in CASES:
        here = await local.loglikelihood(ctx, conts)
        there = await server.loglikelihood(ctx, conts)
        lh, gh = read_logliks(here)
        lt, gt = read_logliks(there)
        assert lt == pytest.approx(lh, abs=0.25), (ctx, conts)
        assert there.usage.input_tokens == here.usage.input_tokens, (ctx, conts)
        # the ranking of the choices is what multiple choice reads: it is the same
        assert sorted(range(len(conts)), key=lambda i: lh[i]) == sorted(range(len(conts)), key=lambda i: lt[i])
    assert server.logliks_supported is True and server.gives_logliks
    (paris, banana), _ = read_logliks(await server.loglikelihood(CAPITAL, [" Paris", " banana"]))
    assert paris > banana + 5.0


async def test_server_greedy_flags_agree_with_its_complete(server: OpenAICompat) -> None:
    out = await server.complete(CAPITAL, max_tokens=3)
    assert out.finish_reason == "length" and out.usage.output_tokens == 3 and out.text
    _, (greedy,) = read_logliks(await server.loglikelihood(CAPITAL, [out.text]))
    assert greedy is True
    _, (banana_greedy,) = read_logliks(await server.loglikelihood(CAPITAL, [" banana"]))
    assert banana_greedy is False


async def test_server_complete_honours_stop_and_max_tokens(server: OpenAICompat) -> None:
    full = await server.complete("1, 2, 3, 4,", max_tokens=12)
    assert " 7" in full.text
    cut = await server.complete("1, 2, 3, 4,", max_tokens=12, stop=[" 7"])
    assert cut.finish_reason == "stop" and " 7" not in cut.text and full.text.startswith(cut.text)
    short = await server.complete("1, 2, 3, 4,", max_tokens=2)
    assert short.finish_reason == "length" and short.usage.output_tokens == 2


async def test_call_cache_answers_a_repeated_loglikelihood(local: LlamaCppModel, tmp_path: Path) -> None:
    cache = CallCache(tmp_path / "calls.sqlite")
    model = LimitedModel(local, cache=cache)
    first = await model.loglikelihood(CAPITAL, [" Paris", " banana"])
    assert not first.cached and model.stats.calls == 1 and model.stats.cache_hits == 0
    assert model.limiter.stats.requests == 1 and model.stats.prompt_tokens == first.usage.input_tokens > 0
    again = await model.loglikelihood(CAPITAL, [" Paris", " banana"])
    assert again.cached and read_logliks(again) == read_logliks(first)
    assert model.stats.calls == 2 and model.stats.cache_hits == 1 and model.limiter.stats.requests == 1
    # other continuations, or a completion of the same text, are other calls
    await model.loglikelihood(CAPITAL, [" Paris"])
    done = await model.complete(CAPITAL, max_tokens=2)
    assert model.limiter.stats.requests == 3 and done.usage.output_tokens == 2
    assert (await model.complete(CAPITAL, max_tokens=2)).cached and model.limiter.stats.requests == 3
    cache.close()


async def test_server_without_prompt_logprobs_gives_the_clear_error(fake: Any) -> None:
    """A /completions that ignores ``echo`` and ``logprobs`` (as chat-first servers do)."""
    fake.default = {"json": {"id": "cmpl", "object": "text_completion", "model": "fake-judge",
                             "choices": [{"index": 0, "text": " Paris", "logprobs": None, "finish_reason": "length"}],
                             "usage": {"prompt_tokens": 6, "completion_tokens": 1, "total_tokens": 7}}}
    model = OpenAICompat.endpoint(fake.base_url, "fake-judge")
    limited = LimitedModel(model)
    with pytest.raises(ModelCallError) as err:
        await limited.loglikelihood(CAPITAL, [" Paris", " banana"])
    assert err.value.kind == "bad_request" and not err.value.retryable
    assert "returns no prompt log-probabilities" in str(err.value) and "falls back to generation" in str(err.value)
    sent = fake.requests[-1]
    assert sent["path"] == "/v1/completions"
    assert sent["body"]["echo"] is True and sent["body"]["logprobs"] == 1 and sent["body"]["max_tokens"] == 1
    assert sent["body"]["prompt"] == CAPITAL + " Paris"
    assert limited.limiter.stats.requests == 1          # not retried
    assert model.logliks_supported is False and not limited.gives_logliks
    n = len(fake.requests)
    with pytest.raises(ModelCallError, match="returns no prompt log-probabilities"):
        await limited.loglikelihood(CAPITAL, [" Paris"])
    assert len(fake.requests) == n                      # known now: no second request
    # raw completion still works on such a server
    out = await model.complete(CAPITAL, max_tokens=1, stop=["\n"])
    assert out.text == " Paris" and fake.requests[-1]["body"]["stop"] == ["\n"]
    await model.aclose()


async def test_server_refusing_echo_with_an_error_gives_the_clear_error(fake: Any) -> None:
    fake.push({"status": 500, "json": {"error": {"message": "logprobs is not supported for models created "
                                                            "with logits_all=False"}}})
    model = OpenAICompat.endpoint(fake.base_url, "fake-judge")
    with pytest.raises(ModelCallError, match="returns no prompt log-probabilities") as err:
        await LimitedModel(model).loglikelihood(CAPITAL, [" Paris"])
    assert err.value.kind == "bad_request" and err.value.status == 500 and len(fake.requests) == 1
    await model.aclose()
