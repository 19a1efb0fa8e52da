#!/usr/bin/env bash
# The chart's pod on the agent engine (full image) in Docker under its rendered constraints, as
# helm-pod.sh does for the native engine: tests/helm/agent-values.yaml's profile, its model a stub
# provider in a second container sharing the pod's network namespace (a sidecar). It must boot
# with a read-only root as uid 10000, pass its probes (startup, liveness and readiness are all
# `hermes health` for this engine), serve the agent's API server on the pod's addresses with the
# key from the profile's Secret (no key generated into `.env`, where it would win over the
# Secret's), and stop within terminationGracePeriodSeconds.
source "$(dirname "$0")/lib.sh"
use_full_image

HELM_CASE=$(cd "$(dirname "$0")/../helm" && pwd)/agent-values.yaml HELM_PROFILE=agent
secret_key=hdt-secret-key-$$-0123456789abcdef
HELM_SECRET=API_SERVER_KEY=$secret_key
source "$(dirname "$0")/../helm/pod-lib.sh"

map_pod "$HDT_TMP/seed" || { fail "mapping the pod to docker run"; finish; }
c=$(run_pod pod) || { fail "starting the pod's container"; finish; }
assert_eq exec "$(field probes readinessProbe | python3 -c 'import json,sys; print(next(iter(k for k in json.load(sys.stdin) if k in ("exec", "httpGet"))))')" \
    "the agent engine's readiness is an exec probe"
# The stub provider, a sidecar in the pod's network namespace (read-only, non-root too).
stub=$HDT_PREFIX-stub
HDT_CONTAINERS+=("$stub")
docker run -d --name "$stub" "${LABEL[@]}" --network "container:$c" --user 10000:10000 --read-only \
    --tmpfs /tmp --cap-drop ALL --security-opt no-new-privileges \
    -v "$HDT_LIB_DIR/full:/opt/hdt:ro" -v "$HDT_LIB_DIR/../../crates/hermes/tests/cli/clients:/opt/clients:ro" \
    --entrypoint python3 "$IMAGE" /opt/hdt/upstream.py "$HDT_STUB_PORT" /tmp/upstream.jsonl /opt/clients >/dev/null \
    || fail "starting the stub provider beside the pod"

budget=$(( $(field probes startupProbe periodSeconds) * $(field probes startupProbe failureThreshold) ))
wait_for "$budget" "the startup probe (\`hermes health\`)" -- probe "$c" startupProbe || {
    printf '%s\n' "$(docker logs "$c" 2>&1 | tail -n 30)"
    finish
}
ok "startup probe passed"
assert_rc 0 "liveness probe (hermes health)" -- probe "$c" livenessProbe
assert_rc 0 "readiness probe (hermes health)" -- probe "$c" readinessProbe
assert_rc 0 "the control socket" -- docker exec "$c" stat -c '%u' /dev/shm/hermes/supervisor.sock
assert_eq "$(field uid)" "$OUT" "the control socket is in /dev/shm/hermes, the service user's"
engine=$(docker exec "$c" hermes gateway status --json 2>&1 | python3 -c '
import json, sys
print(" ".join(r["profile"] + ":" + r["engine"] for r in json.load(sys.stdin)))' 2>&1)
assert_eq "default:agent" "$engine" "the profile's gateway is the agent (HERMES_GATEWAY_ENGINE)"
wait_for 120 "the agent's API server answers /health" -- docker exec "$c" curl -fsS -m 5 http://127.0.0.1:8642/health
assert_rc 0 "agent /health" -- docker exec "$c" curl -fsS -m 5 http://127.0.0.1:8642/health
assert_contains "$OUT" '"hermes-agent"' "/health is the agent's API server"
assert_rc 0 "listening sockets" -- docker exec "$c" cat /proc/net/tcp /proc/net/tcp6
assert_match "$OUT" "(00000000|00000000000000000000000000000000):21C2 [0-9A-F:]+ 0A" "the agent listens on all addresses, port 8642"
assert_rc 0 "the volume's .env" -- cat "$data/.env"
assert_not_contains "$OUT" "API_SERVER_KEY=" "no key generated into .env (the Secret's key would be shadowed)"
assert_contains "$OUT" "API_SERVER_KEY comes from the container's environment" ".env says where the key comes from"
assert_rc 0 "/v1/models without the key" -- docker exec "$c" curl -sS -o /dev/null -w '%{http_code}' -m 5 http://127.0.0.1:8642/v1/models
assert_eq 401 "$OUT" "the agent's API needs the key"
key=$secret_key
assert_rc 0 "a chat through the agent with the Secret's key" -- docker exec "$c" curl -fsS -m 60 \
    -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    -d '{"model":"x","messages":[{"role":"user","content":"hello pod"}]}' http://127.0.0.1:8642/v1/chat/completions
assert_contains "$OUT" "hello pod" "the stub's answer came back through the agent"
assert_eq "10000:$fs_group" "$(stat -c '%u:%g' "$data/config.yaml")" "config.yaml seeded as the service user's, group fsGroup"
assert_contains "$(cat "$data/config.yaml")" "stub-model" "config.yaml from the ConfigMap"

grace=$(field grace)
t=$(now)
docker stop -t "$grace" "$c" >/dev/null
assert_lt "$(elapsed "$t")" "$grace" "docker stop -t $grace (terminationGracePeriodSeconds)"
assert_eq 143 "$(exit_code "$c")" "ended by SIGTERM (143), not killed at the grace's end (137)"
finish
