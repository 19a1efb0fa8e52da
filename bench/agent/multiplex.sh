#!/usr/bin/env bash
# Memory of 3 profiles, multiplexed (GATEWAY_MULTIPLEX_PROFILES=1: one gateway serves them all,
# the named ones at /p/<name>/) against one gateway per profile, for BOTH engines — the
# original agent's gateway (hermes-agent 0.20.1 from the fixture source tree, the first release
# that multiplexes) and the native one — side by side in one run, all started through our
# `hermes gateway run` (bench/agent/multiplex.py says what is measured and how).
#
# Steps: makes or reuses the fixture agent's venv (tests/docker/original/venv.sh with
# HERMES_ORIGINAL_SOURCE, the venv the tests use; its pinned dependencies include aiohttp, which
# the API server needs); builds `hermes` and the `gateway_bench` example (its stub upstream);
# runs the harness; writes bench/agent/multiplex.json and prints the table of BENCHMARKS.md.
# Every process started is stopped on every path (EXIT trap). Not part of the test suite.
#
# Usage: bash bench/agent/multiplex.sh   (about 5 minutes after the build on 2 vCPUs)
# Knobs (environment): PROFILES [3], REPEATS [3], SETTLE [seconds, 5],
# HERMES_ORIGINAL_SOURCE [the fixture tarball in ../shared/fixtures/], OUT
# [bench/agent/multiplex.json].
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${OUT:-$here/multiplex.json}"

. "$here/../lib.sh"

command -v python3 >/dev/null 2>&1 || die "\`python3\` is required (the harness)"
source_tarball="${HERMES_ORIGINAL_SOURCE:-}"
if [ -z "$source_tarball" ]; then
    # The fixture beside the repository (or a worktree deeper down), as the tests find it.
    dir="$repo"
    while [ "$dir" != / ]; do
        if [ -f "$dir/shared/fixtures/hermes-agent-0.20.1-src.tar.gz" ]; then
            source_tarball="$dir/shared/fixtures/hermes-agent-0.20.1-src.tar.gz"
            break
        fi
        dir="$(dirname "$dir")"
    done
fi
[ -f "$source_tarball" ] || die "no hermes-agent 0.20.1 source tarball: set HERMES_ORIGINAL_SOURCE to one"
agent="$(HERMES_ORIGINAL_SOURCE="$source_tarball" bash "$repo/tests/docker/original/venv.sh")"
"${agent%/hermes}/python" -c 'import aiohttp' 2>/dev/null ||
    die "the agent's venv (${agent%/bin/hermes}) cannot import aiohttp, which its API server needs"
agent_label="hermes-agent $("${agent%/hermes}/python" -c 'import importlib.metadata as m; print(m.version("hermes-agent"))') ($(basename "$source_tarball"), editable) on $("${agent%/hermes}/python" --version 2>&1)"

log "building the release binary and the gateway_bench example"
(cd "$repo" && cargo build --release --quiet -p hermes && cargo build --release --quiet -p hermes-gateway --example gateway_bench)
target_dir="$(cargo_target_dir "$repo")"
hermes="$target_dir/release/hermes"
bench_bin="$target_dir/release/examples/gateway_bench"
[ -x "$hermes" ] || die "no release binary at \`$hermes\`"
[ -x "$bench_bin" ] || die "no gateway_bench example at \`$bench_bin\`"

work="$(mktemp -d "${TMPDIR:-/tmp}/hermes-bench-agent-multiplex.XXXXXX")"
export BENCH_PGIDS="$work/pgids"
harness=""
cleanup() {
    # The harness stops what it starts; the recorded process groups catch what it could not.
    [ -z "$harness" ] || kill "$harness" 2>/dev/null || true
    [ -z "$harness" ] || wait "$harness" 2>/dev/null || true
    kill_recorded_groups "$BENCH_PGIDS"
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
log "agent: $agent_label; working under $work"

# In the background, so a signal runs the trap at once rather than after the harness.
AGENT_LABEL="$agent_label" python3 "$here/multiplex.py" "$hermes" "$agent" "$bench_bin" "$work" "$out" "$repo" &
harness=$!
wait "$harness"
harness=""
