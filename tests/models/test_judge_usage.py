"""Judge usage and cost: every call counted once in LimitedModel.stats, per-run deltas in the
result, prices from the table or an override, None (not 0) when unknown."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from assay.errors import AssayError
from assay.models import (
    CallCache,
    Generation,
    LimitedModel,
    Limiter,
    OpenAICompat,
    RetryPolicy,
    TokenUsage,
    build_judge,
    distribution_generation,
    judge_usage,
    lookup_price,
    parse_price,
)
from assay.models.base import ModelCallError
from assay.models.pricing import judge_price

MSG = [{"role": "user", "content": "Rate this."}]


def _limited(fake: Any, cache: Any = None, **kw: Any) -> LimitedModel:
    model = OpenAICompat.endpoint(fake.base_url, "fake-judge")
    limiter = Limiter(concurrency=4, retry=RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.02))
    return LimitedModel(model, limiter, cache, **kw)


class DistBackend:
    """A local-model stand-in: next-token distributions and generated text, no per-token charge."""

    name = "stub:local"
    price = (0.0, 0.0)

    def __init__(self) -> None:
        self.dist_calls = 0
        self.gen_calls = 0

    async def distribution(self, messages, candidates, *, assistant_prefix=None):
        self.dist_calls += 1
        await asyncio.sleep(0.01)
        return distribution_generation({c: 1.0 / len(candidates) for c in candidates}, 0.8, prompt_tokens=250,
                                       model=self.name)

    async def generate(self, messages, **kw):
        self.gen_calls += 1
        return Generation(text='{"reason": "ok", "score": 4}', usage=TokenUsage(200, 15), model=self.name)


# -- counting -------------------------------------------------------------------------------------------

async def test_generated_calls_count_tokens_and_cache_hits_cost_nothing(fake, tmp_path):
    cache = CallCache(tmp_path / "c.sqlite")
    j = _limited(fake, cache)
    await j.generate(MSG, max_tokens=20)
    await j.generate(MSG, max_tokens=20)            # a cache hit
    await j.generate(MSG + [{"role": "user", "content": "again"}], max_tokens=20)
    s = j.stats.snapshot()
    assert s["calls"] == 3 and s["cache_hits"] == 1 and s["errors"] == 0
    assert (s["prompt_tokens"], s["completion_tokens"]) == (200, 20)   # the fake reports 100 + 10 a call
    assert len(fake.chat_requests) == 2
    await j.aclose()
    cache.close()


async def test_failed_calls_are_errors_and_cost_nothing(fake):
    j = _limited(fake)
    fake.push({"status": 500, "json": {"error": {"message": "boom"}}},
              {"status": 500, "json": {"error": {"message": "boom"}}})
    with pytest.raises(ModelCallError):
        await j.generate(MSG)
    s = j.stats.snapshot()
    assert (s["calls"], s["errors"], s["prompt_tokens"], s["completion_tokens"]) == (1, 1, 0, 0)
    await j.aclose()


async def test_probability_scoring_is_counted_in_the_same_place(tmp_path):
    backend = DistBackend()
    cache = CallCache(tmp_path / "c.sqlite")
    j = LimitedModel(backend, cache=cache)
    g1 = await j.distribution(MSG, ["1", "2", "3", "4", "5"], assistant_prefix='{"score": ')
    g2 = await j.distribution(MSG, ["1", "2", "3", "4", "5"], assistant_prefix='{"score": ')
    assert g1.cached is False and g2.cached is True and g1.text == g2.text
    assert g1.usage.input_tokens == 250 and g1.usage.output_tokens == 0
    await j.generate(MSG, max_tokens=30)
    s = j.stats.snapshot()
    assert backend.dist_calls == 1 and backend.gen_calls == 1
    assert s == {"calls": 3, "cache_hits": 1, "shared": 0, "errors": 0, "prompt_tokens": 450,
                 "completion_tokens": 15, "distributions": 2}
    cache.close()


async def test_identical_calls_in_flight_are_made_once_and_counted_as_shared(tmp_path):
    backend = DistBackend()
    j = LimitedModel(backend, cache=CallCache(tmp_path / "c.sqlite"))
    await asyncio.gather(*(j.distribution(MSG, ["yes", "no"]) for _ in range(3)))
    s = j.stats.snapshot()
    assert backend.dist_calls == 1 and s["calls"] == 3 and s["shared"] == 2 and s["prompt_tokens"] == 250


async def test_a_backend_without_distributions_says_so(fake):
    j = _limited(fake)
    with pytest.raises(Exception, match="no next-token distributions"):
        await j.distribution(MSG, ["yes", "no"])
    assert j.stats.calls == 0 and len(fake.chat_requests) == 0   # a misuse, not a judge call
    await j.aclose()


def test_distributions_are_part_of_the_chat_model_contract():
    from assay.models import gives_distributions, read_distribution

    gen = distribution_generation({"yes": 0.25, "no": 0.75}, 0.5, prompt_tokens=12, model="m")
    assert read_distribution(gen) == ({"yes": 0.25, "no": 0.75}, 0.5)
    assert (gen.usage.input_tokens, gen.usage.output_tokens, gen.model) == (12, 0, "m")
    assert gives_distributions(DistBackend()) and gives_distributions(LimitedModel(DistBackend()))
    endpoint = OpenAICompat.endpoint("http://127.0.0.1:9/v1", "m")
    assert not gives_distributions(endpoint) and not gives_distributions(LimitedModel(endpoint))

    class GenerateOnly:
        name = "stub:text"

        async def generate(self, messages, **kw):
            return Generation(text="")

    assert not gives_distributions(GenerateOnly())


async def test_an_openai_compatible_backend_says_it_gives_no_distributions():
    endpoint = OpenAICompat.endpoint("http://127.0.0.1:9/v1", "m")
    with pytest.raises(Exception, match="no next-token distributions"):
        await endpoint.distribution(MSG, ["yes", "no"])
    await endpoint.aclose()


# -- prices ---------------------------------------------------------------------------------------------

def test_price_table_lookup():
    assert lookup_price("gpt-4o-mini") == (0.15, 0.60)
    assert lookup_price("gpt-4o-mini-2024-07-18") == (0.15, 0.60)   # a dated snapshot
    assert lookup_price("gpt-4-0613") == (30.0, 60.0)
    assert lookup_price("gpt-4o") == (2.50, 10.00)
    assert lookup_price("gpt-4o-audio-preview") is None              # not a snapshot of gpt-4o
    assert lookup_price("qwen2.5-7b") is None and lookup_price(None) is None


def test_parse_price_forms_and_errors():
    assert parse_price("0.15,0.60") == (0.15, 0.60)
    assert parse_price((1, 2)) == (1.0, 2.0)
    assert parse_price({"input": 3, "output": 4}) == (3.0, 4.0)
    for bad in ("1", "a,b", "1,2,3", (-1, 2)):
        with pytest.raises(AssayError, match="USD per 1M|non-negative"):
            parse_price(bad)


def test_price_sources_in_order(monkeypatch, fake):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    j = build_judge("openai:gpt-4o-mini", cache=None)
    assert judge_price(j) == ((0.15, 0.60), "price table (2025-08)")
    monkeypatch.setenv("ASSAY_JUDGE_PRICE", "1,2")
    assert judge_price(j) == ((1.0, 2.0), "$ASSAY_JUDGE_PRICE")
    assert judge_price(j, {"judge_price": "3,4"}) == ((3.0, 4.0), "option judge_price")
    j.price = (5.0, 6.0)
    assert judge_price(j)[0] == (5.0, 6.0)                       # set on the judge: beats the environment
    monkeypatch.delenv("ASSAY_JUDGE_PRICE")
    # a self-hosted endpoint has no known price: None, not 0
    h = build_judge(f"{fake.base_url}#fake-judge", cache=None)
    assert judge_price(h) == (None, "unknown")
    assert judge_price(build_judge(f"{fake.base_url}#fake-judge", cache=None, price="0.5,1.5"))[0] == (0.5, 1.5)
    # an in-process model costs nothing
    assert judge_price(LimitedModel(DistBackend()))[0] == (0.0, 0.0)


def test_azure_deployment_named_after_a_model_is_priced(monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://example.openai.azure.com")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "k")
    assert judge_price(build_judge("azure:gpt-4o", cache=None))[0] == (2.50, 10.00)
    assert judge_price(build_judge("azure:my-deployment", cache=None))[0] is None


async def test_judge_usage_cost_and_delta(fake):
    j = _limited(fake, price=(2.0, 8.0))
    before = j.stats.snapshot()
    await j.generate(MSG)
    u = judge_usage(j, before)
    assert (u["calls"], u["prompt_tokens"], u["completion_tokens"]) == (1, 100, 10)
    assert u["cost_usd"] == pytest.approx((100 * 2.0 + 10 * 8.0) / 1e6)
    mid = j.stats.snapshot()
    await j.generate(MSG + [{"role": "user", "content": "2"}])
    await j.generate(MSG + [{"role": "user", "content": "3"}])
    u2 = judge_usage(j, mid)
    assert (u2["calls"], u2["prompt_tokens"]) == (2, 200)
    j.price = None
    assert judge_usage(j, mid)["cost_usd"] is None
    await j.aclose()


# -- through evaluate() and the CLI summary -----------------------------------------------------------------

ROWS = [{"query": f"What is {i}?", "response": f"It is {i}.", "context": f"{i} is a number."} for i in range(4)]


def _eval(judge: Any, **kw: Any) -> Any:
    from assay import evaluate

    return evaluate(ROWS, metrics="groundedness", judge=judge, **kw)


def test_run_reports_per_run_judge_usage_for_a_probability_scored_judge(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_STORE", "off")
    backend = DistBackend()
    backend.smoke_test = True   # scored from next-token probabilities, like the embedded judge
    j = LimitedModel(backend, cache=CallCache(tmp_path / "c.sqlite"))
    r1 = _eval(j)
    u = r1.run["judge_usage"]
    assert backend.dist_calls == 4 and backend.gen_calls == 0
    assert {k: u[k] for k in ("calls", "cache_hits", "errors", "prompt_tokens", "completion_tokens")} == \
        {"calls": 4, "cache_hits": 0, "errors": 0, "prompt_tokens": 1000, "completion_tokens": 0}
    assert u["distributions"] == 4 and u["cost_usd"] == 0.0
    # the same LimitedModel reused: the second run reports its own calls, all from the cache
    r2 = _eval(j)
    u2 = r2.run["judge_usage"]
    assert (u2["calls"], u2["cache_hits"], u2["prompt_tokens"], u2["cost_usd"]) == (4, 4, 0, 0.0)
    assert r2.run["judge_calls"]["calls"] == 4 and j.stats.calls == 8


def test_run_cost_from_an_option_and_unknown_cost_is_none(fake, monkeypatch):
    monkeypatch.setenv("ASSAY_STORE", "off")
    monkeypatch.delenv("ASSAY_JUDGE_PRICE", raising=False)
    j = _limited(fake)
    r = _eval(j)
    u = r.run["judge_usage"]
    assert (u["calls"], u["prompt_tokens"], u["completion_tokens"]) == (4, 400, 40)
    assert u["cost_usd"] is None and u["price_source"] == "unknown"
    j2 = _limited(fake)
    r = _eval(j2, options={"judge_price": "1.0,4.0"})
    assert r.run["judge_usage"]["cost_usd"] == pytest.approx((400 * 1.0 + 40 * 4.0) / 1e6)
    with pytest.raises(AssayError, match="judge_price"):
        _eval(_limited(fake), options={"judge_price": "cheap"})


def test_cli_summary_prints_judge_usage(fake, monkeypatch, capsys):
    from assay.cli import eval as cli

    monkeypatch.setenv("ASSAY_STORE", "off")
    r = _eval(_limited(fake), options={"judge_price": "1.0,4.0"})
    cli.print_summary(r)
    out = capsys.readouterr().out
    assert "4 calls, 0 from cache, 0 errors" in out and "400 prompt + 40 completion tokens" in out
    assert "$0.0006" in out
    r = _eval(_limited(fake))
    cli.print_summary(r)
    assert "cost unknown" in capsys.readouterr().out
