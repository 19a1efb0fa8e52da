#!/usr/bin/env bash
# The Helm chart's pod, run by Docker under exactly the constraints of its rendered spec: the
# `assistant` profile of deploy/helm/hermes/examples/three-profiles.yaml, rendered by Helm's
# engine (scripts/helm-test.sh pod), mapped to `docker run` by tests/helm/pod_to_docker.py (its
# user, group and fsGroup, read-only root, dropped capabilities, no-new-privileges, emptyDirs as
# tmpfs with the kubelet's mode and group, the ConfigMap laid out as the kubelet does, env and the
# Secret's keys). It must boot, serve, pass its probes' own commands, seed config.yaml and
# SOUL.md from the ConfigMap only when absent, and stop within terminationGracePeriodSeconds.
source "$(dirname "$0")/lib.sh"

HELM_CASE=three-profiles HELM_PROFILE=assistant
source "$(dirname "$0")/../helm/pod-lib.sh"

map_pod "$HDT_TMP/seed1" || { fail "mapping the pod to docker run"; finish; }
c=$(run_pod pod) || { fail "starting the pod's container"; finish; }
opts_line=$(field options)
assert_contains "$opts_line" '"--read-only"' "read-only root"
assert_contains "$opts_line" '"--cap-drop=ALL"' "every capability dropped"
assert_contains "$opts_line" '"no-new-privileges"' "no privilege escalation"
assert_contains "$opts_line" '"10000:10000"' "the pod's runAsUser:runAsGroup"
assert_match "$(field emptyDirs)" '"options": "mode=2777,gid=10000,size=[0-9]+", "path": "/tmp"' "/tmp is the kubelet's emptyDir (0777 + setgid, fsGroup's, no sticky bit), a tmpfs"

# startupProbe: passes within its budget (periodSeconds x failureThreshold).
budget=$(( $(field probes startupProbe periodSeconds) * $(field probes startupProbe failureThreshold) ))
wait_for "$budget" "the startup probe (\`hermes health\`)" -- probe "$c" startupProbe || {
    printf '%s\n' "$(docker logs "$c" 2>&1 | tail -n 30)"
    finish
}
ok "startup probe passed"
assert_rc 0 "/tmp as the pod has it" -- docker exec "$c" stat -c '%a %u:%g' /tmp
assert_eq "2777 0:$fs_group" "$OUT" "/tmp: mode 2777, root's, group fsGroup (a kubelet emptyDir)"
assert_rc 0 "/dev/shm as the runtime gives it" -- docker exec "$c" stat -c '%a %u' /dev/shm
assert_eq "1777 0" "$OUT" "/dev/shm: sticky, root's"
assert_rc 0 "the control socket" -- docker exec "$c" stat -c '%u %a' /dev/shm/hermes/supervisor.sock
assert_eq "$(field uid) 660" "$OUT" "the control socket is in /dev/shm/hermes (HERMES_RUNTIME_DIR), the service user's"
assert_rc 0 "liveness probe (hermes health)" -- probe "$c" livenessProbe
wait_for 30 "the readiness probe (GET /ready)" -- probe "$c" readinessProbe && ok "readiness probe passed"
assert_rc 0 "readiness answers ready" -- probe "$c" readinessProbe
assert_contains "$OUT" '"ready"' "GET /ready says ready"
assert_rc 0 "processes run as the pod's user" -- docker exec "$c" ps -o uid= -p 1
assert_eq "$(field uid)" "$(tr -d ' ' <<<"$OUT")" "PID 1 runs as uid $(field uid)"

# Serves: on every address of the pod (a Service reaches it), the key required for /v1.
port=$(field port)
hexport=$(printf '%04X' "$port")
assert_rc 0 "listening sockets" -- docker exec "$c" cat /proc/net/tcp /proc/net/tcp6
assert_match "$OUT" "(00000000|00000000000000000000000000000000):$hexport [0-9A-F:]+ 0A" "the gateway listens on all addresses, port $port"
key=$(docker exec "$c" sh -c 'sed -n "s/^API_SERVER_KEY=//p" /opt/data/.env' 2>/dev/null)
assert_match "$key" '^[0-9a-f]{64}$' "API_SERVER_KEY made on the volume's first boot"
assert_rc 0 "/v1/models with the key" -- docker exec "$c" curl -fsS -m 5 -H "Authorization: Bearer $key" "http://127.0.0.1:$port/v1/models"
assert_contains "$OUT" '"gpt-4o-mini"' "the model from values"
assert_rc 0 "/v1/models without the key" -- docker exec "$c" curl -sS -o /dev/null -w '%{http_code}' -m 5 "http://127.0.0.1:$port/v1/models"
assert_eq 401 "$OUT" "no key, no answer"
assert_rc 0 "the Secret's key reached the gateway's environment" -- docker exec "$c" sh -c 'tr "\0" "\n" </proc/1/environ | grep -c "^OPENAI_API_KEY=sk-hdt-"'
# The dashboard (dashboard: true in the example) on the pod's loopback, for port-forward.
wait_for 30 "the dashboard's /api/health" -- docker exec "$c" curl -fsS -m 5 http://127.0.0.1:9119/api/health \
    && ok "dashboard answers on loopback (kubectl port-forward reaches it)"
