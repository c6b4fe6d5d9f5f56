"""What a judge model can do, found out before a run spends on it: :func:`probe` (``assay judge probe``).

One cheap call per capability, each a few output tokens, sent in the backend's own wire format:

``json_mode``         structured output (OpenAI ``response_format: json_object``, Gemini
                      ``responseMimeType: application/json``); supported when the call succeeds and
                      the answer parses as JSON;
``logprobs``          log-probabilities with the top alternatives of each token (``top_logprobs`` /
                      ``responseLogprobs``); the top-k actually returned is reported;
``tools``             a forced call of one function (``tools`` / ``functionDeclarations`` /
                      ``toolConfig``); supported when the answer is that tool call;
``max_tokens_param``  the field the API takes for the output length: OpenAI-compatible servers are
                      asked with ``max_tokens`` and, when refused, ``max_completion_tokens``; the
                      native APIs have one documented field (reported without a call);
``reasoning``         a reasoning budget (``reasoning_effort: low``, Anthropic's ``thinking``, Gemini's
                      ``thinkingConfig``).

A capability an API has no field for is reported as such without a call. Each result says what
assay will use and what it falls back to. A plain call first measures the latency and the tokens of
a short judgment, priced from the price table (:func:`~assay.models.pricing.judge_price`).

:func:`~assay.models.judge_config.judge_config` is the configuration of a judge as a run records
it, kept with the run's judge usage; the report starts with it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from assay.models.base import Generation, ModelCallError
from assay.models.judge_config import judge_config

PROMPT = [{"role": "system", "content": "You are a strict grader. Reply with JSON only."},
          {"role": "user", "content": 'Is "Paris is the capital of France" correct? Reply as JSON: {"score": 1 or 0}.'}]
TOOL = {"name": "record_score", "description": "Record a grade.",
        "schema": {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}}
CAPABILITIES = ("json_mode", "logprobs", "tools", "max_tokens_param", "reasoning")
OUT_TOKENS = 16


@dataclass
class Finding:
    """One capability: ``supported`` True / False / None (not known: the call failed otherwise),
    what was seen, what assay uses and what it falls back to, the last call's latency (None: no call
    was needed) and the calls made."""

    name: str
    supported: bool | None
    detail: str
    uses: str
    fallback: str
    latency_s: float | None = None
    calls: int = 0


@dataclass
class ProbeReport:
    judge: str
    config: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    latency_s: float | None = None          # the plain call's
    usage: dict[str, int] = field(default_factory=dict)
    price_per_1m: dict[str, float] | None = None
    price_source: str = "unknown"
    cost_per_call_usd: float | None = None  # a judgment like the plain call, at the table's price
    calls: int = 0
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- the wires ---------------------------------------------------------------------------------------
class Wire:
    """How one backend's raw request is made and its answer read, for the probe's calls."""

    family = "generic"

    def __init__(self, model: Any):
        self.model = model

    def base(self, max_tokens: int = OUT_TOKENS) -> dict[str, Any]:
        return self.model.build_body(PROMPT, max_tokens=max_tokens, temperature=0.0)

    async def send(self, body: Mapping[str, Any]) -> Any:
        data, _ = await self.model.send(body)
        return data

    def read(self, data: Any, latency: float) -> Generation:
        return self.model.read(data, latency)

    def text(self, data: Any) -> str:
        return self.read(data, 0.0).text

    async def aclose(self) -> None:
        """Close what the probe opened itself (the backend's own connections are its caller's)."""

    async def plain(self) -> Generation:
        """A short judgment as a run would ask it: latency and tokens."""
        if self.family == "generic":
            return await self.model.generate(PROMPT, max_tokens=OUT_TOKENS, temperature=0.0)
        data, dt = await _timed(lambda: self.send(self.base()))
        return self.read(data, dt)


class OpenAIWire(Wire):
    family = "openai"

    def __init__(self, model: Any):
        super().__init__(model)
        self._post: Any = None
        self.length_param: str | None = None     # the output-length field the server took, once known

    def base(self, max_tokens: int = OUT_TOKENS) -> dict[str, Any]:
        body = self.model.build_body(PROMPT, max_tokens=max_tokens, temperature=0.0)
        if self.length_param == "max_completion_tokens" and "max_tokens" in body:
            body.pop("temperature", None)
            body["max_completion_tokens"] = max(1024, body.pop("max_tokens"))
        elif self.length_param == "max_tokens" and "max_completion_tokens" in body:
            body["max_tokens"] = body.pop("max_completion_tokens")
        return body

    async def send(self, body: Mapping[str, Any]) -> Any:
        if hasattr(self.model, "send"):           # litellm: keyword arguments of the same shape
            return await super().send(body)
        from assay.models.provider_http import ProviderPost, url_target

        url, headers = self.model.route("chat")
        if self._post is None:
            self._post = ProviderPost(self.model.name, url, timeout=getattr(self.model, "timeout", 60.0))
        data, _ = await self._post.post(url_target(url), headers, orjson.dumps(body))
        return data

    async def aclose(self) -> None:
        if self._post is not None:
            await self._post.aclose()

    def read(self, data: Any, latency: float) -> Generation:
        from assay.models.openai_wire import read_generation

        return read_generation(self.model.name, data, latency)


def wire_of(model: Any) -> Wire:
    from assay.models.anthropic import AnthropicModel
    from assay.models.bedrock import BedrockModel
    from assay.models.gemini import GeminiModel
    from assay.models.litellm_backend import LiteLLMModel
    from assay.models.openai_compat import OpenAICompat

    if isinstance(model, (OpenAICompat, LiteLLMModel)):
        return OpenAIWire(model)
    w = Wire(model)
    for cls, family in ((AnthropicModel, "anthropic"), (GeminiModel, "gemini"), (BedrockModel, "bedrock")):
        if isinstance(model, cls):
            w.family = family
    return w


# -- the recipes: (how the base body is changed, whether the answer shows the capability) -----------
Recipe = tuple[Callable[[dict[str, Any]], None], Callable[[Wire, Any], tuple[bool, str]]]


def _json_ok(w: Wire, data: Any) -> tuple[bool, str]:
    text = w.text(data).strip()
    try:
        orjson.loads(text)
        return True, "the answer parsed as JSON"
    except orjson.JSONDecodeError:
        return False, f"accepted, but the answer is not JSON: {text[:60]!r}"


def _openai_logprobs(w: Wire, data: Any) -> tuple[bool, str]:
    from assay.models.openai_wire import read_logprobs

    first, seq = read_logprobs(((data.get("choices") or [{}])[0]).get("logprobs"))
    return (True, f"top-{len(first)} alternatives per token") if first else (False, "accepted, none returned")


def _gemini_logprobs(w: Wire, data: Any) -> tuple[bool, str]:
    g = w.model.read(data, 0.0)
    return (True, f"top-{len(g.logprobs)} alternatives per token") if g.logprobs else (False, "accepted, none returned")


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = body
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return change


def _all(*changes: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        for c in changes:
            c(body)
    return change


def _drop(*keys: str) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        for k in keys:
            *parents, last = k.split(".")
            node: Any = body
            for p in parents:
                node = node.get(p, {})
            node.pop(last, None)
    return change


def _found(test: Callable[[Any], bool], yes: str, no: str) -> Callable[[Wire, Any], tuple[bool, str]]:
    def read(w: Wire, data: Any) -> tuple[bool, str]:
        try:
            ok = bool(test(data))
        except (KeyError, IndexError, TypeError, AttributeError):
            ok = False
        return (True, yes) if ok else (False, no)
    return read


_OPENAI_TOOL = {"type": "function", "function": {"name": TOOL["name"], "description": TOOL["description"],
                                                 "parameters": TOOL["schema"]}}
RECIPES: dict[str, dict[str, Recipe]] = {
    "openai": {
        "json_mode": (_set("response_format", {"type": "json_object"}), _json_ok),
        "logprobs": (_all(_set("logprobs", True), _set("top_logprobs", 5)), _openai_logprobs),
        "tools": (_all(_set("tools", [_OPENAI_TOOL]),
                       _set("tool_choice", {"type": "function", "function": {"name": TOOL["name"]}})),
                  _found(lambda d: d["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == TOOL["name"],
                         "answered with the forced tool call", "accepted, but no tool call came back")),
        "reasoning": (_all(_set("reasoning_effort", "low"), _drop("temperature", "logprobs", "top_logprobs")),
                      _found(lambda d: True, "reasoning_effort accepted", "")),
    },
    "anthropic": {
        "tools": (_all(_set("tools", [{"name": TOOL["name"], "description": TOOL["description"],
                                       "input_schema": TOOL["schema"]}]),
                       _set("tool_choice", {"type": "tool", "name": TOOL["name"]})),
                  _found(lambda d: any(b.get("type") == "tool_use" for b in d["content"]),
                         "answered with a tool_use block", "accepted, but no tool_use block came back")),
        "reasoning": (_all(_set("thinking", {"type": "enabled", "budget_tokens": 1024}), _set("max_tokens", 1100),
                           _drop("temperature")),
                      _found(lambda d: any(b.get("type") == "thinking" for b in d["content"]),
                             "extended thinking (a thinking block came back)", "accepted, no thinking block")),
    },
    "gemini": {
        "json_mode": (_set("generationConfig.responseMimeType", "application/json"), _json_ok),
        "logprobs": (_all(_set("generationConfig.responseLogprobs", True), _set("generationConfig.logprobs", 5)),
                     _gemini_logprobs),
        "tools": (_all(_set("tools", [{"functionDeclarations": [{"name": TOOL["name"], "description": TOOL["description"],
                                                                 "parameters": TOOL["schema"]}]}]),
                       _set("toolConfig", {"functionCallingConfig": {"mode": "ANY"}})),
                  _found(lambda d: any("functionCall" in p for p in d["candidates"][0]["content"]["parts"]),
                         "answered with a functionCall part", "accepted, but no functionCall came back")),
        "reasoning": (_set("generationConfig.thinkingConfig", {"thinkingBudget": 128}),
                      _found(lambda d: True, "thinkingConfig accepted", "")),
    },
    "bedrock": {
        "tools": (_set("toolConfig", {"tools": [{"toolSpec": {"name": TOOL["name"], "description": TOOL["description"],
                                                              "inputSchema": {"json": TOOL["schema"]}}}],
                                      "toolChoice": {"tool": {"name": TOOL["name"]}}}),
                  _found(lambda d: any("toolUse" in b for b in d["output"]["message"]["content"]),
                         "answered with a toolUse block", "accepted, but no toolUse block came back")),
        "reasoning": (_all(_set("additionalModelRequestFields", {"thinking": {"type": "enabled", "budget_tokens": 1024}}),
                           _set("inferenceConfig.maxTokens", 1100), _drop("inferenceConfig.temperature")),
                      _found(lambda d: True, "thinking accepted (additionalModelRequestFields)", "")),
    },
}

#: capabilities an API has no field for, or has exactly one for: reported without a call
NO_FIELD = {
    "anthropic": {"json_mode": "the Messages API has no JSON mode", "logprobs": "the Messages API returns none",
                  "max_tokens_param": "max_tokens"},
    "gemini": {"max_tokens_param": "generationConfig.maxOutputTokens"},
    "bedrock": {"json_mode": "Converse has no JSON mode", "logprobs": "Converse returns none",
                "max_tokens_param": "inferenceConfig.maxTokens"},
}

USES = {
    "json_mode": ("JSON mode for every judgment", "JSON asked in the prompt, the answer parsed (re-asked once)"),
    "logprobs": ("probability-weighted scores from the top log-probabilities", "the parsed score alone"),
    "tools": ("available to agent metrics; judges answer in JSON", "judges answer in JSON (no tools needed)"),
    "reasoning": ("reasoning on the model's default effort (set extra_body to change it)",
                  "no reasoning parameter is sent"),
}


async def _timed(fn: Callable[[], Awaitable[Any]]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = await fn()
    return out, time.perf_counter() - t0


async def _try(w: Wire, name: str, recipe: Recipe) -> Finding:
    change, read = recipe
    body = w.base()
    change(body)
    uses, fallback = USES[name]
    t0 = time.perf_counter()
    try:
        data = await w.send(body)
    except ModelCallError as exc:
        dt = time.perf_counter() - t0
        if exc.kind in ("bad_request", "not_found"):
            return Finding(name, False, f"refused: {str(exc)[:160]}", fallback, "—", dt, 1)
        return Finding(name, None, f"could not tell: {str(exc)[:160]}", fallback, "—", dt, 1)
    ok, detail = read(w, data)
    return Finding(name, ok, detail, uses if ok else fallback, fallback if ok else "—",
                   time.perf_counter() - t0, 1)


async def _max_tokens_param(w: OpenAIWire) -> Finding:
    """OpenAI-compatible: ``max_tokens`` first, ``max_completion_tokens`` when it is refused; the
    field found is used by the probe's later calls."""
    tried: list[str] = []
    for param in ("max_tokens", "max_completion_tokens"):
        w.length_param = param
        t0 = time.perf_counter()
        try:
            await w.send(w.base())
        except ModelCallError as exc:
            if exc.kind != "bad_request":
                w.length_param = None
                return Finding("max_tokens_param", None, f"could not tell: {str(exc)[:160]}", "max_tokens", "—",
                               time.perf_counter() - t0, len(tried) + 1)
            tried.append(f"{param} refused")
            continue
        return Finding("max_tokens_param", True, "; ".join([*tried, f"{param} accepted"]),
                       *_length_use(w.model, param), time.perf_counter() - t0, len(tried) + 1)
    w.length_param = None
    return Finding("max_tokens_param", False, "; ".join(tried), "max_tokens", "—", None, 2)


