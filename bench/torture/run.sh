#!/usr/bin/env bash
# Crash-consistency torture run, long: the `torture` tests of the CLI suite
# (crates/hermes/tests/cli/torture/) with many events, one deployment after another, the same
# seed for each so they meet the same sequence of events:
#   native      `hermes up -d`, the native gateway
#   agent-0.19  `hermes up -d`, the original agent's gateway as our engine (hermes-agent 0.19.0)
#   agent-0.20  the same with the 0.20.1 fixture
#   s6-0.19     the original under its own image's stop sequence (real s6-supervise, its
#               `finish`, SIGTERM then SIGKILL after 3 s), hermes-agent 0.19.0
#   s6-0.20     the same with the 0.20.1 fixture
# Four clients write sessions (plain turns and streams) while the harness, at random from the
# seed: SIGKILLs the gateway, SIGKILLs everything at once (a killed container; half the time a
# few ms into a restart), restarts the gateway, stops and starts everything, backs up, and —
# as root, the volume on a 256 MiB tmpfs of its own — fills the volume for a moment. After
# every event every SQLite file passes `integrity_check` and the gateway serves again (else it
# counts as left down); at the end every turn a client saw acknowledged must be in state.db.
#
# Prints each run's `torture: {...}` line and appends it to bench/torture/results.jsonl (one
# line per run, with the commit). Not part of the test suite (CI runs the short forms: 40
# events native, 6 for each of the others).
# Knobs (environment): EVENTS (default 500), SEED (default the tests'), TARGETS (default all
# five, space-separated). The agent runs need the PyPI suite's venvs (made on first use).
# Usage: `bash bench/torture/run.sh` (as root for the full-volume episodes).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
EVENTS="${EVENTS:-500}"
TARGETS="${TARGETS:-native agent-0.19 agent-0.20 s6-0.19 s6-0.20}"
out="$here/results.jsonl"

test_of() {
    case "$1" in
        native) echo torture::the_native_gateway_loses_nothing_to_kills_stops_backups_and_a_full_volume ;;
        agent-0.19) echo torture::the_agents_gateway_under_hermes_up_loses_nothing_0_19 ;;
        agent-0.20) echo torture::the_agents_gateway_under_hermes_up_loses_nothing_0_20 ;;
        s6-0.19) echo torture::the_original_under_s6_stop_sequence_0_19 ;;
        s6-0.20) echo torture::the_original_under_s6_stop_sequence_0_20 ;;
        *) echo "unknown target '$1' (native, agent-0.19, agent-0.20, s6-0.19, s6-0.20)" >&2; return 2 ;;
    esac
}

cd "$repo"
commit="$(git rev-parse --short=8 HEAD 2>/dev/null || echo unknown)"
for target in $TARGETS; do
    name="$(test_of "$target")"
    log="$(mktemp)"
    echo "torture: $target, $EVENTS events (log: $log)" >&2
    # A run of ours that loses or corrupts anything fails its test; its tally is still printed.
    # `env`: a variable assignment that comes from an expansion is not one to the shell.
    env HERMES_TEST_PYPI=1 HERMES_TORTURE_EVENTS="$EVENTS" ${SEED:+HERMES_TORTURE_SEED="$SEED"} \
        cargo test --quiet -p hermes --test cli "$name" -- --exact --nocapture >"$log" 2>&1 \
        || { tail -n 40 "$log"; echo "the $target run failed (log: $log)" >&2; }
    line="$(grep -o 'torture: {.*}' "$log" | tail -n1 | cut -d' ' -f2-)"
    [ -n "$line" ] || { tail -n 40 "$log"; echo "no tally in the $target run's output" >&2; exit 1; }
    printf '{"commit":"%s","generated_at":"%s","result":%s}\n' "$commit" "$(date -u +%FT%TZ)" "$line" | tee -a "$out"
done
