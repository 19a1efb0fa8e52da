#!/usr/bin/env bash
# `--cap-drop CHOWN`: boot degrades (a warning for the skipped ownership repair and the
# socket's group, said once each) and everything works. `--cap-drop ALL` as root: root cannot
# become the service user, so the boot stops with one line pointing at `--user`, with which
# the same container needs no capability at all.
source "$(dirname "$0")/lib.sh"

assert_rc 0 "--cap-drop CHOWN: the main program runs" -- drun --cap-drop CHOWN -- sh -c 'echo main-ran'
assert_contains "$OUT" "main-ran" "main program ran with --cap-drop CHOWN"
warnings=$(grep -c 'warning' <<<"$OUT" || true)
assert_le "$warnings" 3 "a few warnings, not one per path"
c=$(dstart chown --cap-drop CHOWN -- sleep 300)
wait_up "$c"
assert_rc 0 "the service user reaches the supervisor without the socket's group" -- \
    docker exec "$c" hermes service status

assert_rc 1 "--cap-drop ALL as root: the boot stops" -- drun --cap-drop ALL -- sh -c 'echo main-ran'
assert_not_contains "$OUT" "main-ran" "the main program did not run"
assert_contains "$OUT" "--user 10000:10000" "the message says what works"
assert_rc 0 "--cap-drop ALL --user 10000:10000: the main program runs" -- \
    drun --cap-drop ALL --user 10000:10000 -- sh -c 'echo main-ran'
assert_contains "$OUT" "main-ran" "main program ran with no capability at all"
c2=$(dstart all --cap-drop ALL --user 10000:10000 -- sleep 300)
wait_up "$c2"
finish
