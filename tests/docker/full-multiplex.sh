#!/usr/bin/env bash
# The agent engine multiplexed in the full image (issue 22): three profiles (the volume's root
# and two named ones, each with its own API_SERVER_KEY), GATEWAY_MULTIPLEX_PROFILES=1 on the
# container. Checked: exactly one agent gateway process serves them all (`gateway-default`; the
# named profiles' services stay down); `hermes gateway status` says each named profile is
# `served by gateway-default`; the named profiles answer under /p/<profile>/ on the default
# profile's listener, each opened by its own key only (hermes-agent >= 0.20; 0.19.0 opens every
# profile with the listener's key, which is asserted as such); an unknown profile is 404; after
# `docker restart`, still exactly one agent gateway, serving again.
source "$(dirname "$0")/lib.sh"
use_full_image
agent_version=${HDT_AGENT_VERSION:?HDT_AGENT_VERSION is not set: run full-* scenarios through scripts/docker-test.sh}

data=$HDT_TMP/data
declare -A key=([default]=full-multiplex-key-of-default-0123456789
                [p1]=full-multiplex-key-of-p1-0123456789
                [p2]=full-multiplex-key-of-p2-0123456789)
model_yaml="model:
  default: stub-model
  provider: custom
  base_url: http://127.0.0.1:$HDT_STUB_PORT/v1
  api_key: stub-upstream-key
  context_length: 131072
security:
  tirith_enabled: false"
mkdir -p "$data/profiles/p1" "$data/profiles/p2"
# The default profile owns the one listener (8642, loopback).
cat >"$data/.env" <<ENV
API_SERVER_ENABLED=true
API_SERVER_HOST=127.0.0.1
API_SERVER_PORT=8642
API_SERVER_KEY=${key[default]}
ENV
printf '%s\n' "$model_yaml" >"$data/config.yaml"
for p in p1 p2; do
    # A named profile's key opens its /p/<profile>/ routes; its own API server platform is
    # pinned off, as the agent asks under multiplexing (it binds a port, and a named profile
    # that enables one has its adapters skipped: docs/gateway.md).
    printf 'API_SERVER_KEY=%s\n' "${key[$p]}" >"$data/profiles/$p/.env"
    printf '%s\nplatforms:\n  api_server:\n    enabled: false\n' "$model_yaml" >"$data/profiles/$p/config.yaml"
    printf 'You are the %s profile.\n' "$p" >"$data/profiles/$p/SOUL.md"
done
chown -R 10000:10000 "$data"

c=$(full_start multiplex "$data" -e GATEWAY_MULTIPLEX_PROFILES=1 -e HERMES_GATEWAY_BOOTSTRAP_STATE=running)

# The agent's gateway processes in the container (its console script running `gateway run`).
agent_gateways() {
    docker exec "$c" ps -eo args= | awk '$2 == "/opt/hermes-agent/bin/hermes" && / gateway run /' | wc -l
}
serving() { service_is "$c" gateway-default up && agent_health "$c" >/dev/null; }
# One chat request to PATH (the profile's prefix) with KEY: prints the HTTP status, a space and
# the body: ask PREFIX KEY TEXT
ask() {
    docker exec "$c" curl -sS -m 180 -w '\n%{http_code}' -H "Authorization: Bearer $2" \
        -H 'Content-Type: application/json' \
        -d "{\"model\":\"stub-model\",\"messages\":[{\"role\":\"user\",\"content\":\"$3\"}]}" \
        "http://127.0.0.1:8642$1/v1/chat/completions" 2>&1 | python3 -c '
import sys
body, _, code = sys.stdin.read().rpartition("\n")
print(code, body.replace("\n", " "))'
}

