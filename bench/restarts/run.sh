#!/usr/bin/env bash
# Requests lost per gateway restart and per crash, under constant load, side by side in ONE run:
#   1. native: ours, `hermes up` with the default profile's native gateway; restarts with
#      `hermes gateway restart` (the supervisor holds the API socket across restarts and
#      crashes, the native gateway is replaced by hand-over), kills with `kill -9` of the pid
#      `hermes service status gateway-default --json` gives;
#   2. agent: the same with `gateway.engine: agent` and HERMES_AGENT_CLI at a venv of
#      hermes-agent that has our socket hook (installed with docker/agent-site.sh, as the image
#      does): the agent serves the supervisor's socket, its restart is stop-then-start;
#   3. original: hermes-agent's own `hermes gateway run --replace` under `s6-supervise` (the run
#      script the original image writes), restarts with `s6-svc -t`, kills with `kill -9`.
# Load: 4 clients sending plain chat completions and 2 reading ~2 s streamed chats (20 chunks
# every 100 ms from a stub upstream, bench/restarts/harness.py), every request on a new
# connection, back to back, while the gateway is restarted N times (about every 2 s, each once
# the gateway serves again) and then killed N times. Counted per event: requests sent,
# refused (connect error), failed otherwise, streams broken, the longest pause in answers, the
# time until it serves again; medians over the events of a kind.
#
# Steps (each idempotent; run it again at will): installs Debian's `s6` when missing; makes or
# reuses a venv with `hermes-agent[sms]==$PY_VERSION` (`sms` adds aiohttp, which the agent's API
# server needs) in $BENCH_CACHE and installs the socket hook into it (a venv of its own: the
# other benchmarks' venv stays without the hook); builds `hermes` (release); runs the harness;
# writes bench/restarts/results.json and RESULTS.md and prints the Markdown table. Every
# process started is stopped on every path (EXIT trap). Everything on loopback. Not part of
# the test suite: CI never runs it. With the defaults about 4.5 minutes on a quiet 2-core
# machine, 8 with builds beside it (the agent's stop, start and first answer take most of it);
# the venv and the build aside.
#
# Usage: bash bench/restarts/run.sh [restarts]        (default 5: 5 restarts, then 5 kills)
# Knobs (environment): ROWS (default native,agent,original), PY_VERSION (default 0.19.0),
# BENCH_CACHE (default ${TMPDIR:-/tmp}/hermes-bench-restarts), OUT_DIR (default
# bench/restarts), BENCH_NO_BUILD=1 (use the release binary as it is), KEEP_WORK=1 (keep the
# working directory, with every setup's home and log, for a look after the run).
set -euo pipefail

RESTARTS="${1:-5}"
ROWS="${ROWS:-native,agent,original}"
PY_VERSION="${PY_VERSION:-0.19.0}"
BENCH_CACHE="${BENCH_CACHE:-${TMPDIR:-/tmp}/hermes-bench-restarts}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out_dir="${OUT_DIR:-$here}"

. "$here/../lib.sh"

case "$RESTARTS" in '' | *[!0-9]* | 0) die "restarts must be a positive number (got \`$RESTARTS\`)" ;; esac
command -v python3 >/dev/null 2>&1 || die "\`python3\` is required (for the venv and the harness)"
command -v cargo >/dev/null 2>&1 || die "\`cargo\` is required to build \`hermes\`"
ensure_commands s6-supervise:s6 s6-svc:s6 s6-svstat:s6

# --- the agent, with the socket hook ------------------------------------------------------
venv="$BENCH_CACHE/venv-hermes-agent-$PY_VERSION-sms-hook"
agent="$(hermes_agent_venv "$venv" "hermes-agent[sms]==$PY_VERSION" "$PY_VERSION" aiohttp)"
# The same files the image installs (agent-site.sh takes them from the repository).
sh "$repo/docker/agent-site.sh" "$venv" >/dev/null

# --- ours ---------------------------------------------------------------------------------
if [ -z "${BENCH_NO_BUILD:-}" ]; then
    log "building the release binary"
    (cd "$repo" && cargo build --release --quiet -p hermes)
fi
hermes="$(cargo_target_dir "$repo")/release/hermes"
[ -x "$hermes" ] || die "no release binary at \`$hermes\`: run without BENCH_NO_BUILD"

# --- the run ------------------------------------------------------------------------------
work="$(mktemp -d "${TMPDIR:-/tmp}/hermes-bench-restarts-run.XXXXXX")"
# The harness stops what it starts; the trap catches what it could not (it was killed). Every
# process of the run inherits HERMES_BENCH_RESTARTS_WORK (both supervisors pass their whole
# environment on), so that mark finds them all, the gateways in sessions of their own
# included, and nothing that is not ours.
export HERMES_BENCH_RESTARTS_WORK="$work"
export BENCH_PGIDS="$work/pgids"
cleanup() {
    local environ pid
    kill_recorded_groups "$BENCH_PGIDS"
    for environ in /proc/[0-9]*/environ; do
        pid="${environ#/proc/}" pid="${pid%/environ}"
        [ "$pid" = "$$" ] && continue
        tr '\0' '\n' 2>/dev/null <"$environ" | grep -qxF "HERMES_BENCH_RESTARTS_WORK=$work" &&
            kill -KILL "$pid" 2>/dev/null || true
    done
    if [ -n "${KEEP_WORK:-}" ]; then log "kept $work (KEEP_WORK)"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
log "working under $work"

command_line="bash bench/restarts/run.sh $RESTARTS"
[ "$ROWS" = "native,agent,original" ] || command_line="ROWS=$ROWS $command_line"
# In the background, so a signal runs the trap at once rather than after the harness.
python3 "$here/harness.py" run "$hermes" "$agent" "$work" "$out_dir" "$RESTARTS" "$ROWS" \
    "$repo" "$command_line" &
wait $!
