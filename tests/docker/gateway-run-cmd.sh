#!/usr/bin/env bash
# `docker run IMAGE gateway run`: the gateway serves, and each of its lines is in `docker logs`
# once, not twice (PID 1's mirror and the following main program).
source "$(dirname "$0")/lib.sh"

c=$(dstart gw -- gateway run)
wait_for 30 "gateway answers /health" -- docker exec "$c" curl -fsS http://127.0.0.1:8642/health
sleep 1
logs=$(docker logs "$c" 2>&1)
n=$(grep -c 'listening on http://127.0.0.1:8642' <<<"$logs")
assert_eq 1 "$n" "the gateway's 'listening' line appears once in docker logs"
t=$(now)
docker stop -t 10 "$c" >/dev/null
assert_lt "$(elapsed "$t")" 2 "docker stop"
code=$(exit_code "$c")
assert_match "$code" '^(0|143)$' "gateway run stops cleanly on docker stop"
finish
