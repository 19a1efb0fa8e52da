#!/usr/bin/env bash
# Crash-consistency torture run, long: the test `torture` of the CLI suite
# (crates/hermes/tests/cli/torture.rs) with many events. `hermes up -d` and the native gateway
# in front of a stub model, four clients writing sessions (plain turns and streams), while the
# harness, at random from a seed: SIGKILLs the gateway, SIGKILLs the supervisor and every
# service at once (a killed container; half the time a few ms into a gateway restart), restarts
# the gateway, stops everything cleanly and starts it again, backs up, and — as root, the
# volume on a 256 MiB tmpfs of its own — fills the volume for a moment. After every event every
# SQLite file passes `integrity_check` and the gateway serves again; at the end every turn a
# client saw acknowledged is in state.db.
#
# Prints the test's `torture: {...}` line and writes it to bench/torture/results.jsonl (one line
# per run, with the commit). Not part of the test suite (CI runs the short form, 40 events).
# Knobs (environment): EVENTS (default 500), SEED (default the test's).
# Usage: `bash bench/torture/run.sh` (as root for the full-volume episodes).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
EVENTS="${EVENTS:-500}"
out="$here/results.jsonl"

cd "$repo"
log="$(mktemp)"
HERMES_TORTURE_EVENTS="$EVENTS" ${SEED:+HERMES_TORTURE_SEED="$SEED"} \
    cargo test --quiet -p hermes --test cli torture:: -- --nocapture >"$log" 2>&1 \
    || { tail -n 60 "$log"; echo "the torture run failed (log: $log)" >&2; exit 1; }
line="$(grep -o 'torture: {.*}' "$log" | tail -n1 | cut -d' ' -f2-)"
[ -n "$line" ] || { tail -n 40 "$log"; echo "no tally in the test's output" >&2; exit 1; }
commit="$(git rev-parse --short=8 HEAD 2>/dev/null || echo unknown)"
printf '{"commit":"%s","generated_at":"%s","result":%s}\n' "$commit" "$(date -u +%FT%TZ)" "$line" | tee -a "$out"
