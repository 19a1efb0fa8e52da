#!/usr/bin/env bash
# Memory of N profiles: one native gateway multiplexing them (GATEWAY_MULTIPLEX_PROFILES=1)
# against N native gateways, one per profile, side by side in one run (bench/gateway/multiplex.py
# says what is measured and how). Builds the release binary and the gateway_bench example
# (its stub upstream and its client), runs the harness, writes bench/gateway/multiplex.json and
# prints the table of BENCHMARKS.md. Not part of the test suite.
#
# Usage: `bash bench/gateway/multiplex.sh` (a few minutes after the build). Knobs (environment):
# PROFILES [3], REPEATS [3], REQUESTS [50 per profile and mode], CONCURRENCY [4], SETTLE [3],
# OUT [bench/gateway/multiplex.json].
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

. "$here/../lib.sh"

command -v python3 >/dev/null 2>&1 || die "\`python3\` is required (the harness)"
log "building the release binary and the gateway_bench example"
(cd "$repo" && cargo build --release --quiet -p hermes && cargo build --release --quiet -p hermes-gateway --example gateway_bench)
BENCH_TARGET="$(cargo_target_dir "$repo")"
export BENCH_TARGET

BENCH_WORK="$(mktemp -d "${TMPDIR:-/tmp}/hermes-bench-multiplex.XXXXXX")"
export BENCH_PGIDS="$BENCH_WORK/pgids"
harness=""
cleanup() {
    # The harness stops what it starts; the recorded process groups catch what it could not.
    [ -z "$harness" ] || kill "$harness" 2>/dev/null || true
    [ -z "$harness" ] || wait "$harness" 2>/dev/null || true
    kill_recorded_groups "$BENCH_PGIDS"
    rm -rf "$BENCH_WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

python3 "$here/multiplex.py" &
harness=$!
wait "$harness"
harness=""
