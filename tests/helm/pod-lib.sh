# The chart's pod in Docker: helpers of tests/docker/helm-pod.sh and full-helm-pod.sh, sourced
# after tests/docker/lib.sh with HELM_CASE (a case of tests/helm/check.py, or a values file) and
# HELM_PROFILE set. Renders the pod (scripts/helm-test.sh pod), prepares its volume as the kubelet
# hands it over with fsGroup and its Secret as an env file, and offers map_pod, run_pod, field and
# probe below.

repo=${HDT_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
pod=$HDT_TMP/pod.json
if ! bash "$repo/scripts/helm-test.sh" pod "$HELM_CASE" "$HELM_PROFILE" >"$pod" 2>"$HDT_TMP/render.log"; then
    fail "rendering the chart's pod" "$(show "$(cat "$HDT_TMP/render.log")")"
    finish
fi
ok "rendered the pod of profile $HELM_PROFILE ($HELM_CASE)"

# The PVC as the kubelet hands it over with fsGroup: root's, group fsGroup, setgid, g+rwx.
data=$HDT_TMP/pvc
mkdir -p "$data"
fs_group=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["template"]["spec"]["securityContext"]["fsGroup"])' "$pod")
chown "0:$fs_group" "$data"
chmod 2775 "$data"
# The profile's Secret (secretName), as envFrom would give its keys.
secret=$HDT_TMP/secret.env
printf '%s\n' "${HELM_SECRET:-OPENAI_API_KEY=sk-hdt-not-a-real-key}" >"$secret"

# The containers are removed at exit even though dstart ran in a command substitution.
trap 'docker rm -f "$HDT_PREFIX-pod" "$HDT_PREFIX-pod2" "$HDT_PREFIX-stub" >/dev/null 2>&1; for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null; done; hdt_cleanup' EXIT

# map_pod SEED_DIR [POD_JSON]: the pod's docker mapping into POD (and the ConfigMap into
# SEED_DIR); each emptyDir is a fresh tmpfs of the kubelet's mode and group under $empty.
empty=$HDT_TMP/emptydirs
MOUNTS=()
map_pod() {
    mkdir -p "$1"
    POD=$(python3 "$repo/tests/helm/pod_to_docker.py" "${2:-$pod}" "$data" "$1" "$secret" "$empty") || return 1
    local line host options
    while IFS=$'\t' read -r host options; do
        mountpoint -q "$host" && umount "$host"
        mkdir -p "$host"
        mount -t tmpfs -o "$options" tmpfs "$host" || return 1
        MOUNTS+=("$host")
    done < <(python3 -c 'import json,sys; [print(d["host"] + "\t" + d["options"]) for d in json.loads(sys.argv[1])["emptyDirs"]]' "$POD")
}
# run_pod NAME: starts a container of the mapped pod, prints its name.
run_pod() {
    local opts=() args=()
    mapfile -d '' opts < <(python3 -c 'import json,sys; sys.stdout.write("".join(x + "\0" for x in json.loads(sys.argv[1])["options"]))' "$POD")
    mapfile -d '' args < <(python3 -c 'import json,sys; sys.stdout.write("".join(x + "\0" for x in json.loads(sys.argv[1])["args"]))' "$POD")
    dstart "$1" "${opts[@]}" -- "${args[@]}"
}
# field KEY...: one value of the mapping (JSON for a list or an object).
field() {
    python3 -c '
import json, sys
v = json.loads(sys.argv[1])
for k in sys.argv[2:]:
    v = v[k]
print(json.dumps(v) if isinstance(v, (list, dict)) else v)
' "$POD" "$@"
}

# probe CONTAINER KIND: runs the pod's probe as the kubelet would (exec in the container, or
# its httpGet against the pod's own address, here the container's loopback).
probe() {
    local c=$1 kind=$2 spec
    spec=$(field probes "$kind")
    python3 - "$spec" "$(field port)" <<'EOF' >"$HDT_TMP/probe.cmd"
import json, sys
p, port = json.loads(sys.argv[1]), sys.argv[2]
if "exec" in p:
    print("\0".join(p["exec"]["command"]), end="")
else:
    g = p["httpGet"]
    target = port if g["port"] == "api" else g["port"]
    print("\0".join(["curl", "-fsS", "-m", str(p.get("timeoutSeconds", 1)), f"http://127.0.0.1:{target}{g['path']}"]), end="")
EOF
    local cmd=()
    mapfile -d '' cmd <"$HDT_TMP/probe.cmd"
    docker exec "$c" "${cmd[@]}"
}

