#!/usr/bin/env bash
# Installs the real services the test suite starts on loopback: PostgreSQL (store tests)
# and Chromium (dashboard tests); and WordNet 3.0 (Debian wordnet-base + wordnet-sense-index),
# which METEOR's synonym stage reads and its reference-value tests compare against.
# Idempotent; needs root for apt-get.
# Usage: scripts/install_test_services.sh PYTHON
set -euo pipefail
PY="${1:-python3}"
need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ -f /usr/share/wordnet/data.noun ] || need+=(wordnet-base)
[ -f /usr/share/wordnet/index.sense ] || need+=(wordnet-sense-index)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install_test_services: need ${need[*]} from Debian; run as root or: sudo apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