# NOTES.txt sends the operator to `hermes dashboard link`: the token is never in a log.
assert_rc 0 "the dashboard's sign-in link" -- docker exec "$c" hermes dashboard link
assert_match "$OUT" '^http://127\.0\.0\.1:9119/\?token=[0-9a-f]{64}$' "hermes dashboard link prints the sign-in link"
token=${OUT##*token=}
assert_rc 0 "the link signs in" -- docker exec "$c" curl -fsS -m 5 -o /dev/null -w '%{http_code}' -H "X-Hermes-Session-Token: $token" http://127.0.0.1:9119/api/status
assert_eq 200 "$OUT" "the token of the link is the dashboard's"
assert_rc 0 "the pod's log" -- docker logs "$c"
assert_not_contains "$OUT" "$token" "the token is not in the pod's log"
assert_rc 1 "the token is nowhere on the volume (service logs included)" -- grep -rqF "$token" "$data"

# Seeds: from the ConfigMap, the service user's, group fsGroup.
seeded_config=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["configmap"]["config.yaml"], end="")' "$pod")
seeded_soul=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["configmap"]["SOUL.md"], end="")' "$pod")
assert_eq "$seeded_config" "$(cat "$data/config.yaml")" "config.yaml seeded from the ConfigMap"
assert_eq "$seeded_soul" "$(cat "$data/SOUL.md")" "SOUL.md seeded from the ConfigMap"
assert_eq "10000:$fs_group 640" "$(stat -c '%u:%g %a' "$data/config.yaml")" "config.yaml is the service user's, group fsGroup, 0640"
assert_rc 0 "boot log" -- docker logs "$c"
assert_contains "$OUT" "seeded \`/opt/data/config.yaml\`" "boot says it seeded config.yaml"
assert_not_contains "$OUT" "warning" "boot without warnings"

# The operator edits config.yaml on the volume.
assert_rc 0 "edit config.yaml in the pod" -- docker exec "$c" sh -c 'printf "# operator edit\n" >>/opt/data/config.yaml'

# Stop: SIGTERM, then the supervisor drains; done well within the grace period, never killed.
grace=$(field grace)
t=$(now)
docker stop -t "$grace" "$c" >/dev/null
assert_lt "$(elapsed "$t")" "$grace" "docker stop -t $grace (terminationGracePeriodSeconds)"
assert_eq 143 "$(exit_code "$c")" "ended by SIGTERM (143), not killed at the grace's end (137)"

# A new ConfigMap (the values changed: the checksum rolls the pod) on the same volume: the
# operator's edit and the first SOUL.md stay, the new seeds are not applied.
pod2=$HDT_TMP/pod2.json
python3 - "$pod" "$pod2" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["configmap"]["config.yaml"] = doc["configmap"]["config.yaml"].replace("gpt-4o-mini", "gpt-4.1")
doc["configmap"]["SOUL.md"] = "A new persona.\n"
json.dump(doc, open(sys.argv[2], "w"))
EOF
map_pod "$HDT_TMP/seed2" "$pod2" || { fail "mapping the changed pod"; finish; }
c2=$(run_pod pod2) || { fail "starting the pod again"; finish; }
wait_for 60 "the startup probe after the restart" -- probe "$c2" startupProbe && ok "second start: startup probe passed"
assert_contains "$(cat "$data/config.yaml")" "# operator edit" "the operator's edit of config.yaml kept"
assert_not_contains "$(cat "$data/config.yaml")" "gpt-4.1" "the new ConfigMap's config.yaml not applied over it"
assert_eq "$seeded_soul" "$(cat "$data/SOUL.md")" "SOUL.md kept"
assert_rc 0 "second boot log" -- docker logs "$c2"
assert_not_contains "$OUT" "seeded \`/opt/data/config.yaml\`" "nothing seeded on the second boot"
t=$(now)
docker stop -t "$grace" "$c2" >/dev/null
assert_lt "$(elapsed "$t")" "$grace" "second stop within the grace period"
finish
