#!/usr/bin/env bash
# Installs the real services the test suite starts on loopback: PostgreSQL (store tests)
# and Chromium + Playwright (dashboard tests). Idempotent; needs root for apt-get.
# Usage: scripts/install_test_services.sh PYTHON
set -euo pipefail
PY="${1:-python3}"
need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install_test_services: need ${need[*]} from Debian; run as root or: sudo apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
