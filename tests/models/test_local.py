"""The in-process llama.cpp backend and the embedded judge, on the real model (no mocks).

The embedded Gemma 3 270M GGUF is loaded once per session. The module is skipped only when
llama-cpp-python is not importable (scripts/install_local_backend.sh installs it; CI runs it).
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed: run "
                    "scripts/install_local_backend.sh .venv/bin/python (make test does)")

from assay.errors import AssayError  # noqa: E402
from assay.judges import score_from_distribution  # noqa: E402
from assay.judges.parse import LogprobScore, Scale  # noqa: E402
from assay.models import build_judge, parse_judge_spec  # noqa: E402
from assay.models.base import ChatModel, ModelCallError, read_distribution  # noqa: E402
from assay.models.embedded import EMBEDDED_NAME, embedded_judge, embedded_model_path  # noqa: E402
from assay.models.local import LlamaCppModel  # noqa: E402

CONTEXT = ("The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It was completed in "
           "1889 and is 330 metres tall. It was designed by the engineering company of Gustave Eiffel.")
QUESTION = "In which city is the Eiffel Tower?"
SUPPORTED = "The Eiffel Tower is in Paris."
UNSUPPORTED = "The Eiffel Tower is in Berlin, Germany, and was built in 1999."


def grounded(answer: str, *, scale: str = "yes/no") -> list[dict[str, str]]:
    ask = ("Is the ANSWER supported by the CONTEXT? Answer yes or no." if scale == "yes/no" else
           "Rate how well the ANSWER is supported by the CONTEXT from 1 (not at all) to 5 (fully). "
           "Reply with the number only.")
    return [{"role": "system", "content": "You are a strict grader. Decide whether the ANSWER is supported "
                                          "by the CONTEXT."},
            {"role": "user", "content": f"CONTEXT:\n{CONTEXT}\n\nQUESTION: {QUESTION}\n\nANSWER: {answer}\n\n{ask}"}]


async def probs_of(model: LlamaCppModel, messages, candidates, *, assistant_prefix=None) -> dict[str, float]:
    """The renormalised next-token probabilities of ``candidates`` (ChatModel.distribution)."""
    return read_distribution(await model.distribution(messages, candidates, assistant_prefix=assistant_prefix))[0]


async def distribution(model: LlamaCppModel, messages, candidates, *, assistant_prefix=None):
    """``(probs, mass, prompt_tokens)`` of one ChatModel.distribution call."""
    gen = await model.distribution(messages, candidates, assistant_prefix=assistant_prefix)
    probs, mass = read_distribution(gen)
    return probs, mass, gen.usage.input_tokens


async def scored(model: LlamaCppModel, messages, scale: str, *, assistant_prefix=None) -> LogprobScore:
    sc = Scale.of(scale)
    return score_from_distribution(await model.distribution(messages, sc.labels(), assistant_prefix=assistant_prefix),
                                   sc)


@pytest.fixture(scope="session")
def judge() -> LlamaCppModel:
    model = embedded_judge()
    model.load()
    return model


def test_embedded_judge_is_named_and_marked(judge: LlamaCppModel) -> None:
    assert isinstance(judge, ChatModel)
    assert judge.name == EMBEDDED_NAME == "embedded:gemma-3-270m-q4_k_m"
    assert judge.smoke_test is True
    assert "not calibrated" in (judge.note or "")
    assert judge.loaded and judge.load_seconds is not None
    assert Path(judge.path) == embedded_model_path().resolve()
    assert judge.cache_identity.startswith("llama.cpp:gemma-3-270m-q4_k_m.gguf:")


async def test_generate_returns_text_usage_latency(judge: LlamaCppModel) -> None:
    msgs = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    gen = await judge.generate(msgs, max_tokens=8)
    assert gen.text.strip()
    assert gen.usage.input_tokens > 10
    assert 1 <= gen.usage.output_tokens <= 8
    assert gen.latency_s > 0
    assert gen.model == EMBEDDED_NAME
    assert gen.finish_reason in ("stop", "length")
    assert gen.logprobs is None and gen.token_logprobs is None
    again = await judge.generate(msgs, max_tokens=8)   # greedy: the same answer
    assert again.text == gen.text


async def test_generate_logprobs(judge: LlamaCppModel) -> None:
    gen = await judge.generate([{"role": "user", "content": "Count: one, two, three,"}], max_tokens=4,
                               logprobs=True, top_logprobs=5)
    assert gen.token_logprobs is not None and len(gen.token_logprobs) == gen.usage.output_tokens
    assert gen.logprobs == gen.token_logprobs[0][1]
    for chosen, alts in gen.token_logprobs:
        assert chosen in alts and 1 <= len(alts) <= 6
        assert all(lp <= 1e-6 for lp in alts.values())
        assert sum(math.exp(lp) for lp in alts.values()) <= 1.0 + 1e-4
        assert alts[chosen] == max(alts.values())        # greedy picks the most likely token


async def test_prefill_continues_the_answer(judge: LlamaCppModel) -> None:
    msgs = grounded(SUPPORTED, scale="1-5") + [{"role": "assistant", "content": "Score: "}]
    gen = await judge.generate(msgs, max_tokens=1, logprobs=True, top_logprobs=20)
    assert gen.logprobs is not None
    digits = [t for t in gen.logprobs if t.strip() in {"1", "2", "3", "4", "5"}]
    assert digits, gen.logprobs


async def test_json_response_format(judge: LlamaCppModel) -> None:
    gen = await judge.generate(grounded(SUPPORTED, scale="1-5"), max_tokens=40,
                               response_format={"type": "json_object"})
    assert gen.text.lstrip().startswith("{")
    if gen.finish_reason == "stop":
        json.loads(gen.text)


async def test_distribution_over_scores(judge: LlamaCppModel) -> None:
    msgs = grounded(SUPPORTED, scale="1-5")
    d1 = await probs_of(judge, msgs, ["1", "2", "3", "4", "5"], assistant_prefix="Score: ")
    assert list(d1) == ["1", "2", "3", "4", "5"]
    assert all(0.0 <= p <= 1.0 for p in d1.values())
    assert sum(d1.values()) == pytest.approx(1.0, abs=1e-9)
    # Deterministic, also after another prompt has replaced most of the KV cache.
    await probs_of(judge, grounded(UNSUPPORTED, scale="1-5"), ["1", "2", "3", "4", "5"],
                   assistant_prefix="Score: ")
    d2 = await probs_of(judge, msgs, ["1", "2", "3", "4", "5"], assistant_prefix="Score: ")
    for k in d1:
        assert d2[k] == pytest.approx(d1[k], abs=1e-4)
    probs, mass, n_prompt = await distribution(judge, msgs, ["1", "2", "3", "4", "5"],
                                                  assistant_prefix="Score: ")
    assert 0.05 < mass <= 1.0 and n_prompt > 50
    s = await scored(judge, msgs, "1-5", assistant_prefix="Score: ")
    assert 1.0 <= s.value <= 5.0
    assert s.value == pytest.approx(sum(int(k) * p for k, p in d1.items()), abs=1e-3)


async def test_distribution_over_yes_no(judge: LlamaCppModel) -> None:
    msgs = grounded(SUPPORTED)
    d1 = await probs_of(judge, msgs, ["yes", "no"])
    d2 = await probs_of(judge, msgs, ["yes", "no"])
    assert set(d1) == {"yes", "no"}
    assert sum(d1.values()) == pytest.approx(1.0, abs=1e-9)
    assert d2 == pytest.approx(d1, abs=1e-4)
    # A prefix that does not end in a space: the space-prefixed spellings are found too.
    d3, mass, _ = await distribution(judge, msgs, ["yes", "no"], assistant_prefix="Answer:")
    assert sum(d3.values()) == pytest.approx(1.0, abs=1e-9) and mass > 0


async def test_probabilities_follow_the_prompt(judge: LlamaCppModel) -> None:
    """The answer under judgment reaches the scores, and on a question the small model knows the
    distribution points the right way. (Whether a supported answer gets a higher P(yes) than an
    unsupported one is NOT asserted: Gemma 3 270M base gets that right about as often as a coin,
    with margins of a few hundredths that flip with the wording; see benchmarks.)"""
    good = await scored(judge, grounded(SUPPORTED), "yes/no")
    bad = await scored(judge, grounded(UNSUPPORTED), "yes/no")
    assert set(good.probs) == {"yes", "no"} and set(bad.probs) == {"yes", "no"}
    assert good.value != bad.value
    capital = [{"role": "user", "content": "What is the capital of France?"},
               {"role": "assistant", "content": "The capital of France is"}]
    d = await probs_of(judge, capital, ["Paris", "Berlin", "London"])
    assert d["Paris"] > 0.5 and d["Paris"] > d["Berlin"] and d["Paris"] > d["London"]


async def test_concurrent_calls_are_serialized_and_agree(judge: LlamaCppModel) -> None:
    prompts = [grounded(a) for a in (SUPPORTED, UNSUPPORTED, SUPPORTED, UNSUPPORTED)]
    together = await asyncio.gather(*(probs_of(judge, m, ["yes", "no"]) for m in prompts))
    one_by_one = [await probs_of(judge, m, ["yes", "no"]) for m in prompts]
    for a, b in zip(together, one_by_one):
        assert a == pytest.approx(b, abs=1e-4)
    gens = await asyncio.gather(*(judge.generate(m, max_tokens=3) for m in prompts[:2]))
    assert all(g.text for g in gens)


async def test_local_spec_builds_the_same_model(judge: LlamaCppModel) -> None:
    spec = parse_judge_spec(f"local:{judge.path}")
    model = spec.build(n_ctx=judge.n_ctx, n_batch=judge.n_batch)
    assert isinstance(model, LlamaCppModel)
    assert model.name == "local:gemma-3-270m-q4_k_m.gguf"
    assert model._engine is judge._engine            # loaded once per process
    assert model.cache_identity == judge.cache_identity
    msgs = grounded(SUPPORTED)
    assert await probs_of(model, msgs, ["yes", "no"]) == pytest.approx(
        await probs_of(judge, msgs, ["yes", "no"]), abs=1e-4)
    limited = build_judge(f"local:{judge.path}", cache=None, n_ctx=judge.n_ctx, n_batch=judge.n_batch)
    gen = await limited.generate([{"role": "user", "content": "Say hello."}], max_tokens=4)
    assert gen.text and gen.usage.output_tokens >= 1
    assert limited.limiter.concurrency == LlamaCppModel.default_concurrency


def test_missing_or_bad_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(AssayError, match="does not exist"):
        parse_judge_spec(f"local:{tmp_path / 'nope.gguf'}").build()
    with pytest.raises(AssayError, match="directory"):
        LlamaCppModel(tmp_path)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model at all")
    with pytest.raises(AssayError, match="not a GGUF"):
        parse_judge_spec(f"local:{bad}").build()


async def test_context_overflow_is_a_call_error(judge: LlamaCppModel) -> None:
    too_long = [{"role": "user", "content": "word " * (judge.n_ctx + 10)}]
    with pytest.raises(ModelCallError, match="context") as err:
        await judge.generate(too_long, max_tokens=4)
    assert err.value.kind == "bad_request" and not err.value.retryable
    with pytest.raises(ModelCallError, match="context"):
        await probs_of(judge, too_long, ["yes", "no"])


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import assay.models.embedded as emb

    monkeypatch.setattr(emb, "EMBEDDED_MODULE", "assay_no_such_gguf_package")
    with pytest.raises(AssayError, match=r"assay\[local\]"):
        emb.embedded_model_path()


def test_embedded_model_path_joins_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_MODEL_DIR", str(tmp_path))
    p = embedded_model_path()
    assert p.parent == tmp_path and p.read_bytes()[:4] == b"GGUF"
    mtime = p.stat().st_mtime_ns
    assert embedded_model_path() == p and p.stat().st_mtime_ns == mtime   # not rewritten
    assert not list(tmp_path.glob("*.part"))


async def test_prefix_reuse_is_exact(judge: LlamaCppModel) -> None:
    """With small batches, consecutive prompts reuse their common beginning, and the numbers
    are exactly those of a fresh evaluation whatever came before."""
    model = LlamaCppModel(judge.path, n_batch=32, n_ctx=2048, chat_template=None)
    a, b = grounded(SUPPORTED), grounded(UNSUPPORTED)
    await model.generate([{"role": "user", "content": "Unrelated."}], max_tokens=2)   # a cold cache
    first = await distribution(model, a, ["yes", "no"])
    await distribution(model, b, ["yes", "no"])
    gen = await model.generate(a, max_tokens=5, logprobs=True, top_logprobs=3)
    assert gen.raw["reused_prompt_tokens"] >= 32
    again = await distribution(model, a, ["yes", "no"])
    assert again == first                      # bit for bit
    gen2 = await model.generate(a, max_tokens=5, logprobs=True, top_logprobs=3)
    assert gen2.text == gen.text and gen2.token_logprobs == gen.token_logprobs
    model.unload()
    assert not model.loaded
