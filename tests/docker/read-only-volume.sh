#!/usr/bin/env bash
# A data volume nothing can be saved to stops the boot with one line saying what to fix,
# before the main program runs.
source "$(dirname "$0")/lib.sh"

v=$(mkvolume data)
drun -v "$v:/opt/data" -- true >/dev/null 2>&1   # seeded once, as a real volume would be
assert_rc 1 "read-only volume" -- drun -v "$v:/opt/data:ro" -- sh -c 'echo MAIN-RAN'
assert_not_contains "$OUT" "MAIN-RAN" "the main program did not run"
assert_match "$OUT" "/opt/data" "the message names the volume"
assert_le "$(grep -c . <<<"$(grep -v '^\[init\] \(reconcile\|seeded\)' <<<"$OUT")")" 3 "one line (and a hint), not a warning per path"

finish
