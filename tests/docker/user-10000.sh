#!/usr/bin/env bash
# `docker run --user 10000:10000`: no root at all. Boot, gateways, the supervisor and the CLI
# (docker exec, which then runs as 10000 too) all work. Any other uid is refused in the
# original's words (`not supported`), with the HERMES_UID remedy.
source "$(dirname "$0")/lib.sh"

v=$(mkvolume data)
c=$(dstart u -v "$v:/opt/data" --user 10000:10000 -e HERMES_GATEWAY_BOOTSTRAP_STATE=running -- sleep 300)
wait_for 30 "docker exec hermes service status answers" -- supervisor_up "$c"
assert_rc 0 "service status" -- docker exec "$c" hermes service status
wait_for 30 "gateway-default up" -- service_is "$c" gateway-default up
assert_rc 0 "gateway answers /health" -- docker exec "$c" curl -fsS http://127.0.0.1:8642/health
assert_rc 0 "profile create registers its gateway" -- docker exec "$c" hermes profile create work --no-alias
assert_rc 0 "gateway start" -- docker exec "$c" hermes -p work gateway start
wait_for 30 "gateway-work up" -- service_is "$c" gateway-work up
# (the main program counts as `starting` for its first second)
wait_for 15 "hermes health exits 0" -- docker exec "$c" hermes health
assert_rc 0 "main program runs as 10000" -- docker exec "$c" ps -o uid= -p 1
assert_contains "$OUT" "10000" "PID 1 is uid 10000"
t=$(now)
docker stop -t 10 "$c" >/dev/null
assert_lt "$(elapsed "$t")" 2 "docker stop"

assert_rc 1 "--user 12345: the boot stops" -- drun --user 12345 -- sh -c 'echo main-ran'
assert_not_contains "$OUT" "main-ran" "the main program did not run"
assert_contains "$OUT" "not supported" "the original's words"
assert_contains "$OUT" "HERMES_UID=12345" "the hint says what works"
finish
