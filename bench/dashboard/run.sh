#!/usr/bin/env bash
# Our dashboard and the original's, side by side in one run: first-screen weight in headless
# Chromium, `GET /api/status` latency with 32 concurrent clients while 20 services run, and
# the dashboard process's memory (bench/dashboard/harness.py says exactly what is measured).
#
# Steps: installs Debian's chromium and chromium-driver when missing; makes or reuses the venv
# with hermes-agent==$PY_VERSION (bench/lib.sh; the one the gateway benchmark uses); builds
# `hermes` (release); runs the harness; writes $OUT. Not part of the test suite.
#
# Usage: bash bench/dashboard/run.sh
# Knobs: CLIENTS (32), SERVICES (20), LOAD_SECONDS (10), PY_VERSION (0.19.0), SKIP_PYTHON=1 (ours
# only), BENCH_CACHE (${TMPDIR:-/tmp}/hermes-bench-gateway), OUT (bench/dashboard/results.json).
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib.sh

PY_VERSION="${PY_VERSION:-0.19.0}"
BENCH_CACHE="${BENCH_CACHE:-${TMPDIR:-/tmp}/hermes-bench-gateway}"
OUT="${OUT:-bench/dashboard/results.json}"

ensure_commands chromium:chromium chromedriver:chromium-driver python3:python3
agent=()
if [ "${SKIP_PYTHON:-0}" != 1 ]; then
    agent=(--agent "$(hermes_agent_venv "$BENCH_CACHE/venv" "hermes-agent[sms]==$PY_VERSION" "$PY_VERSION")")
fi
log "building hermes (release)"
cargo build --release -q -p hermes
python3 bench/dashboard/harness.py --hermes target/release/hermes "${agent[@]}" \
    --clients "${CLIENTS:-32}" --services "${SERVICES:-20}" --seconds "${LOAD_SECONDS:-10}" --out "$OUT"
