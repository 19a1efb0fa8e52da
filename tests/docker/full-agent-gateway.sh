#!/usr/bin/env bash
# The agent as the gateway engine in the full image (issue 14, item 5): the default profile's
# gateway is hermes-agent's own (`gateway run` of its CLI, the image-wide default engine), with
# its API server platform on, the model a stub OpenAI-compatible provider on loopback inside the
# container (tests/docker/full/upstream.py, the container's main program). Checked: the official
# `openai` SDK gets an answer through it, plain and streamed; SIGKILL of the agent's gateway →
# restarted; its restart request (SIGUSR1, what its /restart command and `hermes update` send
# themselves) → restarted with exit 75, the container up; `hermes gateway stop` → still stopped
# after `docker restart`; `docker exec c hermes sessions list` is answered by the agent's CLI as
# the hermes user and leaves no root-owned file on the volume. The agent's dashboard, started as
# docs/docker.md shows (a container of its own on the same volume), serves its web UI.
source "$(dirname "$0")/lib.sh"
use_full_image

key=full-agent-gateway-key-0123456789
data=$HDT_TMP/data
mkdir -p "$data"
# The default profile (the volume's root), served by the agent: its API server on 8642 (loopback),
# the model a custom provider at the stub, nothing fetched from the network (tirith off). No
# gateway.engine: the full image's default is the agent.
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

c=$(full_start agent "$data" -e HERMES_GATEWAY_BOOTSTRAP_STATE=running)
wait_up "$c"
serving() { service_is "$c" gateway-default up && agent_health "$c"; }
wait_for 120 "the agent's gateway answers /health" -- serving

