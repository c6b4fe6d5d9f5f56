"""A scripted fake OpenAI-compatible endpoint on 127.0.0.1, for fault injection only.

The server runs its own asyncio loop in a background thread, so tests on any event loop
(and subprocesses) can call it. Each request takes the next scripted action, or the
default one: ``{"status", "headers", "json", "raw", "content", "delay", "close",
"close_after", "wire"}`` (``wire``: bytes written verbatim, for HTTP framing tests).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from typing import Any


def chat_json(content: str, *, model: str = "fake-judge", logprobs: list | None = None,
              usage: tuple[int, int] = (100, 10)) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": content},
                              "finish_reason": "stop"}
    if logprobs is not None:
        choice["logprobs"] = {"content": logprobs}
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
            "choices": [choice],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                      "total_tokens": usage[0] + usage[1]}}


class FakeOpenAI:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: deque[Any] = deque()
        self.default: Any = {"content": '{"score": 4, "reason": "fine"}'}
        self.models = ["fake-judge"]
        self.in_flight = 0
        self.peak_in_flight = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self.port = 0

    # -- control ------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"].split("?")[0].endswith("/chat/completions")]

    def push(self, *actions: Any) -> None:
        self.script.extend(actions)

    def start(self) -> FakeOpenAI:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)

            async def boot() -> None:
                self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=512)
                self.port = self._server.sockets[0].getsockname()[1]

            loop.run_until_complete(boot())
            # ready only once run_forever runs: a stop() scheduled earlier would end
            # run_until_complete instead, and run_forever would never return
            loop.call_soon(ready.set)
            loop.run_forever()
            for t in asyncio.all_tasks(loop):
                t.cancel()
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        assert ready.wait(10), "fake endpoint did not start"
        return self

    def stop(self) -> None:
        if self._loop is None:
            return

        def halt() -> None:
            self._server.close()
            self._loop.stop()  # type: ignore[union-attr]

        self._loop.call_soon_threadsafe(halt)
        self._thread.join(10)  # type: ignore[union-attr]

    # -- serving --------------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:  # noqa: C901
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                method, path, _ = line.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                n = int(headers.get("content-length") or 0)
                raw = await reader.readexactly(n) if n else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                req = {"method": method, "path": path, "headers": headers, "body": body, "t": time.monotonic()}
                with self._lock:
                    self.requests.append(req)
                if path.split("?")[0].endswith("/models") and method == "GET":
                    action: Any = {"json": {"object": "list", "data": [{"id": m, "object": "model"}
                                                                       for m in self.models]}}
                else:
                    action = self.script.popleft() if self.script else self.default
                if callable(action):
                    action = action(req)
                with self._lock:
                    self.in_flight += 1
                    self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
                try:
                    if action.get("delay"):
                        await asyncio.sleep(action["delay"])
                finally:
                    with self._lock:
                        self.in_flight -= 1
                if action.get("close"):
                    writer.close()
                    return
                if "wire" in action:  # bytes verbatim: framing tests
                    for part in action["wire"] if isinstance(action["wire"], list) else [action["wire"]]:
                        writer.write(part)
                        await writer.drain()
                        await asyncio.sleep(0.01)
                    if action.get("close_after"):
                        writer.close()
                        return
                    continue
                status = action.get("status", 200)
                if "raw" in action:
                    payload = action["raw"] if isinstance(action["raw"], bytes) else str(action["raw"]).encode()
                elif "json" in action:
                    payload = json.dumps(action["json"]).encode()
                else:
                    payload = json.dumps(chat_json(action.get("content", ""),
                                                   logprobs=action.get("logprobs"))).encode()
                head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(payload)}",
                        "Content-Type: application/json"]
                head += [f"{k}: {v}" for k, v in (action.get("headers") or {}).items()]
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
                await writer.drain()
                if action.get("close_after"):
                    writer.close()
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError, ValueError):
            pass
        finally:
            try:
                writer.close()
            except Exception:
                pass
