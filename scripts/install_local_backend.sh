#!/usr/bin/env bash
# Install assay's in-process llama.cpp backend (llama-cpp-python) into a virtual environment.
#
#   scripts/install_local_backend.sh [VENV_PYTHON]        (default: python3)
#
# llama-cpp-python ships no wheel on PyPI: pip compiles llama.cpp from the sdist (~5 min on
# 2 cores). Its default build is `-march=native`, which on the Xeon machines we run on turns on
# AMX / AVX-512 code paths that segfault; and pip's own wheel cache happily hands back such a
# native build made earlier with other flags. So this script:
#
#   1. returns at once if `import llama_cpp` works, the version is the pinned one and the
#      marker file in the venv says it was installed from a wheel built with our flags;
#   2. else installs the portable wheel from our own cache folder (outside the repo), keyed by
#      llama-cpp-python version + build flags + Python tag + platform;
#   3. else builds that wheel once (pip --no-cache-dir --no-binary, so no cached native build
#      can sneak in), stores it in the cache, and installs it.
#
# Environment:
#   ASSAY_WHEEL_CACHE   cache folder (default: ${XDG_CACHE_HOME:-$HOME/.cache}/assay/wheels)
#   ASSAY_LLAMA_EXTRAS  extras of llama-cpp-python to install (default: "server", which
#                       gives `python -m llama_cpp.server`; set to "" for none)
#   ASSAY_LLAMA_FORCE=1 rebuild the wheel even if the cache has one
set -euo pipefail

PY="${1:-${PYTHON:-python3}}"
LLAMA_CPP_VERSION="0.3.36"
# Portable x86-64-v3 build: AVX2/FMA/F16C on (ggml's default once NATIVE is off), AVX-512 and
# AMX explicitly off; no multimodal (mtmd/llava) library, which assay does not use.
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF"
EXTRAS="${ASSAY_LLAMA_EXTRAS-server}"
CACHE_ROOT="${ASSAY_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/assay/wheels}"

say() { printf 'install_local_backend: %s\n' "$*" >&2; }

if ! "$PY" -c 'import sys' 2>/dev/null; then
    say "no usable Python at '$PY'"; exit 2
fi

# What identifies a build: version, flags, interpreter tag, platform.
read -r PYTAG PLAT PREFIX < <("$PY" -c 'import sys, sysconfig; print(sys.implementation.cache_tag, sysconfig.get_platform(), sys.prefix)')
FLAGS_HASH="$(printf '%s' "$LLAMA_CMAKE_ARGS" | sha256sum | cut -c1-12)"
KEY="llama-cpp-python-${LLAMA_CPP_VERSION}-${FLAGS_HASH}-${PYTAG}-${PLAT}"
MARKER_VALUE="${KEY} extras=${EXTRAS}"
MARKER="${PREFIX}/.assay-llama-cpp"
WHEEL_DIR="${CACHE_ROOT}/${KEY}"

installed_ok() {
    [ -f "$MARKER" ] && [ "$(cat "$MARKER")" = "$MARKER_VALUE" ] || return 1
    "$PY" - "$LLAMA_CPP_VERSION" <<'EOF' 2>/dev/null
import sys
import llama_cpp
sys.exit(0 if llama_cpp.__version__ == sys.argv[1] else 1)
EOF
}

if [ "${ASSAY_LLAMA_FORCE:-0}" != 1 ] && installed_ok; then
    say "llama-cpp-python ${LLAMA_CPP_VERSION} (portable build) already installed"
    exit 0
fi

mkdir -p "$CACHE_ROOT"
# One builder at a time (make demo and make test may run side by side).
exec 9>"${CACHE_ROOT}/.lock"
if command -v flock >/dev/null 2>&1; then
    flock 9
fi

find_wheel() { ls "$WHEEL_DIR"/llama_cpp_python-"${LLAMA_CPP_VERSION}"-*.whl 2>/dev/null | head -n 1; }

WHEEL="$(find_wheel || true)"
if [ "${ASSAY_LLAMA_FORCE:-0}" = 1 ] || [ -z "$WHEEL" ]; then
    say "building llama-cpp-python ${LLAMA_CPP_VERSION} (portable: ${LLAMA_CMAKE_ARGS}): compiling llama.cpp takes about 5 min on 2 cores, once per machine (the wheel is kept in ${CACHE_ROOT})"
    BUILD_START=$SECONDS
    TMP="$(mktemp -d "${CACHE_ROOT}/.build.XXXXXX")"
    trap 'rm -rf "$TMP"' EXIT
    CMAKE_ARGS="$LLAMA_CMAKE_ARGS" \
    FORCE_CMAKE=1 \
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}" \
        "$PY" -m pip wheel --no-cache-dir --no-deps --no-binary llama-cpp-python \
            -w "$TMP" "llama-cpp-python==${LLAMA_CPP_VERSION}"
    BUILT="$(ls "$TMP"/llama_cpp_python-"${LLAMA_CPP_VERSION}"-*.whl | head -n 1)"
    rm -rf "$WHEEL_DIR"
    mkdir -p "$WHEEL_DIR"
    mv "$BUILT" "$WHEEL_DIR/"
    printf '%s\n' "$LLAMA_CMAKE_ARGS" >"$WHEEL_DIR/CMAKE_ARGS"
    WHEEL="$(find_wheel)"
    say "built in $((SECONDS - BUILD_START)) s; cached $(basename "$WHEEL") in $WHEEL_DIR"
else
    say "installing cached portable wheel $(basename "$WHEEL")"
fi

REQ="llama-cpp-python==${LLAMA_CPP_VERSION}"
[ -n "$EXTRAS" ] && REQ="llama-cpp-python[${EXTRAS}]==${LLAMA_CPP_VERSION}"
# --no-index: llama-cpp-python can only come from our folder; its dependencies are taken from the
# environment when present (offline), else from the index.
if ! "$PY" -m pip install -q --no-index --find-links "$WHEEL_DIR" --force-reinstall --no-deps "$REQ"; then
    say "could not install $(basename "$WHEEL")"; exit 1
fi
if ! "$PY" -m pip install -q --no-index --find-links "$WHEEL_DIR" "$REQ" 2>/dev/null; then
    "$PY" -m pip install -q --find-links "$WHEEL_DIR" --only-binary llama-cpp-python "$REQ"
fi

# Check that the library loads and the CPU backend is the portable one before writing the marker.
"$PY" - <<'EOF'
import llama_cpp
info = llama_cpp.llama_print_system_info().decode(errors="replace")
bad = [f for f in ("AVX512 = 1", "AMX_INT8 = 1", "AVX512_BF16 = 1") if f in info]
print("install_local_backend: llama-cpp-python", llama_cpp.__version__, "|", info.strip())
if bad:
    raise SystemExit(f"install_local_backend: the installed build uses {bad}: not the portable wheel")
EOF
printf '%s\n' "$MARKER_VALUE" >"$MARKER"
say "done"
