#!/usr/bin/env bash
# `--cap-drop CHOWN` / `--cap-drop ALL`: boot degrades (warns once) instead of exiting before
# the main program.
source "$(dirname "$0")/lib.sh"

assert_rc 0 "--cap-drop CHOWN: the main program runs" -- drun --cap-drop CHOWN -- sh -c 'echo main-ran'
assert_contains "$OUT" "main-ran" "main program ran with --cap-drop CHOWN"
c=$(dstart chown --cap-drop CHOWN -- sleep 300)
wait_up "$c"

# ALL capabilities dropped: root cannot switch users, so the data must already be hermes's
# (a named volume is) and the main program still runs.
assert_rc 0 "--cap-drop ALL: the main program runs" -- drun --cap-drop ALL -- sh -c 'echo main-ran'
assert_contains "$OUT" "main-ran" "main program ran with --cap-drop ALL"
warnings=$(grep -c 'warning' <<<"$OUT")
assert_le "$warnings" 3 "a few warnings, not one per path"
c2=$(dstart all --cap-drop ALL -- sleep 300)
wait_up "$c2"
finish
