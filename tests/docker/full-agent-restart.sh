#!/usr/bin/env bash
# The agent engine keeps its port (issue "Restarts nobody notices", item 3): in the full image the
# supervisor holds the agent's API port (8642) and hands it to each agent process through the
# listen hook in the agent's venv (crates/hermes-services/src/agent_hook); the agent serves that
# socket instead of binding. Under constant load (4 clients, each request on a new connection),
# three `hermes gateway restart`s and two SIGKILLs of the agent's gateway refuse no connection:
# between two agents, connections wait in the backlog. One agent at a time, always (a restart
# stops the old one first). Run against the PyPI agent (0.19.0) and the 0.20.1 source image.
source "$(dirname "$0")/lib.sh"
use_full_image

key=full-agent-restart-key-0123456789
data=$HDT_TMP/data
mkdir -p "$data"
cat >"$data/.env" <<ENV
API_SERVER_ENABLED=true
API_SERVER_HOST=127.0.0.1
API_SERVER_PORT=8642
API_SERVER_KEY=$key
ENV
cat >"$data/config.yaml" <<YAML
model:
  default: stub-model
  provider: custom
  base_url: http://127.0.0.1:$HDT_STUB_PORT/v1
  api_key: stub-upstream-key
  context_length: 131072
security:
  tirith_enabled: false
YAML
chown -R 10000:10000 "$data"

c=$(full_start agent-restart "$data" -e HERMES_GATEWAY_BOOTSTRAP_STATE=running)
wait_up "$c"
serving() { service_is "$c" gateway-default up && agent_health "$c" >/dev/null 2>&1; }
wait_for 120 "the agent's gateway answers /health" -- serving

assert_eq '["127.0.0.1:8642"]' "$(service_field "$c" gateway-default listening)" \
    "the supervisor holds the agent's API port"
assert_contains "$(docker exec "$c" cat /opt/data/logs/gateways/default/current 2>&1)" \
    "serving the supervisor's socket" "the agent serves the inherited socket (the hook's line)"
# One listening socket on 8642: the supervisor's, which the agent serves (a port the agent bound
# itself beside it would be a second LISTEN entry). /proc/net/tcp: port 8642 is 21C2, 0A LISTEN.
assert_eq 1 "$(docker exec "$c" awk '$2 ~ /:21C2$/ && $4 == "0A"' /proc/net/tcp | wc -l)" \
    "one listening socket on the agent's port"

# --- restarts and crashes under load -----------------------------------------------------------
docker exec "$c" rm -f /tmp/load.stop
docker exec "$c" python3 /opt/hdt/load.py 8642 /health /tmp/load.stop 4 >"$HDT_TMP/load.json" 2>"$HDT_TMP/load.err" &
loader=$!
sleep 2
for round in 1 2 3; do
    old=$(service_pid "$c" gateway-default)
    assert_rc 0 "hermes gateway restart ($round)" -- docker exec "$c" hermes gateway restart
    assert_ne "$old" "$(service_pid "$c" gateway-default)" "a new agent after restart $round"
    assert_eq 1 "$(docker exec "$c" sh -c "ps -eo args | grep -c '[g]ateway run --replace'" 2>&1)" \
        "one agent gateway at a time"
    sleep 2
done
for round in 1 2; do
    old=$(service_pid "$c" gateway-default)
    docker exec "$c" kill -KILL "$old"
    wait_for 120 "a new agent after SIGKILL $round" -- service_replaced "$c" gateway-default "$old"
    wait_for 120 "the agent serves again after SIGKILL $round" -- serving
    sleep 2
done
docker exec "$c" touch /tmp/load.stop
wait "$loader"
counts=$(cat "$HDT_TMP/load.json")
echo "load: $counts"
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$counts" "$1" 2>/dev/null; }
assert_eq 0 "$(field refused)" "no connection refused across 3 restarts and 2 SIGKILLs"
assert_le 100 "$(field ok)" "the clients were answered throughout"

# --- a stop closes the port ------------------------------------------------------------------
assert_rc 0 "hermes gateway stop" -- docker exec "$c" hermes gateway stop
wait_for 60 "gateway-default down" -- service_is "$c" gateway-default down
assert_rc 7 "a stopped gateway's port refuses (the supervisor closed it)" -- \
    docker exec "$c" curl -sS -m 5 http://127.0.0.1:8642/health
finish
