"""A loopback server speaking OpenAI's Batch API and Anthropic's Message Batches API, as documented.

One :class:`BatchServer` (a ``ThreadingHTTPServer`` on 127.0.0.1 in a background thread) answers:

- online calls: ``POST /v1/chat/completions`` and ``POST /v1/messages``;
- OpenAI: ``POST /v1/files`` (multipart/form-data with ``purpose`` and ``file``), ``POST
  /v1/batches``, ``GET /v1/batches/ID`` (each poll moves the status one step: ``validating`` ->
  ``in_progress`` -> ``finalizing`` -> ``completed``), ``GET /v1/files/ID/content`` (the output and
  error files, JSONL of ``{"id", "custom_id", "response": {"status_code", "request_id", "body"},
  "error"}``);
- Anthropic: ``POST /v1/messages/batches``, ``GET /v1/messages/batches/ID`` (``in_progress`` for
  two polls, then ``ended`` with ``results_url``), ``GET /v1/messages/batches/ID/results``.

Every answer is ``judge(prompt text)``; ``fail_when(prompt)`` makes a request fail in the batch
(a 500 line in OpenAI's error file, an ``errored`` result at Anthropic); ``expire=True`` ends each
batch as ``expired`` with the second half of its requests unanswered; ``fail_batch=True`` fails each
OpenAI batch in validation (status ``failed``, ``errors``, no files). It counts the batches made
(``batches_created``) and the online calls (``online``): a test reads them to see what went where.
The bodies are built here by hand, not with assay's code.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

USAGE = (100, 10)
OPENAI_STEPS = ("validating", "in_progress", "finalizing", "completed")


def prompt_text(body: dict[str, Any]) -> str:
    """Every message's text of a chat-completions or Messages body, and Anthropic's ``system``."""
    parts = [body.get("system") or ""]
    for m in body.get("messages", []):
        c = m.get("content")
        parts.append(c if isinstance(c, str) else "".join(b.get("text", "") for b in c or []))
    return "\n".join(parts)


def chat_completion(text: str, model: str) -> dict[str, Any]:
    return {"id": "chatcmpl-b", "object": "chat.completion", "created": 1, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": USAGE[0], "completion_tokens": USAGE[1], "total_tokens": sum(USAGE)}}


def claude_message(text: str, model: str) -> dict[str, Any]:
    return {"id": "msg_b", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": USAGE[0], "output_tokens": USAGE[1]}}


def multipart_fields(ctype: str, raw: bytes) -> dict[str, bytes]:
    """The fields of a multipart/form-data body, by name."""
    m = re.search(r"boundary=\"?([^\";]+)\"?", ctype)
    if not m:
        raise ValueError("no boundary")
    out: dict[str, bytes] = {}
    for part in raw.split(b"--" + m.group(1).encode())[1:]:
        if part.startswith(b"--"):
            break
        head, _, value = part.partition(b"\r\n\r\n")
        name = re.search(rb'name="([^"]+)"', head)
        if name:
            out[name.group(1).decode()] = value[:-2] if value.endswith(b"\r\n") else value
    return out


class BatchServer:
    def __init__(self, judge: Callable[[str], str], *, fail_when: Callable[[str], bool] | None = None,
                 expire: bool = False):
        self.judge, self.fail_when, self.expire = judge, fail_when or (lambda _: False), expire
        self.fail_batch = False                    # OpenAI batches fail validation as a whole
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.batches_created = 0
        self.online = 0
        self.polls = 0
        self.poll_faults = 0                         # the next polls answered 503
        self.bodies: dict[str, list[dict[str, Any]]] = {"online": [], "batch": []}
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- answers ---------------------------------------------------------------------------------
    def _answer(self, body: dict[str, Any]) -> tuple[bool, str]:
        text = prompt_text(body)
        return (not self.fail_when(text)), self.judge(text)

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{len(self.files) + len(self.batches) + 1:06d}"

    # -- OpenAI ----------------------------------------------------------------------------------
    def openai_create(self, payload: dict[str, Any]) -> dict[str, Any]:
        lines = [json.loads(x) for x in self.files[payload["input_file_id"]].splitlines() if x.strip()]
        assert payload["endpoint"] == "/v1/chat/completions" and payload["completion_window"] == "24h"
        for ln in lines:
            assert set(ln) == {"custom_id", "method", "url", "body"} and ln["url"] == "/v1/chat/completions"
            self.bodies["batch"].append(ln["body"])
        bid = self._new_id("batch_")
        self.batches[bid] = {"kind": "openai", "lines": lines, "step": 0, "obj": None}
        self.batches_created += 1
        return self.openai_object(bid)

    def openai_object(self, bid: str) -> dict[str, Any]:
        b = self.batches[bid]
        status = OPENAI_STEPS[min(b["step"], 3)]
        if status == "completed" and self.expire:
            status = "expired"
        if self.fail_batch and b["step"] >= 1:     # failed validation: no output, an error per line
            return {"id": bid, "object": "batch", "endpoint": "/v1/chat/completions", "status": "failed",
                    "input_file_id": "file-in", "completion_window": "24h", "output_file_id": None,
                    "error_file_id": None, "created_at": 1,
                    "errors": {"object": "list", "data": [{"code": "invalid_request", "line": 1, "param": "body",
                                                           "message": "The model does not support batches."}]},
                    "request_counts": {"total": len(b["lines"]), "completed": 0, "failed": 0}}
        obj = {"id": bid, "object": "batch", "endpoint": "/v1/chat/completions", "errors": None,
               "input_file_id": "file-in", "completion_window": "24h", "status": status,
               "output_file_id": None, "error_file_id": None, "created_at": 1,
               "request_counts": {"total": len(b["lines"]), "completed": 0, "failed": 0}}
        if status in ("completed", "expired"):
            obj.update(self._openai_files(bid, b))
        return obj

    def _openai_files(self, bid: str, b: dict[str, Any]) -> dict[str, Any]:
        if b["obj"] is not None:
            return b["obj"]
        out, err = [], []
        cut = len(b["lines"]) // 2 if self.expire else len(b["lines"])
        for i, ln in enumerate(b["lines"]):
            rid = f"batch_req_{i}"
            if i >= cut:
                err.append({"id": rid, "custom_id": ln["custom_id"], "response": None,
                            "error": {"code": "batch_expired", "message": "This request could not be executed "
                                      "before the completion window expired."}})
                continue
            ok, text = self._answer(ln["body"])
            if ok:
                out.append({"id": rid, "custom_id": ln["custom_id"], "error": None,
                            "response": {"status_code": 200, "request_id": f"req_{i}",
                                         "body": chat_completion(text, ln["body"]["model"])}})
            else:
                err.append({"id": rid, "custom_id": ln["custom_id"], "error": None,
                            "response": {"status_code": 500, "request_id": f"req_{i}",
                                         "body": {"error": {"message": "The server had an error",
                                                            "type": "server_error"}}}})
        files = {}
        for name, rows in (("output_file_id", out), ("error_file_id", err)):
            if rows:
                fid = self._new_id("file-")
                self.files[fid] = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
                files[name] = fid
        b["obj"] = {**files, "request_counts": {"total": len(b["lines"]), "completed": len(out),
                                                "failed": len(err)}}
        return b["obj"]

    # -- Anthropic -------------------------------------------------------------------------------
    def anthropic_create(self, payload: dict[str, Any]) -> dict[str, Any]:
        reqs = payload["requests"]
        for r in reqs:
            assert set(r) == {"custom_id", "params"} and re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", r["custom_id"])
            assert "stream" not in r["params"]
            self.bodies["batch"].append(r["params"])
        bid = self._new_id("msgbatch_")
        self.batches[bid] = {"kind": "anthropic", "requests": reqs, "step": 0}
        self.batches_created += 1
        return self.anthropic_object(bid)

    def anthropic_object(self, bid: str) -> dict[str, Any]:
        b = self.batches[bid]
        ended = b["step"] >= 2
        n = len(b["requests"])
        counts = {"processing": 0 if ended else n, "succeeded": n if ended else 0, "errored": 0,
                  "canceled": 0, "expired": 0}
        return {"id": bid, "type": "message_batch", "processing_status": "ended" if ended else "in_progress",
                "request_counts": counts, "ended_at": "2025-01-01T00:00:00Z" if ended else None,
                "created_at": "2025-01-01T00:00:00Z", "expires_at": "2025-01-02T00:00:00Z",
                "archived_at": None, "cancel_initiated_at": None,
                "results_url": f"{self.url}/v1/messages/batches/{bid}/results" if ended else None}

    def anthropic_results(self, bid: str) -> bytes:
        b, lines = self.batches[bid], []
        cut = len(b["requests"]) // 2 if self.expire else len(b["requests"])
        for i, r in enumerate(b["requests"]):
            if i >= cut:
                res: dict[str, Any] = {"type": "expired"}
            else:
                ok, text = self._answer(r["params"])
                res = ({"type": "succeeded", "message": claude_message(text, r["params"]["model"])} if ok else
                       {"type": "errored", "error": {"type": "error", "error": {"type": "api_error",
                                                                                "message": "Internal server error"}}})
            lines.append(json.dumps({"custom_id": r["custom_id"], "result": res}).encode() + b"\n")
        return b"".join(lines)

    # -- HTTP ------------------------------------------------------------------------------------
    def get(self, p: str) -> tuple[int, Any, str]:
        """``(status, answer, content type)`` of ``GET p``."""
        if m := re.fullmatch(r"/v1/files/([\w-]+)/content", p):
            return 200, self.files[m.group(1)], "application/octet-stream"
        if m := re.fullmatch(r"/v1/messages/batches/(\w+)/results", p):
            return 200, self.anthropic_results(m.group(1)), "application/binary"
        m = re.fullmatch(r"/v1/(messages/)?batches/(\w+)", p)
        if m is None or m.group(2) not in self.batches:
            return 404, {"error": {"message": f"no route {p}"}}, "application/json"
        bid = m.group(2)
        if self.poll_faults:
            self.poll_faults -= 1
            return 503, {"error": {"message": "overloaded"}}, "application/json"
        self.polls += 1
        obj = self.anthropic_object(bid) if m.group(1) else self.openai_object(bid)
        self.batches[bid]["step"] += 1
        return 200, obj, "application/json"

    def post(self, p: str, headers: Any, raw: bytes) -> tuple[int, Any, str]:
        """``(status, answer, content type)`` of ``POST p``."""
        if p == "/v1/files":
            fields = multipart_fields(headers["Content-Type"], raw)
            assert fields["purpose"] == b"batch"
            fid = self._new_id("file-")
            self.files[fid] = fields["file"]
            return 200, {"id": fid, "object": "file", "bytes": len(fields["file"]), "purpose": "batch",
                         "filename": "x.jsonl"}, "application/json"
        body = json.loads(raw)
        if p == "/v1/batches":
            return 200, self.openai_create(body), "application/json"
        if p == "/v1/messages/batches":
            assert headers.get("anthropic-version") and headers.get("x-api-key")
            return 200, self.anthropic_create(body), "application/json"
        self.online += 1
        self.bodies["online"].append(body)
        _, text = self._answer(body)
        if p == "/v1/chat/completions":
            return 200, chat_completion(text, body["model"]), "application/json"
        if p == "/v1/messages":
            return 200, claude_message(text, body["model"]), "application/json"
        return 404, {"error": {"message": f"no route {p}"}}, "application/json"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def _send(self, status: int, data: Any, ctype: str) -> None:
                raw = data if isinstance(data, bytes) else json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:   # noqa: N802
                with server.lock:
                    answer = server.get(self.path)
                self._send(*answer)

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with server.lock:
                    answer = server.post(self.path, self.headers, raw)
                self._send(*answer)

        return Handler
