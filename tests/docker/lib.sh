# Helpers for the real-Docker scenarios (sourced by each tests/docker/<name>.sh).
#
# A scenario runs against $IMAGE (set by scripts/docker-test.sh), makes every container and
# volume through the helpers below (so they are labelled and removed at exit), and checks with
# the assert_* helpers: each prints `ok: ...` or `FAIL: ...` with what was expected and what
# came, and the scenario exits 1 at the end when any check failed.
#
# Run one by hand:  IMAGE=hermes:docker-test bash tests/docker/routing.sh
# (scripts/docker-test.sh routing does the same after building the image).

set -uo pipefail

: "${IMAGE:?IMAGE is not set: run scenarios through scripts/docker-test.sh}"
HDT_FAILS=0
HDT_PREFIX="hdt-$(basename "$0" .sh)-$$"
HDT_TMP=$(mktemp -d "/tmp/${HDT_PREFIX}.XXXXXX")
chmod 0755 "$HDT_TMP"
HDT_CONTAINERS=()
HDT_VOLUMES=()
LABEL=(--label hermes-docker-test=1)

hdt_cleanup() {
    local c v
    for c in "${HDT_CONTAINERS[@]}"; do docker rm -f "$c" >/dev/null 2>&1; done
    for v in "${HDT_VOLUMES[@]}"; do docker volume rm -f "$v" >/dev/null 2>&1; done
    rm -rf "$HDT_TMP"
}
trap hdt_cleanup EXIT

# --- assertions ----------------------------------------------------------------------------

