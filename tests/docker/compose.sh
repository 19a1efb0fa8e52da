#!/usr/bin/env bash
# compose.yaml as shipped: `up` gives a healthy container whose default gateway answers on the
# host's 127.0.0.1 only, `exec` reaches the supervisor, `down` stops it fast.
source "$(dirname "$0")/lib.sh"

if docker compose version >/dev/null 2>&1; then
    compose=(docker compose)
elif command -v docker-compose >/dev/null; then
    compose=(docker-compose)
else
    fail "neither \`docker compose\` nor \`docker-compose\` is installed (scripts/docker-test.sh installs Debian's docker-compose)"
    finish
fi
project="hdt-compose-$$"
port=$((20000 + $$ % 20000))
# The shipped file, plus an override that only makes the healthcheck poll every second.
cat >"$HDT_TMP/fast-health.yaml" <<'YAML'
services:
  hermes:
    healthcheck:
      interval: 1s
      start_period: 0s
YAML
dc() { HERMES_IMAGE=$IMAGE HERMES_PORT=$port "${compose[@]}" -p "$project" -f "$HDT_REPO/compose.yaml" -f "$HDT_TMP/fast-health.yaml" "$@"; }
trap 'dc down -v -t 5 >/dev/null 2>&1; hdt_cleanup' EXIT

assert_rc 0 "compose config" -- dc config
assert_contains "$OUT" "127.0.0.1:$port:8642" "the port is published on 127.0.0.1 only"
assert_rc 0 "compose up -d" -- dc up -d --no-build
c=$(dc ps -q hermes)
health() { docker inspect -f '{{.State.Health.Status}}' "$c" 2>/dev/null; }
is_healthy() { [[ $(health) == healthy ]]; }
wait_for 60 "compose container healthy" -- is_healthy
assert_eq healthy "$(health)" "the compose container is healthy"
wait_for 30 "gateway answers on the published port" -- curl -fsS "http://127.0.0.1:$port/health"
assert_rc 0 "GET /health on 127.0.0.1:$port from the host" -- curl -fsS "http://127.0.0.1:$port/health"
assert_contains "$OUT" '"status":"ok"' "the default gateway answers"
addr=$(docker port "$c" 8642/tcp | head -n 1)
assert_eq "127.0.0.1:$port" "$addr" "published on the host's loopback only"
assert_rc 0 "compose exec hermes service status" -- dc exec -T hermes hermes service status
assert_contains "$OUT" "gateway-default" "the supervisor lists the default gateway"
t=$(now)
assert_rc 0 "compose stop" -- dc stop -t 40
assert_lt "$(elapsed "$t")" 5 "compose stop is fast"
finish
