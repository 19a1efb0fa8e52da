#!/usr/bin/env bash
# `--cap-drop CHOWN`: boot degrades (a warning for the skipped ownership repair and the
# socket's group, said once each) and everything works; the gateway's log directory on the
# volume is still the service user's (created as that user: root cannot chown without
# CAP_CHOWN). `--cap-drop ALL` as root: root cannot
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

v=$(mkvolume chown-data)
c3=$(dstart chown-gw --cap-drop CHOWN -v "$v:/opt/data" -e HERMES_GATEWAY_BOOTSTRAP_STATE=running -- sleep 300)
wait_for 30 "gateway-default up" -- service_is "$c3" gateway-default up
wait_for 30 "the gateway's log exists" -- docker exec "$c3" test -s /opt/data/logs/gateways/default/current
assert_rc 0 "owner of logs/gateways/default" -- docker exec "$c3" stat -c '%u:%g' /opt/data/logs/gateways/default
assert_eq "10000:10000" "$OUT" "logs/gateways/default belongs to hermes under --cap-drop CHOWN"
assert_rc 0 "owner of its current" -- docker exec "$c3" stat -c '%u:%g' /opt/data/logs/gateways/default/current
assert_eq "10000:10000" "$OUT" "logs/gateways/default/current belongs to hermes"

assert_rc 1 "--cap-drop ALL as root: the boot stops" -- drun --cap-drop ALL -- sh -c 'echo main-ran'
assert_not_contains "$OUT" "main-ran" "the main program did not run"
assert_contains "$OUT" "--user 10000:10000" "the message says what works"
assert_rc 0 "--cap-drop ALL --user 10000:10000: the main program runs" -- \
    drun --cap-drop ALL --user 10000:10000 -- sh -c 'echo main-ran'
assert_contains "$OUT" "main-ran" "main program ran with no capability at all"
c2=$(dstart all --cap-drop ALL --user 10000:10000 -- sleep 300)
wait_up "$c2"
finish