ok() { printf 'ok: %s\n' "$*"; }
fail() {
    printf 'FAIL: %s\n' "$1"
    shift
    local line
    for line in "$@"; do printf '      %s\n' "$line"; done
    HDT_FAILS=$((HDT_FAILS + 1))
}
# Shows a value on one line, cut to 600 characters.
show() { local s=${1//$'\n'/⏎}; ((${#s} > 600)) && s="${s:0:600}…"; printf '%s' "$s"; }

assert_eq() { # expected actual what
    if [[ $2 == "$1" ]]; then ok "$3"; else fail "$3" "expected: $(show "$1")" "got:      $(show "$2")"; fi
}
assert_ne() { # unexpected actual what
    if [[ $2 != "$1" ]]; then ok "$3"; else fail "$3" "expected anything but: $(show "$1")"; fi
}
assert_contains() { # haystack needle what
    if [[ $1 == *"$2"* ]]; then ok "$3"; else fail "$3" "expected to contain: $(show "$2")" "in:                  $(show "$1")"; fi
}
assert_not_contains() { # haystack needle what
    if [[ $1 != *"$2"* ]]; then ok "$3"; else fail "$3" "expected NOT to contain: $(show "$2")" "in:                      $(show "$1")"; fi
}
assert_match() { # string regex what
    if [[ $1 =~ $2 ]]; then ok "$3"; else fail "$3" "expected to match /$2/" "got: $(show "$1")"; fi
}
assert_lt() { # a b what   (numbers, decimals allowed): a < b
    if awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; then ok "$3 ($1 < $2)"; else fail "$3" "expected $1 < $2"; fi
}
assert_le() { # a b what: a <= b
    if awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; then ok "$3 ($1 <= $2)"; else fail "$3" "expected $1 <= $2"; fi
}
assert_empty() { # value what
    if [[ -z $1 ]]; then ok "$2"; else fail "$2" "expected nothing, got: $(show "$1")"; fi
}
# Runs a command; checks its exit code; leaves its stdout+stderr in $OUT.
assert_rc() { # expected what -- command...
    local want=$1 what=$2
    shift 2
    [[ ${1:-} == -- ]] && shift
    OUT=$("$@" 2>&1)
    local rc=$?
    if ((rc == want)); then ok "$what (exit $rc)"; else fail "$what" "command: $*" "expected exit $want, got $rc" "output: $(show "$OUT")"; fi
}

finish() {
    if ((HDT_FAILS)); then
        printf '%d check(s) failed\n' "$HDT_FAILS"
        exit 1
    fi
    printf 'all checks passed\n'
    exit 0
}

# --- containers ----------------------------------------------------------------------------

# `docker run --rm` of $IMAGE without a network, labelled: drun [docker options] -- [CMD...]
drun() {
    local opts=()
    while (($#)) && [[ $1 != -- ]]; do opts+=("$1"); shift; done
    [[ ${1:-} == -- ]] && shift
    docker run --rm --network none "${LABEL[@]}" "${opts[@]}" "$IMAGE" "$@"
}

# Starts a detached container named $HDT_PREFIX-<name>, prints its name:
#   c=$(dstart NAME [docker options] -- [CMD...])
dstart() {
    local name="$HDT_PREFIX-$1"
    shift
    local opts=()
    while (($#)) && [[ $1 != -- ]]; do opts+=("$1"); shift; done
    [[ ${1:-} == -- ]] && shift
    HDT_CONTAINERS+=("$name")
    docker run -d --name "$name" --network none "${LABEL[@]}" "${opts[@]}" "$IMAGE" "$@" >/dev/null || return 1
    printf '%s\n' "$name"
}
# A container name this scenario will remove at exit (for `docker run` without -d).
track() { HDT_CONTAINERS+=("$HDT_PREFIX-$1"); printf '%s\n' "$HDT_PREFIX-$1"; }

# A user memory provider NAME needing the pip package SPEC, put on VOLUME as an operator would
# (its manifest in plugins/NAME/plugin.yaml; the container's boot seeds the volume too):
#   plant_memory_plugin VOLUME NAME SPEC [docker options]
plant_memory_plugin() {
    local volume=$1 name=$2 spec=$3
    shift 3
    printf 'name: %s\nversion: 0.1.0\ndescription: test memory provider\nkind: memory\npip_dependencies:\n  - %s\n' \
        "$name" "$spec" \
        | drun -i -v "$volume:/opt/data" "$@" -- sh -c "mkdir -p /opt/data/plugins/$name && cat >/opt/data/plugins/$name/plugin.yaml" \
            >/dev/null 2>&1
}

# A fresh named volume, removed at exit: v=$(mkvolume NAME)
mkvolume() {
    local name="$HDT_PREFIX-$1"
    HDT_VOLUMES+=("$name")
    docker volume create "${LABEL[@]}" "$name" >/dev/null
    printf '%s\n' "$name"
}

# Polls until a command succeeds: wait_for SECONDS WHAT -- command...
wait_for() {
    local secs=$1 what=$2
    shift 2
    [[ ${1:-} == -- ]] && shift
    local deadline=$((SECONDS + secs))
    while ((SECONDS < deadline)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    fail "waited ${secs} s for: $what" "command: $*"
    return 1
}

state() { docker inspect -f '{{.State.Status}}' "$1" 2>/dev/null; }
exit_code() { docker inspect -f '{{.State.ExitCode}}' "$1" 2>/dev/null; }
running() { [[ $(state "$1") == running ]]; }
# Waits for a container to exit and prints its exit code.
wait_exit() { timeout "${2:-60}" docker wait "$1" 2>/dev/null || echo timeout; }
# The supervisor inside a running container answers (as the service user, through the shim).
supervisor_up() { docker exec "$1" hermes service status >/dev/null 2>&1; }
# Service state as `hermes service status --json` reports it.
service_state() { # container service
    docker exec "$1" hermes service status --json 2>/dev/null | python3 -c '
import json, sys
name = sys.argv[1]
data = json.load(sys.stdin)
items = data.get("services", data) if isinstance(data, dict) else data
for s in items:
    if s.get("name") == name:
        print(s.get("state", ""))
        break
' "$2"
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
# service_is CONTAINER SERVICE STATE: the service is in that state now.
service_is() { [[ $(service_state "$1" "$2") == "$3" ]]; }
# The main program's own lines: $1 without PID 1's `[init] ...` and mirrored `[service] ...` lines.
plain() { grep -v -E '^\[(init|gateway-[^]]*|main)\] ' <<<"$1"; }
# Waits until the supervisor of a container answers; gives up at once if the container exited.
wait_up() { # container [seconds]
    local c=$1 deadline=$((SECONDS + ${2:-30}))
    while ((SECONDS < deadline)); do
        supervisor_up "$c" && return 0
        if ! running "$c"; then
            fail "container $c exited (code $(exit_code "$c")) before its supervisor answered" \
                "its log: $(show "$(docker logs "$c" 2>&1 | tail -n 5)")"
            return 1
        fi
        sleep 0.2
    done
    fail "waited ${2:-30} s for the supervisor of $c"
    return 1
}

# --- the full flavour ------------------------------------------------------------------------

# Makes the helpers above use the full image (`full-*` scenarios call it first). IMAGE_FULL is
# set by scripts/docker-test.sh, which builds that image only when such a scenario runs.
use_full_image() {
    IMAGE=${IMAGE_FULL:?IMAGE_FULL is not set: run full-* scenarios through scripts/docker-test.sh}
    docker image inspect "$IMAGE" >/dev/null 2>&1 || { fail "no image $IMAGE"; finish; }
}

# One field of a service in `hermes service status NAME --json`, as JSON (`"up"`, `1234`,
# `{"code": 75}`; empty when the supervisor does not answer): service_field CONTAINER SERVICE FIELD
service_field() {
    docker exec "$1" hermes service status "$2" --json 2>/dev/null | python3 -c '
import json, sys
rows = json.load(sys.stdin)
print(json.dumps(rows[0].get(sys.argv[1]), sort_keys=True) if rows else "")
' "$3" 2>/dev/null
}
# The service's pid now (0 when it has none): service_pid CONTAINER SERVICE
service_pid() { local p; p=$(service_field "$1" "$2" pid); [[ $p =~ ^[0-9]+$ ]] && echo "$p" || echo 0; }
# Up with a pid other than OLD: service_replaced CONTAINER SERVICE OLD
service_replaced() {
    local p
    p=$(service_pid "$1" "$2")
    service_is "$1" "$2" up && ((p != 0 && p != $3))
}

# The full-* scenarios' stub model provider (full/upstream.py) listens on this port inside the
# container, and the agent's API server on 8642.
HDT_STUB_PORT=18080
HDT_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Starts the full image on a data directory, the stub provider as its main program (so it runs
# again after `docker restart`), the scenario scripts at /opt/hdt:
#   c=$(full_start NAME DATA_DIR [docker options])
full_start() {
    local name=$1 data=$2
    shift 2
    dstart "$name" -v "$data:/opt/data" -v "$HDT_LIB_DIR/full:/opt/hdt:ro" \
        -v "$HDT_LIB_DIR/../../crates/hermes/tests/cli/clients:/opt/clients:ro" "$@" \
        -- python3 /opt/hdt/upstream.py "$HDT_STUB_PORT" /tmp/upstream.jsonl /opt/clients
}
# The official openai SDK (the agent venv's) asks the agent's API server, plain then streamed,
# as the hermes user: openai_ask CONTAINER API_SERVER_KEY TEXT  (prints `plain: ...`, `stream: ...`)
openai_ask() {
    docker exec -u hermes "$1" /opt/hermes-agent/bin/python /opt/hdt/openai_client.py \
        http://127.0.0.1:8642/v1 "$2" "$3"
}
# The agent's API server answers /health: agent_health CONTAINER
agent_health() { docker exec "$1" curl -fsS -m 5 http://127.0.0.1:8642/health; }
# What the stub provider received, one JSON request a line: stub_requests CONTAINER
stub_requests() { docker exec "$1" cat /tmp/upstream.jsonl; }
