#!/usr/bin/env bash
# Installs what the build (and, with the argument "test", the tests) need: Debian packages via
# apt-get, Python packages pinned in tests/requirements.txt via pip. Idempotent and quiet when
# everything is present.   usage: tools/deps.sh [build|test]
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-test}

debs=(build-essential pkg-config libmicrohttpd-dev libjansson-dev libuv1-dev libpcre2-dev
      libunistring-dev)
if [ "$what" = test ]; then
    debs+=(curl clang libclang-rt-14-dev systemd
           chromium chromium-driver) # headless browser for the web console tests (tests/web)
fi
missing=()
for p in "${debs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "deps: installing Debian packages: ${missing[*]}"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
[ "$what" = test ] || exit 0

py=${PYTHON:-python3}
if ! $py tools/check_requirements.py tests/requirements.txt 2>/dev/null; then
    echo "deps: installing Python packages from tests/requirements.txt (torch is large; pip caches it)"
    $py -m pip install -q -r tests/requirements.txt
fi
