#!/usr/bin/env bash
# `docker run IMAGE init -- CMD` (a CMD written for an image whose entrypoint was not hermes):
# no second supervisor inside the first; CMD runs as the main program.
source "$(dirname "$0")/lib.sh"

assert_rc 5 "init -- CMD: CMD's exit code" -- drun -- init -- sh -c 'exit 5'
boots=$(grep -c 'reconcile: profile=default' <<<"$OUT")
assert_eq 1 "$boots" "one boot (one reconcile line), not a nested second one"
assert_not_contains "$OUT" "for the control socket" "no second supervisor looking for a socket"
assert_rc 0 "hermes init -- CMD as CMD" -- drun -- hermes init -- sh -c 'ps -eo user=,comm= | grep -c "^root"'
assert_eq 1 "$(plain "$OUT" | tail -n 1)" "one root process (PID 1) only"
finish
