#!/usr/bin/env bash
# The image's HEALTHCHECK (`hermes health`): healthy when the supervisor answers and every
# autostarted service is up; unhealthy when a gateway crash-loops.
source "$(dirname "$0")/lib.sh"

health() { docker inspect -f '{{.State.Health.Status}}' "$1" 2>/dev/null; }
is_health() { [[ $(health "$1") == "$2" ]]; }
fast=(--health-interval 1s --health-timeout 5s --health-retries 2 --health-start-period 0s)

t=$(now)
c=$(dstart ok "${fast[@]}" -e HERMES_GATEWAY_BOOTSTRAP_STATE=running -- sleep 300)
wait_for 30 "container healthy" -- is_health "$c" healthy
echo "boot to healthy: $(elapsed "$t") s"
assert_eq healthy "$(health "$c")" "a container with a running gateway is healthy"
assert_rc 0 "hermes health exits 0" -- docker exec "$c" hermes health

# A gateway that exits 1 at once: restarted with backoff, a crash loop.
d=$HDT_TMP/crash
mkdir -p "$d"
printf 'gateway:\n  command: "echo crashing; exit 1"\n' >"$d/config.yaml"
chown -R 10000:10000 "$d"
c2=$(dstart crash "${fast[@]}" -v "$d:/opt/data" -e HERMES_GATEWAY_BOOTSTRAP_STATE=running -- sleep 300)
wait_for 40 "container unhealthy" -- is_health "$c2" unhealthy
assert_eq unhealthy "$(health "$c2")" "a crash-looping gateway makes the container unhealthy"
assert_rc 1 "hermes health exits 1" -- docker exec "$c2" hermes health
assert_contains "$OUT" "gateway-default" "hermes health names the failing service"

# A gateway deliberately down is healthy.
c3=$(dstart down "${fast[@]}" -- sleep 300)
wait_for 30 "container with a down gateway healthy" -- is_health "$c3" healthy
assert_eq healthy "$(health "$c3")" "a gateway that is down on purpose is healthy"
finish
