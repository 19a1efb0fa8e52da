#!/usr/bin/env bash
# Restarts nobody notices, with PID 1 as the supervisor (issue "Restarts nobody notices"): the
# native gateway's API port (8642) is held by PID 1 and handed to each gateway process (fd 3,
# LISTEN_FDS); `hermes gateway restart` is a hand-over (the new gateway ready before the old one
# stops accepting), so under constant load (4 clients, each request on a new connection) three
# restarts fail nothing, and two SIGKILLs of the gateway refuse no connection.
source "$(dirname "$0")/lib.sh"

key=restart-handover-key-0123456789
data=$HDT_TMP/data
mkdir -p "$data"
printf 'API_SERVER_KEY=%s\n' "$key" >"$data/.env"
chown -R 10000:10000 "$data"
c=$(dstart handover -v "$data:/opt/data" -v "$HDT_LIB_DIR/full:/opt/hdt:ro" \
    -e HERMES_GATEWAY_BOOTSTRAP_STATE=running -- sleep infinity)
wait_up "$c"
health() { docker exec "$c" curl -fsS -m 5 http://127.0.0.1:8642/health >/dev/null 2>&1; }
wait_for 60 "the native gateway answers /health" -- health
assert_eq '["127.0.0.1:8642"]' "$(service_field "$c" gateway-default listening)" "PID 1 holds the gateway's port"

load() { # PHASE: runs load.py until /tmp/PHASE.stop exists; its counts in $HDT_TMP/PHASE.json
    docker exec "$c" rm -f "/tmp/$1.stop"
    docker exec "$c" python3 /opt/hdt/load.py 8642 /health "/tmp/$1.stop" 4 >"$HDT_TMP/$1.json" 2>"$HDT_TMP/$1.err" &
    LOADER=$!
    sleep 1
}
stop_load() { docker exec "$c" touch "/tmp/$1.stop"; wait "$LOADER"; }  # in this shell: `wait` needs its child
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2" 2>/dev/null; }

load restarts
for round in 1 2 3; do
    old=$(service_pid "$c" gateway-default)
    assert_rc 0 "hermes gateway restart ($round)" -- docker exec "$c" hermes gateway restart
    new=$(service_pid "$c" gateway-default)
    assert_contains "$OUT" "handed over from pid $old to pid $new, the port stayed open" "restart $round is a hand-over"
    sleep 1
done
stop_load restarts
counts=$(cat "$HDT_TMP/restarts.json")
echo "restarts: $counts"
assert_eq 0 "$(field "$counts" refused)" "no connection refused across 3 restarts"
assert_eq 0 "$(field "$counts" failed)" "no request failed across 3 restarts"
assert_le 100 "$(field "$counts" ok)" "the clients were answered throughout"
assert_contains "$(docker exec "$c" cat /opt/data/logs/gateways/default/current 2>&1)" "handed over from pid" \
    "the service log says who replaced whom"

load kills
for round in 1 2; do
    old=$(service_pid "$c" gateway-default)
    docker exec "$c" kill -KILL "$old"
    wait_for 60 "a new gateway after SIGKILL $round" -- service_replaced "$c" gateway-default "$old"
    sleep 1
done
stop_load kills
counts=$(cat "$HDT_TMP/kills.json")
echo "kills: $counts"
assert_eq 0 "$(field "$counts" refused)" "no connection refused across 2 SIGKILLs"
finish