check_one_gateway() { # when
    wait_up "$c"
    wait_for 150 "the multiplexing agent gateway answers /health ($1)" -- serving
    sleep 3 # a second gateway, were one started, would be there by now
    assert_eq 1 "$(agent_gateways)" "exactly one agent gateway process in the container ($1)"
    local pid
    pid=$(service_pid "$c" gateway-default)
    assert_match "$(docker exec "$c" sh -c "tr '\\0' ' ' </proc/$pid/cmdline")" \
        "^/opt/hermes-agent/bin/python3? /opt/hermes-agent/bin/hermes (-p default )?gateway run " \
        "it is gateway-default's process ($1)"
    local p
    for p in p1 p2; do
        assert_eq down "$(service_state "$c" "gateway-$p")" "gateway-$p is down: gateway-default serves it ($1)"
    done
}

check_one_gateway "first boot"
assert_contains "$(docker exec "$c" env 2>&1)" "GATEWAY_MULTIPLEX_PROFILES=1" "the switch is on in the container"

# --- hermes gateway status -----------------------------------------------------------------
assert_rc 0 "hermes gateway status" -- docker exec "$c" hermes gateway status
status_text=$OUT
echo "hermes gateway status:"; sed 's/^/    /' <<<"$status_text"
for p in p1 p2; do
    assert_ne "" "$(grep -E "^gateway-$p .*served by gateway-default" <<<"$status_text")" "$p: served by gateway-default"
done
assert_contains "$status_text" "gateway-default serves default, p1, p2" "the mode line names the three profiles"
served=$(docker exec "$c" hermes gateway status --json 2>&1 | python3 -c '
import json, sys
print(" ".join("%s:%s:%s" % (r["profile"], r.get("served_by"), r["engine"]) for r in json.load(sys.stdin)))' 2>&1)
assert_eq "default:None:agent p1:gateway-default:agent p2:gateway-default:agent" "$served" "--json: served_by and engine of each profile"

# --- the routes: /p/<profile>/ on the default profile's listener ---------------------------
prefix() { [[ $1 == default ]] && echo "" || echo "/p/$1"; }
next() { case $1 in default) echo p1 ;; p1) echo p2 ;; p2) echo default ;; esac; }
assert_contains "$(docker exec "$c" curl -sS -m 10 http://127.0.0.1:8642/p/p1/health 2>&1)" "ok" "/p/p1/health answers"
if [[ $(printf '%s\n' 0.20 "$agent_version" | sort -V | head -n1) == 0.20 ]]; then
    # hermes-agent >= 0.20: each profile is opened by its own key only.
    for p in default p1 p2; do
        answer=$(ask "$(prefix "$p")" "${key[$p]}" "hello $p")
        assert_match "$answer" "^200 .*echo: hello $p" "$p answers with its own key"
        other=$(next "$p")
        answer=$(ask "$(prefix "$p")" "${key[$other]}" "hello $p")
        assert_match "$answer" "^401 " "$p refuses $other's key"
    done
    assert_contains "$(stub_requests "$c" 2>&1)" "hello p2" "the stub saw p2's turn"
else
    # hermes-agent 0.19.0 serves the /p/<profile>/ routes but checks every request against the
    # listener's (the default profile's) key: a named profile's own key is refused.
    for p in p1 p2; do
        answer=$(ask "$(prefix "$p")" "${key[default]}" "hello $p")
        assert_match "$answer" "^200 .*echo: hello $p" "$agent_version: $p answers with the default profile's key"
        answer=$(ask "$(prefix "$p")" "${key[$p]}" "hello $p")
        assert_match "$answer" "^401 " "$agent_version: $p refuses its own key"
    done
    answer=$(ask "" "${key[default]}" "hello default")
    assert_match "$answer" "^200 .*echo: hello default" "the default profile answers its key"
fi
answer=$(ask /p/nosuch "${key[default]}" "hello")
assert_match "$answer" "^404 " "an unknown profile is 404"

# --- docker restart: still one -------------------------------------------------------------
docker restart -t 30 "$c" >/dev/null
check_one_gateway "after docker restart"
answer=$(ask /p/p1 "$([[ $(printf '%s\n' 0.20 "$agent_version" | sort -V | head -n1) == 0.20 ]] && echo "${key[p1]}" || echo "${key[default]}")" "again p1")
assert_match "$answer" "^200 .*echo: again p1" "p1 answers again after the restart"
finish
