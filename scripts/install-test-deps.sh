#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine (run as root; CI does).
# Idempotent: installed packages are skipped.
set -euo pipefail
source "$(dirname "$0")/lib/apt.sh"

need=()
command -v python3 >/dev/null || need+=(python3)
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
command -v unshare >/dev/null || need+=(util-linux)
# tests/docker/original/venv.sh unpacks the 0.20.1 fixture source tree, keyed by its sha256.
command -v tar >/dev/null || need+=(tar)
command -v sha256sum >/dev/null || need+=(coreutils)
command -v sh >/dev/null || need+=(dash)
# The browser suites (hermes_test_support::browser) drive headless Chromium through WebDriver.
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
command -v pgrep >/dev/null || need+=(procps) # the browser tests look for orphans with it
# The torture run's peer: the original under real s6-supervise, as its own image runs it.
command -v s6-supervise >/dev/null || need+=(s6)
if ((${#need[@]})); then
    echo "install-test-deps: installing ${need[*]}"
    apt_install "${need[@]}"
fi

# uv: the installer tests exercise both uv and pip (they skip the uv half when it is absent).
if ! command -v uv >/dev/null; then
    python3 -m pip install --quiet uv || echo "warning: could not install uv; its tests will skip"
fi
