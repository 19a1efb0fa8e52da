#!/usr/bin/env bash
# Added latency and memory per gateway, side by side in one run: our gateway (`hermes
# gateway run --no-supervise`, release build), LiteLLM's proxy (`litellm[proxy]` from PyPI)
# and the original Python gateway (`hermes-agent` from PyPI, its API server platform), all
# in front of ONE stub upstream paced like a provider, and the same client calling the stub
# directly for the baseline.
#
# Usage: `bash bench/gateway/latency.sh` (about 15 minutes with the defaults). Not part of
# the test suite: CI never runs it.
#
# What it does (every step is idempotent, so it can simply be run again):
#   1. creates (or reuses) two venvs under $BENCH_CACHE: `hermes-agent[sms]==$PY_VERSION`
#      (the one compare.sh uses) and `litellm[proxy]==$LITELLM_VERSION`;
#   2. builds `hermes` and the `gateway_bench` example in release mode;
#   3. runs `latency.py`: starts the stub (`gateway_bench --serve-upstream $FIRST_MS
#      $GAP_MS`: first chunk after FIRST_MS, then one chunk every GAP_MS, ~8 chunks per
#      answer), our gateway and LiteLLM (each from a fresh directory; LiteLLM with a
#      `config.yaml` holding one OpenAI-compatible model entry for the stub and a master
#      key, no database, no UI), lets them settle, reads their memory, then $REPEATS times,
#      for each concurrency in $CONCURRENCIES, drives direct / ours / LiteLLM in turn with
#      `gateway_bench --timed` (a fixed number of concurrent streams for $SECONDS seconds
#      after $WARMUP untimed seconds on the same connections); then the Python gateway
#      alone, once per concurrency, bounded by $PY_SECONDS (no request starts later), a
#      grace of $PY_GRACE seconds for the open ones, and at most $PY_MAX_REQUESTS requests
#      (or the concurrency, if higher); memory per gateway is summed over its process tree;
#   4. writes `bench/gateway/latency.json` (every run's distribution, CPU used by each
#      gateway and the client, the machine's busy share, log tails) and prints the tables.
#
# Every answer is checked: it counts only if its text is exactly the stub's echo of the
# question. A gateway that does not come up, or a run with errors or abandoned requests,
# is reported with its first error and never given a latency it did not earn. Every
# process started is stopped on every path (the harness's own cleanup, and this script's
# EXIT trap as a safety net).
#
# Knobs (environment, defaults in brackets): FIRST_MS [20], GAP_MS [10], CONCURRENCIES
# ["1 32 256"], REPEATS [3], SECONDS_PER_RUN [10], WARMUP [2], GRACE [30], SETTLE [5],
# PAUSE [1], PY_SECONDS [30], PY_GRACE [90], PY_MAX_REQUESTS [200], PY_WARMUP [4],
# SKIP_PYTHON [0], PY_VERSION [0.19.0], LITELLM_VERSION [1.106.12], BENCH_CACHE
# [${TMPDIR:-/tmp}/hermes-bench-gateway], OUT [bench/gateway/latency.json].
set -euo pipefail

FIRST_MS="${FIRST_MS:-20}"
GAP_MS="${GAP_MS:-10}"
CONCURRENCIES="${CONCURRENCIES:-1 32 256}"
REPEATS="${REPEATS:-3}"
SECONDS_PER_RUN="${SECONDS_PER_RUN:-10}"
WARMUP="${WARMUP:-2}"
GRACE="${GRACE:-30}"
SETTLE="${SETTLE:-5}"
PAUSE="${PAUSE:-1}"
PY_SECONDS="${PY_SECONDS:-30}"
PY_GRACE="${PY_GRACE:-90}"
PY_MAX_REQUESTS="${PY_MAX_REQUESTS:-200}"
PY_WARMUP="${PY_WARMUP:-4}"
SKIP_PYTHON="${SKIP_PYTHON:-0}"
PY_VERSION="${PY_VERSION:-0.19.0}"
# The newest release whose `proxy` extra resolves from PyPI when this was written (later
# ones pin `litellm-proxy*` packages that are not published).
LITELLM_VERSION="${LITELLM_VERSION:-1.106.12}"
BENCH_CACHE="${BENCH_CACHE:-${TMPDIR:-/tmp}/hermes-bench-gateway}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
OUT="${OUT:-$here/latency.json}"

. "$here/../lib.sh"

command -v python3 >/dev/null 2>&1 || die "\`python3\` is required (for the venvs and the harness)"
command -v cargo >/dev/null 2>&1 || die "\`cargo\` is required to build our gateway"

# --- 1. the Python peers ----------------------------------------------------------------
py_requirement="hermes-agent[sms]==$PY_VERSION"
litellm_requirement="litellm[proxy]==$LITELLM_VERSION"
py_hermes=""
if [ "$SKIP_PYTHON" != 1 ]; then
    py_hermes="$(hermes_agent_venv "$BENCH_CACHE/venv-hermes-agent-$PY_VERSION-sms" "$py_requirement" "$PY_VERSION" aiohttp)"
fi
litellm="$(pip_venv "$BENCH_CACHE/venv-litellm-$LITELLM_VERSION" "$litellm_requirement" litellm "$LITELLM_VERSION" litellm)"

# --- 2. our gateway, the stub and the client --------------------------------------------
log "building the release binary and the gateway_bench example"
(cd "$repo" && cargo build --release --quiet -p hermes && cargo build --release --quiet -p hermes-gateway --example gateway_bench)
target_dir="$(cargo_target_dir "$repo")"
rs_hermes="$target_dir/release/hermes"
bench_bin="$target_dir/release/examples/gateway_bench"
[ -x "$rs_hermes" ] || die "no release binary at \`$rs_hermes\`"
[ -x "$bench_bin" ] || die "no gateway_bench example at \`$bench_bin\`"

# --- 3-4. the harness -------------------------------------------------------------------
work="$(mktemp -d "${TMPDIR:-/tmp}/hermes-bench-latency.XXXXXX")"
harness=""
export BENCH_PGIDS="$work/pgids"
cleanup() {
    # The harness stops what it starts on every path of its own (SIGTERM included); the
    # recorded process groups catch what it could not (it was killed outright).
    [ -z "$harness" ] || kill "$harness" 2>/dev/null || true
    [ -z "$harness" ] || wait "$harness" 2>/dev/null || true
    kill_recorded_groups "$BENCH_PGIDS"
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
log "working under $work"

# The harness reads the knobs above and these paths from its environment.
export FIRST_MS GAP_MS CONCURRENCIES REPEATS SECONDS_PER_RUN WARMUP GRACE SETTLE PAUSE \
    PY_SECONDS PY_GRACE PY_MAX_REQUESTS PY_WARMUP SKIP_PYTHON BENCH_CACHE OUT
export BENCH_WORK="$work" BENCH_REPO="$repo" BENCH_TARGET="$target_dir" BENCH_BIN="$bench_bin" \
    RUST_HERMES="$rs_hermes" PYTHON_HERMES="$py_hermes" LITELLM_BIN="$litellm" \
    PYTHON_REQUIREMENT="$py_requirement" LITELLM_REQUIREMENT="$litellm_requirement"
python3 "$here/latency.py" &
harness=$!
wait "$harness"
harness=""
