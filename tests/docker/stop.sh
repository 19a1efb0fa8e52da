#!/usr/bin/env bash
# `docker stop` is fast: SIGTERM reaches the main program and the gateways, well inside 2 s.
source "$(dirname "$0")/lib.sh"

c=$(dstart plain -- sleep 300)
wait_up "$c"
t=$(now)
docker stop -t 10 "$c" >/dev/null
secs=$(elapsed "$t")
assert_lt "$secs" 2 "docker stop of \`sleep\` as main program"
assert_eq 143 "$(exit_code "$c")" "exit code after docker stop (SIGTERM) is 143"

# With a running gateway too.
c=$(dstart gateway -e HERMES_GATEWAY_BOOTSTRAP_STATE=running -- sleep 300)
wait_for 30 "gateway-default up" -- service_is "$c" gateway-default up
t=$(now)
docker stop -t 10 "$c" >/dev/null
secs=$(elapsed "$t")
assert_lt "$secs" 2 "docker stop with a running gateway"
assert_eq 143 "$(exit_code "$c")" "exit code after docker stop with a gateway is 143"
logs=$(docker logs "$c" 2>&1)
assert_not_contains "$logs" "SIGKILL" "nothing needed SIGKILL"
finish
