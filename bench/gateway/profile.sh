#!/usr/bin/env bash
# Where our gateway's added latency goes: `hermes gateway run --no-supervise` (release
# build) and the library's gateway alone (`gateway_bench --serve-gateway`) on the
# multi-thread runtime the CLI uses and on a current-thread runtime, side by side in front
# of the paced stub, against the same client calling the stub directly; per answer: CPU (user, system), run-queue wait, time slices and
# context switches from /proc, and with STRACE=1 the system calls of one more run.
#
# Usage: `bash bench/gateway/profile.sh` (about 5 minutes with the defaults; needs `strace`
# only with STRACE=1). Not part of the test suite: CI never runs it. Writes
# bench/gateway/profile.json and prints the tables; see RESULTS.md, "Where the time goes".
#
# Knobs (environment, defaults in brackets): FIRST_MS [20], GAP_MS [10], CONCURRENCIES
# ["1 32"], REPEATS [3], SECONDS_PER_RUN [10], WARMUP [2], STRACE [1], OUT
# [bench/gateway/profile.json].
set -euo pipefail

export FIRST_MS="${FIRST_MS:-20}" GAP_MS="${GAP_MS:-10}" CONCURRENCIES="${CONCURRENCIES:-1 32}" \
    REPEATS="${REPEATS:-3}" SECONDS_PER_RUN="${SECONDS_PER_RUN:-10}" WARMUP="${WARMUP:-2}" \
    STRACE="${STRACE:-1}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export OUT="${OUT:-$here/profile.json}"

. "$here/../lib.sh"

[ "$STRACE" != 1 ] || ensure_commands strace:strace
log "building the release binary and the gateway_bench example"
(cd "$repo" && cargo build --release --quiet -p hermes && cargo build --release --quiet -p hermes-gateway --example gateway_bench)
BENCH_TARGET="$(cargo_target_dir "$repo")"
BENCH_BIN="$BENCH_TARGET/release/examples/gateway_bench"
RUST_HERMES="$BENCH_TARGET/release/hermes"
[ -x "$BENCH_BIN" ] || die "no gateway_bench example at \`$BENCH_BIN\`"
[ -x "$RUST_HERMES" ] || die "no release binary at \`$RUST_HERMES\`"
export BENCH_TARGET BENCH_BIN RUST_HERMES

BENCH_WORK="$(mktemp -d "${TMPDIR:-/tmp}/hermes-bench-profile.XXXXXX")"
export BENCH_WORK BENCH_PGIDS="$BENCH_WORK/pgids"
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

python3 "$here/profile.py" &
harness=$!
wait "$harness"
harness=""
