"""Loopback endpoints that speak the native providers' wire formats, for the backend tests.

:class:`ProviderServer` is the scripted fake of ``fake_openai_server`` answering as Anthropic's
Messages API, Gemini's ``generateContent`` (Vertex AI's too) or Bedrock's Converse: bodies and
event streams as the providers document them, byte for byte, built here by hand (not with the
backends' own code). :meth:`ProviderServer.judge` makes it a judge: a function of the prompt's last
user text returns the answer text, formatted per provider (streamed when the request asks).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.helpers.fake_openai_server import FakeOpenAI


# -- Anthropic Messages API ---------------------------------------------------------------------
def anthropic_message(text: str, *, model: str = "claude-test", usage: tuple[int, int] = (100, 10),
                      stop: str = "end_turn") -> dict[str, Any]:
    return {"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}], "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]}}


def sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def anthropic_events(text: str, *, model: str = "claude-test", usage: tuple[int, int] = (100, 10),
                     cut: bool = False) -> list[bytes]:
    """The documented event flow of one streamed message, the text in two deltas; ``cut``: it stops
    before ``message_stop``."""
    half = len(text) // 2
    msg = {**anthropic_message("", model=model, usage=(usage[0], 1)), "content": [], "stop_reason": None}
    ev = [sse("message_start", {"type": "message_start", "message": msg}),
          sse("content_block_start", {"type": "content_block_start", "index": 0,
                                      "content_block": {"type": "text", "text": ""}}),
          sse("ping", {"type": "ping"})]
    for piece in (text[:half], text[half:]):
        ev.append(sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                              "delta": {"type": "text_delta", "text": piece}}))
    ev += [sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
           sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                 "usage": {"output_tokens": usage[1]}})]
    if not cut:
        ev.append(sse("message_stop", {"type": "message_stop"}))
    return ev


# -- Gemini generateContent ------------------------------------------------------------------------
def gemini_response(text: str, *, logprobs: list[tuple[str, float, dict[str, float]]] | None = None,
                    usage: tuple[int, int] = (100, 10), finish: str | None = "STOP",
                    model: str = "gemini-test-001") -> dict[str, Any]:
    """``logprobs``: per generated token ``(token, logprob, {alternative: logprob})``."""
    cand: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    if logprobs is not None:
        cand["logprobsResult"] = {
            "topCandidates": [{"candidates": [{"token": t, "logProbability": v} for t, v in alts.items()]}
                              for _, _, alts in logprobs],
            "chosenCandidates": [{"token": t, "logProbability": v} for t, v, _ in logprobs]}
    return {"candidates": [cand],
            "usageMetadata": {"promptTokenCount": usage[0], "candidatesTokenCount": usage[1],
                              "totalTokenCount": usage[0] + usage[1]},
            "modelVersion": model}


def gemini_events(text: str, *, usage: tuple[int, int] = (100, 10), cut: bool = False) -> list[bytes]:
    """``streamGenerateContent?alt=sse``: one chunk per half of the text, the last with the finish
    reason and usage (``cut``: no finish reason)."""
    half = len(text) // 2
    first = gemini_response(text[:half], finish=None, usage=(usage[0], 1))
    last = gemini_response(text[half:], finish=None if cut else "STOP", usage=usage)
    return [b"data: " + json.dumps(first).encode() + b"\r\n\r\n", b"data: " + json.dumps(last).encode() + b"\r\n\r\n"]


def google_error(status: int, code: str, message: str, retry_delay: str | None = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": status, "message": message, "status": code}
    if retry_delay:
        err["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay}]
    return {"error": err}


# -- Bedrock Converse --------------------------------------------------------------------------------
def converse_response(text: str, *, usage: tuple[int, int] = (100, 10), stop: str = "end_turn") -> dict[str, Any]:
    return {"output": {"message": {"role": "assistant", "content": [{"text": text}]}}, "stopReason": stop,
            "usage": {"inputTokens": usage[0], "outputTokens": usage[1], "totalTokens": usage[0] + usage[1]},
            "metrics": {"latencyMs": 120}}


# -- the wire ----------------------------------------------------------------------------------------
def chunked(status: int, headers: dict[str, str], events: list[bytes], *, split: int = 7) -> list[bytes]:
    """An HTTP/1.1 answer with a chunked body, each event cut into pieces of ``split`` bytes at most
    (so events straddle chunk boundaries), written in several writes."""
    head = [f"HTTP/1.1 {status} OK", "Transfer-Encoding: chunked"] + [f"{k}: {v}" for k, v in headers.items()]
    out = [("\r\n".join(head) + "\r\n\r\n").encode()]
    body = b"".join(events)
    for i in range(0, len(body), split * 40):
        piece = body[i:i + split * 40]
        out.append(b"".join(f"{len(piece[j:j + split]):x}\r\n".encode() + piece[j:j + split] + b"\r\n"
                            for j in range(0, len(piece), split)))
    out.append(b"0\r\n\r\n")
    return out


def last_user_text(kind: str, body: dict[str, Any]) -> str:
    """The last user turn's text of a native request body."""
    if kind in ("gemini", "vertex"):
        turn = [c for c in body["contents"] if c["role"] == "user"][-1]
        return "".join(p.get("text", "") for p in turn["parts"])
    if kind == "bedrock":
        turn = [m for m in body["messages"] if m["role"] == "user"][-1]
        return "".join(b.get("text", "") for b in turn["content"])
    turn = [m for m in body["messages"] if m["role"] == "user"][-1]
    c = turn["content"]
    return c if isinstance(c, str) else "".join(b.get("text", "") for b in c)


