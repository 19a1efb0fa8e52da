#!/usr/bin/env bash
# The original agent's gateways (`hermes-agent` from PyPI, `gateway.engine: agent`) supervised
# by our `hermes up` against the same gateways supervised by Debian's s6, side by side in ONE
# run, for N = 1, 3 and 5 gateways:
#   1. memory of the supervision itself, the gateways excluded: RSS and PSS
#      (/proc/<pid>/smaps_rollup) summed over our processes (every process whose executable
#      is our `hermes`, run from a private copy so that no other process on the machine
#      shares its pages: `hermes up` and anything of ours that stays resident) against
#      `s6-svscan` + one `s6-supervise` per gateway ("s6"), and against the layout of the
#      original image, which adds a `log/run` with `s6-log` per gateway ("s6+log": a second
#      `s6-supervise` and an `s6-log` each; our supervisor writes the logs itself), read
#      $SETTLE seconds after every gateway is ready;
#   2. boot to all gateways ready: from starting the supervisor until every gateway answers
#      `GET /health` on its own port (polled every 20 ms); median of $RUNS boots.
#
# Each gateway is a profile (the default one plus p2..pN) with the agent's API server
# platform on (`API_SERVER_ENABLED=true`, a 32-char `API_SERVER_KEY`, its own
# `API_SERVER_PORT`), the model pointed at a stub upstream on loopback (`gateway_bench
# --serve-upstream`) and the offline settings the original needs (`provider: custom`,
# `security.tirith_enabled: false`; the same files bench/gateway/compare.sh writes). Ours
# runs `hermes up` with `HERMES_AGENT_CLI` = the venv's `hermes`, `HERMES_DASHBOARD=0` (off, as
# in the container and in the original image by default; a program, not supervision), every profile's
# `gateway_state.json` saying `running`; its gateway service execs
# `<agent> -p P gateway run --replace --external-supervisor` with `HERMES_S6_SUPERVISED_CHILD=1
# PYTHONUNBUFFERED=1` (docs/gateway.md, "Engines"); each s6 service's `run` execs that same
# command with that same environment. The boots of one N rotate their order between runs.
#
# Steps (each idempotent; run it again at will): makes or reuses a venv with
# `hermes-agent[sms]==$PY_VERSION` in $BENCH_CACHE (the one bench/gateway/compare.sh uses;
# `sms` adds aiohttp, which the API server needs); installs Debian's `s6` when missing;
# builds `hermes` and the `gateway_bench` example (release); runs bench/agent/harness.py;
# writes bench/agent/results.json and prints markdown tables. A boot that fails is reported
# with its error and log tail, never given a number. Every process started is stopped on
# every path (EXIT trap). Not part of the test suite: CI never runs it.
#
# Usage: bash bench/agent/run.sh
# Knobs (environment): COUNTS (default 1,3,5), RUNS (default 3), SETTLE (seconds between
# readiness and the memory reading, default 5), TIMEOUT (seconds a boot may take, default
# 180), PY_VERSION (default 0.19.0), BENCH_CACHE (default ${TMPDIR:-/tmp}/hermes-bench-gateway),
# OUT (default bench/agent/results.json).
set -euo pipefail

COUNTS="${COUNTS:-1,3,5}"
RUNS="${RUNS:-3}"
SETTLE="${SETTLE:-5}"
TIMEOUT="${TIMEOUT:-180}"
PY_VERSION="${PY_VERSION:-0.19.0}"
BENCH_CACHE="${BENCH_CACHE:-${TMPDIR:-/tmp}/hermes-bench-gateway}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
results="${OUT:-$here/results.json}"

. "$here/../lib.sh"

command -v python3 >/dev/null 2>&1 || die "\`python3\` is required (for the venv and the harness)"
command -v cargo >/dev/null 2>&1 || die "\`cargo\` is required to build \`hermes\`"
ensure_commands s6-svscan:s6 s6-log:s6

venv="$BENCH_CACHE/venv-hermes-agent-$PY_VERSION-sms"
agent="$(hermes_agent_venv "$venv" "hermes-agent[sms]==$PY_VERSION" "$PY_VERSION" aiohttp)"

log "building the release binary and the gateway_bench example"
(cd "$repo" && cargo build --release --quiet -p hermes && cargo build --release --quiet -p hermes-gateway --example gateway_bench)
target_dir="$(cargo_target_dir "$repo")"
hermes="$target_dir/release/hermes"
bench_bin="$target_dir/release/examples/gateway_bench"
[ -x "$hermes" ] || die "no release binary at \`$hermes\`"
[ -x "$bench_bin" ] || die "no gateway_bench example at \`$bench_bin\`"

work="$(mktemp -d "${TMPDIR:-/tmp}/hermes-bench-agent.XXXXXX")"
# The harness stops what it starts; the trap catches what it could not (it was killed). Every
# process of the run inherits HERMES_BENCH_AGENT_WORK (both supervisors pass their whole
# environment on), so that mark finds them all, the gateways in sessions of their own
# included, and nothing that is not ours.
export HERMES_BENCH_AGENT_WORK="$work"
cleanup() {
    local environ pid
    for environ in /proc/[0-9]*/environ; do
        pid="${environ#/proc/}" pid="${pid%/environ}"
        [ "$pid" = "$$" ] && continue
        tr '\0' '\n' 2>/dev/null <"$environ" | grep -qxF "HERMES_BENCH_AGENT_WORK=$work" &&
            kill -KILL "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
log "working under $work"
# A private copy of our binary: PSS splits a file's pages among every process that maps it,
# and other work on the machine may run the build's `hermes`; in a container the supervisor
# is the one process left mapping it once the gateways have exec'd the agent.
cp "$hermes" "$work/hermes"
hermes="$work/hermes"

# In the background, so a signal runs the trap at once rather than after the harness.
python3 "$here/harness.py" "$hermes" "$agent" "$bench_bin" "$work" "$results" "$repo" \
    "$COUNTS" "$RUNS" "$SETTLE" "$TIMEOUT" &
wait $!