def _length_use(model: Any, param: str) -> tuple[str, str]:
    """(what assay sends for the output length, what it falls back to) given the field the server took."""
    sends = "max_completion_tokens" if getattr(model, "reasoning", False) else "max_tokens"
    if sends == param:
        return param, "—"
    if param == "max_completion_tokens":
        return ("max_tokens, which this server refuses: name the model as a reasoning model "
                "(reasoning=True) so that assay sends max_completion_tokens"), "—"
    return sends, "max_tokens"


def _no_field(family: str, name: str) -> Finding | None:
    said = NO_FIELD.get(family, {}).get(name)
    if said is None:
        return None
    if name == "max_tokens_param":
        return Finding(name, True, f"{said} (the API's one field)", said, "—")
    return Finding(name, False, said, USES[name][1], "—")


async def _finding(w: Wire, name: str) -> Finding:
    fixed = _no_field(w.family, name)
    if fixed is not None:
        return fixed
    if name == "max_tokens_param":
        return await _max_tokens_param(w) if isinstance(w, OpenAIWire) else \
            Finding(name, True, "max_tokens (an argument of the in-process model)", "max_tokens", "—")
    recipe = RECIPES.get(w.family, {}).get(name)
    if recipe is None:
        return await _generic(w, name)
    return await _try(w, name, recipe)