class ProviderServer(FakeOpenAI):
    """The scripted loopback server answering in ``kind``'s wire format (anthropic, gemini, vertex,
    bedrock)."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.default = lambda req: self.answer('{"score": 4, "reason": "fine"}', req)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def answer(self, text: str, req: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        """The action that answers ``text`` as this provider would ``req`` (streamed when it asks)."""
        streamed = req is not None and ((req.get("body") or {}).get("stream") is True
                                         or "alt=sse" in req.get("path", ""))
        if self.kind == "anthropic":
            if streamed:
                return {"wire": chunked(200, {"Content-Type": "text/event-stream"}, anthropic_events(text, **kw))}
            return {"json": anthropic_message(text, **kw)}
        if self.kind in ("gemini", "vertex"):
            if streamed:
                return {"wire": chunked(200, {"Content-Type": "text/event-stream"}, gemini_events(text, **kw))}
            return {"json": gemini_response(text, **kw)}
        return {"json": converse_response(text, **kw)}

    def judge(self, fn: Callable[[str], str]) -> None:
        """Answer every request with ``fn(last user text)``."""
        self.default = lambda req: self.answer(fn(last_user_text(self.kind, req["body"])), req)

    @property
    def calls(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] == "POST"]


# -- the shipped calibration rows, judged the same way through any backend ---------------------------
def calibration_judge(prompt: str) -> str:
    """A judge that rates an answer 5 when it is a shipped good answer of groundedness's set, else 1:
    the same text for the same prompt whatever wire it comes over."""
    import re
    from importlib import resources

    good = _GOOD.get("set")
    if good is None:
        cal = resources.files("assay.judges").joinpath("calibration", "groundedness.jsonl").read_text()
        good = _GOOD["set"] = {json.loads(x)["good"] for x in cal.splitlines() if x.strip()}
    resp = re.search(r"<response>\n(.*?)\n</response>", prompt, re.S)
    ok = bool(resp and resp.group(1) in good)
    return json.dumps({"reason": "checked against the context", "score": 5 if ok else 1})


_GOOD: dict[str, Any] = {}

#: what must match between a provider's report and the OpenAI-compatible one's
REPORT_KEYS = ("cases", "errors", "auc", "swap", "agreement")


async def calibration_report(spec: str) -> dict[str, Any]:
    """``judge check``'s groundedness report of the judge ``spec`` (no call cache)."""
    from assay.engine.judge_check import check_judge
    from assay.models import resolve

    judge = resolve(spec, cache=None)
    try:
        return (await check_judge(judge, ["groundedness"]))["groundedness"]
    finally:
        await judge.aclose()


async def openai_reference(fake: FakeOpenAI) -> dict[str, Any]:
    """The same report through the OpenAI-compatible backend, judged by :func:`calibration_judge`."""
    fake.default = lambda req: {"content": calibration_judge(req["body"]["messages"][-1]["content"])}
    return await calibration_report(f"{fake.base_url}#fake-judge")
