"""In-process models for quality tasks written in lm-evaluation-harness's format: a log-likelihood model
that knows the right continuation of every context (or always prefers a wrong one) and records every
request it is sent, so tests can check the exact strings a task sends as well as the scores."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from assay.models.base import Generation, loglik_generation

# A loglikelihood_rolling task over ``pages.jsonl`` (one ``page`` per document), for the rolling-window tests.
ROLLING_TASK = """task: long_pages
output_type: loglikelihood_rolling
dataset_kwargs:
  data_files:
    test: pages.jsonl
test_split: test
doc_to_text: ""
doc_to_target: page
"""


class ScriptedLM:
    """A raw-text model with log-likelihoods. ``gold(context)`` gives the right continuation of a context
    (exactly as it should be sent) or None; ``answer(prompt)`` the text to generate. ``wrong``: every
    log-likelihood prefers a continuation that is not the gold one, and nothing is ever greedy.
    ``requests`` keeps every ``(context, continuations)`` asked, ``prompts`` every generation prompt."""

    def __init__(self, gold: Callable[[str], str | None], answer: Callable[[str], str] | None = None, *,
                 wrong: bool = False, name: str = "scripted-lm"):
        self.gold, self.answer, self.wrong, self.name = gold, answer or (lambda p: ""), wrong, name
        self.requests: list[tuple[str, list[str]]] = []
        self.prompts: list[str] = []

    async def loglikelihood(self, context: str, continuations: Sequence[str]) -> Generation:
        conts = list(continuations)
        self.requests.append((context, conts))
        right = self.gold(context)
        good = [c == right for c in conts]
        if self.wrong:
            good = [not g for g in good]
            if len(good) == 1:          # one continuation (a loglikelihood task): never the greedy one
                return loglik_generation([-20.0], [False], model=self.name)
        return loglik_generation([-0.5 if g else -20.0 for g in good], [g and not self.wrong for g in good],
                                 model=self.name)

    async def complete(self, prompt: str, *, max_tokens: int = 256, temperature: float = 0.0,
                       stop: Sequence[str] = (), seed: int | None = None, **_: Any) -> Generation:
        self.prompts.append(prompt)
        return Generation(text=self.answer(prompt), model=self.name)

    async def generate(self, messages: list[dict], **_: Any) -> Generation:
        prompt = str(messages[-1]["content"])
        self.prompts.append(prompt)
        return Generation(text=self.answer(prompt), model=self.name)


class TokenServer:
    """A loopback OpenAI-compatible server whose tokens and log-probabilities are known, for rolling
    log-likelihoods: one token per space-separated word (ids given in order of first sight, the start token
    is 0), a context of ``n_ctx`` tokens (a longer prompt is refused with 400, as llama.cpp refuses it), and the
    log-probability of the token at position ``i`` of a request (the start token at 0) is ``logprob(id, i)``
    (``-(1 + id % 5) / 10 - i / 100``: it depends on how much context precedes it, so a wrongly cut window gives
    a different sum).

    ``flavour`` ``"llama.cpp"``: ``/extras/tokenize`` (with the start token) and ``/extras/detokenize``, and the
    echo leaves the start token out and gives the first prompt token no log-probability, as llama-cpp-python
    does; ``"vllm"``: ``/tokenize`` and ``/detokenize``, the start token echoed with none; ``None``: no tokenizer
    endpoint (404). ``prompts`` keeps every echoed prompt."""

    def __init__(self, *, n_ctx: int = 8, flavour: str | None = "llama.cpp", model: str = "toy"):
        import http.server
        import json
        import threading

        self.n_ctx, self.flavour, self.model = n_ctx, flavour, model
        self.vocab: dict[str, int] = {}
        self.words: dict[int, str] = {}
        self.prompts: list[str] = []
        srv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def reply(self, status: int, obj: Any) -> None:
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self.reply(200, {"data": [{"id": srv.model}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                status, obj = srv.answer(self.path.rstrip("/"), body)
                self.reply(status, obj)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @staticmethod
    def logprob(token: int, position: int) -> float:
        return -(1 + token % 5) / 10 - position / 100

    def ids(self, text: str) -> list[int]:
        out = []
        for w in text.split():
            if w not in self.vocab:
                self.vocab[w] = len(self.vocab) + 1
                self.words[self.vocab[w]] = w
            out.append(self.vocab[w])
        return out

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        routes = {"llama.cpp": ("/extras/tokenize", "input", "/extras/detokenize", "text"),
                  "vllm": ("/tokenize", "prompt", "/detokenize", "prompt")}.get(self.flavour or "")
        if routes and path == routes[0]:
            return 200, {"tokens": [0, *self.ids(str(body.get(routes[1], "")))]}
        if routes and path == routes[2]:
            return 200, {routes[3]: " ".join(self.words[int(t)] for t in body["tokens"])}
        if path == "/v1/completions" and body.get("echo"):
            return self.echo(str(body["prompt"]))
        return 404, {"error": {"message": f"no route {path}"}}

    def echo(self, prompt: str) -> tuple[int, Any]:
        self.prompts.append(prompt)
        toks = [0, *self.ids(prompt)]
        if len(toks) + 1 > self.n_ctx:
            return 400, {"error": {"message": f"Requested tokens ({len(toks) + 1}) exceed context window of "
                                              f"{self.n_ctx}"}}
        values: list[float | None] = [None] + [self.logprob(t, i) for i, t in enumerate(toks) if i > 0]
        if self.flavour == "llama.cpp":             # the start token left out, the first prompt token unscored
            values = [None] + values[2:]
            texts = [self.words[t] for t in toks[1:]]
        else:
            texts = [""] + [self.words[t] for t in toks[1:]]
        offsets, at = [], 0
        for t in texts:
            offsets.append(at)
            at += len(t) + (1 if t else 0)
        values.append(-0.1)                          # the one generated token
        offsets.append(at)
        tops = [None if v is None else {"x": v} for v in values]
        return 200, {"model": self.model, "usage": {"prompt_tokens": len(toks), "completion_tokens": 1},
                     "choices": [{"index": 0, "text": prompt + " x", "finish_reason": "length",
                                  "logprobs": {"token_logprobs": values, "text_offset": offsets,
                                               "top_logprobs": tops, "tokens": [*texts, "x"]}}]}

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