async def _generic(w: Wire, name: str) -> Finding:
    """A backend without a raw wire (in-process models): JSON mode and logprobs through ``generate``."""
    m = w.model
    uses, fallback = USES[name]
    if name not in ("json_mode", "logprobs"):
        return Finding(name, False, "not offered by this backend", fallback, "—")
    kw = {"response_format": {"type": "json_object"}} if name == "json_mode" else {"logprobs": True, "top_logprobs": 5}
    try:
        g, dt = await _timed(lambda: m.generate(PROMPT, max_tokens=OUT_TOKENS, temperature=0.0, **kw))
    except ModelCallError as exc:
        return Finding(name, False, f"refused: {str(exc)[:160]}", fallback, "—", None, 1)
    if name == "logprobs":
        ok = bool(g.logprobs)
        detail = f"top-{len(g.logprobs)} alternatives per token" if ok else "none returned"
    else:
        try:
            orjson.loads(g.text.strip())
            ok, detail = True, "the answer parsed as JSON"
        except orjson.JSONDecodeError:
            ok, detail = False, f"the answer is not JSON: {g.text[:60]!r}"
    return Finding(name, ok, detail, uses if ok else fallback, fallback if ok else "—", dt, 1)


async def probe(model: Any, *, capabilities: tuple[str, ...] = CAPABILITIES) -> ProbeReport:
    """Probe ``model`` (a bare backend or a :class:`~assay.models.limited.LimitedModel`, whose
    backend is called directly: no cache, no retries) and report what it can do."""
    from assay.models.pricing import judge_price

    backend = getattr(model, "model", model) if hasattr(model, "limiter") else model
    if hasattr(backend, "ensure_model"):
        await backend.ensure_model()
    rep = ProbeReport(judge=str(getattr(backend, "name", "")), config=judge_config(model))
    price, rep.price_source = judge_price(model)
    rep.price_per_1m = {"input": price[0], "output": price[1]} if price else None
    w = wire_of(backend)
    try:
        return await _run(w, rep, price, capabilities)
    finally:
        await w.aclose()


async def _run(w: Wire, rep: ProbeReport, price: tuple[float, float] | None,
               capabilities: tuple[str, ...]) -> ProbeReport:
    from assay.models.pricing import cost_usd

    found: dict[str, Finding] = {}
    if "max_tokens_param" in capabilities:     # first: the later calls need the field the server takes
        found["max_tokens_param"] = await _finding(w, "max_tokens_param")
    try:
        g = await w.plain()
    except ModelCallError as exc:
        rep.error = f"the plain call failed: {exc}"
        rep.calls = 1 + sum(f.calls for f in found.values())
        rep.findings = list(found.values())
        return rep
    rep.latency_s = g.latency_s
    rep.usage = g.usage.to_dict()
    rep.cost_per_call_usd = cost_usd(g.usage.input_tokens, g.usage.output_tokens, price)
    for name in capabilities:
        if name not in found:
            found[name] = await _finding(w, name)
    rep.findings = [found[c] for c in capabilities]
    rep.calls = 1 + sum(f.calls for f in rep.findings)
    timed = [f.latency_s for f in rep.findings if f.latency_s is not None] + [g.latency_s]
    rep.config["probe_median_latency_s"] = round(statistics.median(timed), 4)
    return rep
