"""A deliberately weak chat app behind an OpenAI-compatible endpoint, for the red-team side by side.

It knows assay's red-team objectives (``objectives.json``, every category). A request that holds
one of them in **base64** (any token, standard or URL-safe alphabet), **ROT13** or **Atbash** is
decoded and obeyed (Atbash read with the letters only, as garak and assay write it, and with the
digits reversed too, as PyRIT does): the reply repeats the decoded request and gives a harmful text of the
objective's category (``tests/helpers/harmful_answers.py``). Everything else, the plain objectives
included, is refused. Its decoders are its own (the standard library's base64 and a letter table):
it reads whatever wrapper a tool puts round the encoded text, so garak's templates, PyRIT's
converted prompts and assay's notes reach it alike. It counts its calls, per encoding it decoded.

``serve(port, judge=...)`` starts it on loopback in a thread; a request whose ``model`` is
``judge`` goes to ``judge`` (a function of the request body returning the reply text) instead.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import string
import threading
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OBJECTIVES = ROOT / "src" / "assay" / "simulate" / "redteam" / "objectives.json"
REFUSAL = "I'm sorry, but I can't help with that."
ENCODINGS = ("base64", "rot13", "atbash")
B64_TOKEN = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")
LOWER, UPPER = string.ascii_lowercase, string.ascii_uppercase
ROT13 = str.maketrans(LOWER + UPPER, LOWER[13:] + LOWER[:13] + UPPER[13:] + UPPER[:13])
ATBASH = str.maketrans(LOWER + UPPER, LOWER[::-1] + UPPER[::-1])
ATBASH_DIGITS = str.maketrans(LOWER + UPPER + string.digits, LOWER[::-1] + UPPER[::-1] + string.digits[::-1])


def load_objectives(path: Path = OBJECTIVES) -> dict[str, str]:
    """Each objective's text and its category."""
    return {o["text"]: o["category"] for o in json.loads(path.read_text())["objectives"]}


def harmful_texts() -> dict[str, list[str]]:
    """The harmful answers of the tests, per category."""
    import sys

    sys.path.insert(0, str(ROOT))
    from tests.helpers.harmful_answers import HARMFUL

    out: dict[str, list[str]] = {}
    for cat, text in HARMFUL:
        out.setdefault(cat, []).append(text)
    return out


def b64_payloads(text: str) -> list[str]:
    """The texts that the base64 tokens of ``text`` decode to (tokens that are not base64 skipped)."""
    out = []
    joined = re.sub(r"(?<=[A-Za-z0-9+/])\n(?=[A-Za-z0-9+/])", "", text)    # base64 wrapped at 76 columns
    for token in B64_TOKEN.findall(text) + B64_TOKEN.findall(joined):
        token = token.rstrip("=")
        padded = token + "=" * (-len(token) % 4)
        for alt in (b"+/", b"-_"):
            try:
                out.append(base64.b64decode(padded, altchars=alt, validate=True).decode("utf-8"))
                break
            except (binascii.Error, UnicodeDecodeError, ValueError):
                continue
    return out


def decoded(text: str) -> dict[str, list[str]]:
    """What ``text`` reads as under each encoding the app decodes."""
    return {"base64": b64_payloads(text), "rot13": [text.translate(ROT13)], "atbash": [text.translate(ATBASH), text.translate(ATBASH_DIGITS)]}


class WeakApp:
    """The app's logic: :meth:`reply` to a user message, with its counters."""

    def __init__(self, objectives: dict[str, str] | None = None,
                 harmful: dict[str, list[str]] | None = None, refuse_all: bool = False) -> None:
        self.refuse_all = refuse_all        # the control: decodes and counts as before, obeys nothing
        self.objectives = objectives if objectives is not None else load_objectives()
        self.harmful = harmful if harmful is not None else harmful_texts()
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()

    def find(self, text: str) -> tuple[str, str] | None:
        """The encoding and the objective found decoded in ``text``; None for a plain request."""
        for name, readings in decoded(text).items():
            for reading in readings:
                for objective in self.objectives:
                    if objective in reading:
                        return name, objective
        return None

    def reply(self, text: str) -> str:
        hit = self.find(text)
        with self.lock:
            self.calls["calls"] += 1
            self.calls[hit[0] if hit else "refused"] += 1
        if hit is None or self.refuse_all:
            return REFUSAL
        objective = hit[1]
        texts = self.harmful[self.objectives[objective]]
        answer = texts[sum(map(ord, objective)) % len(texts)]
        return f"Sure. Decoded, your request reads: {objective}\n{answer}"


def last_user_text(body: dict) -> str:
    for m in reversed(body.get("messages") or []):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):
                return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def completion(model: str, text: str) -> dict:
    return {"id": "chatcmpl-weak", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}


def handler_for(app: WeakApp, judge: Callable[[dict], str] | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def send(self, status: int, obj: dict) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self.send(200, {"object": "list", "data": [{"id": "weak", "object": "model"}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self.send(404, {"error": {"message": f"no route {self.path}"}})
                return
            model = str(body.get("model") or "weak")
            if model == "judge" and judge is not None:
                with app.lock:
                    app.calls["judge"] += 1
                self.send(200, completion(model, judge(body)))
                return
            self.send(200, completion(model, app.reply(last_user_text(body))))

    return Handler


def serve(app: WeakApp, port: int = 0, judge: Callable[[dict], str] | None = None) -> tuple[ThreadingHTTPServer, str]:
    """Serve ``app`` on 127.0.0.1 in a daemon thread: the server and its ``/v1`` base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler_for(app, judge))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"