assert_contains "$(agent_health "$c" 2>&1)" '"hermes-agent"' "/health is the agent's API server"
engine=$(docker exec "$c" hermes gateway status --json 2>&1 | python3 -c '
import json, sys
print(" ".join(r["profile"] + ":" + r["engine"] for r in json.load(sys.stdin)))' 2>&1)
assert_eq "default:agent" "$engine" "the full image's default engine is the agent"
first=$(service_pid "$c" gateway-default)
cmdline=$(docker exec "$c" sh -c "tr '\\0' ' ' </proc/$first/cmdline")
# (`-p default` or no -p: both serve the root, docs/gateway.md "Engines".)
assert_match "$cmdline" "^/opt/hermes-agent/bin/python3? /opt/hermes-agent/bin/hermes (-p default )?gateway run --replace --external-supervisor" \
    "the supervised process is the agent's gateway (exec'd, not a child of ours)"
assert_eq hermes "$(docker exec "$c" ps -o user= -p "$first" | tr -d ' ')" "the agent's gateway runs as the hermes user"

# --- the official openai SDK through the agent --------------------------------------------------
assert_rc 0 "the openai SDK asks the agent's API server" -- openai_ask "$c" "$key" "hello agent"
assert_contains "$OUT" "plain: echo: hello agent" "a plain answer, the stub's, through the agent"
assert_contains "$OUT" "stream: echo: hello agent" "a streamed answer, the stub's, through the agent"
assert_contains "$(stub_requests "$c" 2>&1)" "hello agent" "the stub on loopback saw the turn"
assert_contains "$(docker exec "$c" cat /opt/data/logs/gateways/default/current 2>&1)" "Hermes Gateway" \
    "the agent's output is the service's log"

# --- the agent's CLI through ours, as the hermes user --------------------------------------------
assert_rc 0 "docker exec hermes sessions list (handed to the agent's CLI)" -- docker exec "$c" hermes sessions list
sessions=$OUT
echo "hermes sessions list:"; sed 's/^/    /' <<<"$sessions"
# 0.19.0 has a Source column (`api_server`), 0.20 does not; the id's `api-` prefix is the API
# server's in both.
assert_ne "" "$(grep -E 'hello agent .* api-[0-9a-f]+ *$' <<<"$sessions")" \
    "the agent lists the conversation its API server just stored (preview, an API server id)"
# A handed-over command that writes: what it writes is the hermes user's.
assert_rc 0 "docker exec hermes cron create (handed to the agent's CLI)" -- \
    docker exec "$c" hermes cron create --name probe-job "every 2h" "probe the container"
assert_eq "10000:10000" "$(stat -c '%u:%g' "$data/cron/jobs.json" 2>&1)" "the agent's cron/jobs.json, written through docker exec, is the hermes user's"
assert_contains "$(cat "$data/cron/jobs.json" 2>&1)" "probe-job" "the job is in the agent's cron/jobs.json"
assert_empty "$(find "$data" ! -user 10000 -printf '%P (%u)\n' | head -n 5)" "nothing on the volume is owned by another user than hermes (no root-owned file)"

# --- the agent's dashboard: a container of its own on the same volume ---------------------------
# (PID 1 does not run `services:` declared in config.yaml yet; docs/docker.md gives this way.)
# The source-tree fixture is a trimmed copy of 0.20.1 without the dashboard's web sources
# (shared/fixtures/README.md): its dashboard has no UI to serve, so this part is the PyPI agent's.
if [[ ${HDT_AGENT_SOURCE:-} == pypi:* ]]; then
dash=$(dstart dashboard -v "$data:/opt/data" -- /opt/hermes-agent/bin/hermes dashboard --host 127.0.0.1 --port 9119 --no-open --skip-build)
dashboard() { docker exec "$dash" curl -fsS -m 5 http://127.0.0.1:9119/; }
wait_for 90 "the agent's dashboard answers on 9119" -- dashboard
assert_contains "$(dashboard 2>&1)" "<title>Hermes Agent - Dashboard</title>" "the dashboard serves its web UI"
assert_eq hermes "$(docker exec "$dash" ps -eo user=,args= | awk '$2 ~ /python/ && $3 == "/opt/hermes-agent/bin/hermes" && $4 == "dashboard" { print $1 }')" \
    "the dashboard runs as the hermes user"
assert_contains "$(docker logs "$dash" 2>&1)" "dashboard container: skipping gateway reconciliation" \
    "its PID 1 leaves the gateways to the other container"
assert_eq '' "$(docker exec "$dash" hermes service status --json 2>/dev/null | grep -o '"gateway-default"')" "no second gateway in the dashboard's container"
docker rm -f "$dash" >/dev/null
else
    echo "not checked: the agent's web dashboard ($HDT_AGENT_SOURCE has no web sources)"
fi

# --- a crash: restarted ----------------------------------------------------------------------
docker exec "$c" kill -KILL "$first"
wait_for 90 "a new agent gateway after SIGKILL" -- service_replaced "$c" gateway-default "$first"
restarts=$(service_field "$c" gateway-default restarts)
assert_le 1 "${restarts:-0}" "the crash is counted in the restarts"
wait_for 120 "the agent's gateway serves again after the crash" -- serving

# --- its own restart request: restarted, the container up ---------------------------------------
second=$(service_pid "$c" gateway-default)
docker exec "$c" kill -USR1 "$second"
wait_for 120 "a new agent gateway after its restart request" -- service_replaced "$c" gateway-default "$second"
assert_eq '{"code": 75}' "$(service_field "$c" gateway-default last_exit)" "it exited 75 (a restart request)"
assert_eq running "$(state "$c")" "the container is still up"
wait_for 120 "the agent's gateway serves again after its restart" -- serving
assert_rc 0 "the openai SDK after the restarts" -- openai_ask "$c" "$key" "hello again"
assert_contains "$OUT" "plain: echo: hello again" "answers again"

# --- an operator stop survives docker restart --------------------------------------------------
assert_rc 0 "hermes gateway stop" -- docker exec "$c" hermes gateway stop
wait_for 60 "gateway-default down" -- service_is "$c" gateway-default down
recorded=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("desired_state"), d.get("gateway_state"))' "$data/gateway_state.json" 2>&1)
# 0.19.0 reads our planned-stop marker and records `stopped`; 0.20.1 does not take it (its marker
# check changed; not matched yet) and records `running`, as for an unexpected signal. Either way
# the operator's `desired_state: stopped` decides (docs/gateway.md, Engines), as checked below.
if [[ ${HDT_AGENT_VERSION:-} == 0.19.* ]]; then
    assert_eq "stopped stopped" "$recorded" "gateway_state.json: desired and recorded state stopped"
else
    assert_eq "stopped" "${recorded%% *}" "gateway_state.json: desired state stopped (the agent records its own)"
fi
docker restart -t 20 "$c" >/dev/null
wait_up "$c"
sleep 5
assert_eq down "$(service_state "$c" gateway-default)" "after docker restart, the stopped gateway is still down"
assert_rc 7 "nothing listens on 8642" -- docker exec "$c" curl -sS -m 5 http://127.0.0.1:8642/health
assert_empty "$(find "$data" ! -user 10000 -printf '%P (%u)\n' | head -n 5)" "still no file on the volume owned by another user"
finish
