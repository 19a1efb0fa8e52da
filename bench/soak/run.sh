#!/usr/bin/env bash
# Soak test of the Hermes supervisor: many services crashing at random for a long time, with
# control clients talking to it all along. It looks for what only shows over time: memory or
# descriptor leaks, zombies nobody reaps, services that stop being restarted, helpers that
# outlive their service.
#
#   DURATION=1800 bench/soak/run.sh        # the default: 30 minutes
#   DURATION=60 bench/soak/run.sh          # a quick run
#
# Settings (environment):
#   DURATION  seconds to run (default 1800)
#   SERVICES  number of services (default 100)
#   CLIENTS   control-socket client loops running at once (default 4)
#   SAMPLE    seconds between samples (default 5)
#
# The supervisor is the `supervise` example of crates/hermes-supervisor (release build), the
# same loop `hermes up` and `hermes init` run. Each service lives 1-30 s, then ends one of four
# ways (by its index): exit 1-3; exit 1 leaving a helper in its process group; SIGKILL of
# itself; exit 75 (restart request). Every service prints a line when it starts. The clients
# (Unix socket only) ask for status in a loop and now and then restart a random service.
#
# Every SAMPLE seconds it records the supervisor's RSS (VmRSS), open descriptors
# (/proc/<pid>/fd), zombie children, and every service's restart counter. At the end it stops
# the supervisor with SIGTERM, prints the figures and exits non-zero if
#   * RSS grew more than 20 % over the first sample after warm-up,
#   * descriptors grew (the lowest count of the last quarter above the highest of the first),
#   * a zombie child was seen in two samples in a row (not reaped within SAMPLE seconds),
#   * a service's restart counter stood still for 90 s (each cycle is at most 30 s of life plus
#     at most 30 s of backoff),
#   * the supervisor died, did not stop on SIGTERM within 30 s, or a helper outlived it.
# Not part of the test suite. Needs: cargo, python3, ps.
set -uo pipefail

DURATION=${DURATION:-1800}
SERVICES=${SERVICES:-100}
CLIENTS=${CLIENTS:-4}
SAMPLE=${SAMPLE:-5}
STUCK_AFTER=90

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/bench/lib.sh"
command -v python3 >/dev/null 2>&1 || die "\`python3\` is required"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$(cargo_target_dir "$ROOT")}
log "building the supervise example (release)"
cargo build --quiet --release -p hermes-supervisor --example supervise --manifest-path "$ROOT/Cargo.toml" ||
    die "build failed"
BIN=$CARGO_TARGET_DIR/release/examples/supervise

W=$(mktemp -d /tmp/hermes-soak.XXXXXX)
TAG="hermes-soak-helper-$(basename "$W")"
SUP=""
CLIENT_PIDS=()
# Helpers still running: the pids the services recorded, if they still carry this run's tag
# (a recycled pid is never touched).
live_helpers() {
    local p
    for p in $(cat "$W/helpers" 2>/dev/null); do
        { tr '\0' ' ' < "/proc/$p/cmdline"; } 2>/dev/null | grep -q "$TAG" && echo "$p"
    done
}
cleanup() {
    for p in "${CLIENT_PIDS[@]}"; do kill "$p" 2>/dev/null; done
    [ -n "$SUP" ] && kill -KILL "$SUP" 2>/dev/null
    for p in $(live_helpers); do kill -KILL "$p" 2>/dev/null; done
    rm -rf "$W"
}
trap cleanup EXIT

# ---- services ----
{
    echo "services:"
    for i in $(seq 1 "$SERVICES"); do
        life='n=$(od -An -N1 -tu1 /dev/urandom); n=$((n % 30 + 1)); echo "start, living ${n}s"; sleep $n'
        case $((i % 4)) in
            0) end='exit $((n % 3 + 1))' ;;
            # A helper in its group. It carries this run's tag, and its own children live 1 s,
            # so killing it (by pid, at clean-up) leaves nothing behind.
            1) end="sh -c 'while :; do sleep 1; done' $TAG & echo \$! >> $W/helpers; exit 1" ;;
            2) end='kill -KILL $$' ;;
            3) end='exit 75' ;;
        esac
        printf '  svc-%s:\n    command: %s\n' "$i" "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$life; $end")"
    done
} > "$W/config.yaml"

"$BIN" run "$W/run" "$W/logs" "$W/config.yaml" > "$W/stdout" 2> "$W/stderr" &
SUP=$!
for _ in $(seq 1 100); do [ -S "$W/run/supervisor.sock" ] && break; sleep 0.1; done
[ -S "$W/run/supervisor.sock" ] || die "the supervisor did not start: $(cat "$W/stderr")"
log "supervisor $SUP: $SERVICES services, $CLIENTS client loops, ${DURATION}s, a sample every ${SAMPLE}s"

START=$(date +%s)
END=$((START + DURATION))

# ---- clients ----
client_loop() { # $1 = index; counts ok/failed requests in $W/client.$1
    local ok=0 failed=0 k=0 req
    while [ "$(date +%s)" -lt "$END" ]; do
        k=$((k + 1))
        if [ $((k % 25)) -eq 0 ]; then
            req="{\"v\":1,\"op\":\"restart\",\"service\":\"svc-$(( $(od -An -N2 -tu2 /dev/urandom) % SERVICES + 1 ))\"}"
        else
            req='{"v":1,"op":"status"}'
        fi
        if timeout 10 "$BIN" client "$W/run" "$req" 2>/dev/null | grep -q '"ok":true'; then
            ok=$((ok + 1))
        else
            failed=$((failed + 1))
        fi
        echo "$ok $failed" > "$W/client.$1"
        sleep 0.1
    done
}
for c in $(seq 1 "$CLIENTS"); do client_loop "$c" & CLIENT_PIDS+=($!); done

# ---- samples ----
# One line per sample: elapsed rss_kib fds zombies total_restarts, and per-service restarts
# in $W/restarts.<elapsed>.
status_rows() { # prints "name restarts state" per service
    timeout 10 "$BIN" client "$W/run" '{"v":1,"op":"status"}' 2>/dev/null | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("services") or []:
    print(r["name"], r["restarts"], r["state"])'
}
zombies() { ps -o pid=,stat= --ppid "$SUP" 2>/dev/null | awk '$2 ~ /^Z/ {print $1}' | sort; }

: > "$W/samples"
declare -A last_restarts last_change
PREV_ZOMBIES=""
LINGERING=0
STUCK=""
DIED=0
while [ "$(date +%s)" -lt "$END" ]; do
    sleep "$SAMPLE"
    now=$(date +%s); el=$((now - START))
    if ! kill -0 "$SUP" 2>/dev/null; then DIED=1; break; fi
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$SUP/status")
    fds=$(ls "/proc/$SUP/fd" | wc -l)
    z=$(zombies)
    nz=$(printf '%s' "$z" | grep -c . || true)
    if [ -n "$z" ] && [ -n "$PREV_ZOMBIES" ]; then
        again=$(comm -12 <(echo "$z") <(echo "$PREV_ZOMBIES") | grep -c . || true)
        LINGERING=$((LINGERING + again))
    fi
    PREV_ZOMBIES=$z
    total=0
    rows=$(status_rows)
    [ -n "$rows" ] || { echo "  ${el}s: status failed" >&2; continue; }
    while read -r name restarts state; do
        total=$((total + restarts))
        if [ "${last_restarts[$name]:-x}" != "$restarts" ]; then
            last_restarts[$name]=$restarts; last_change[$name]=$now
        elif [ $((now - ${last_change[$name]})) -gt "$STUCK_AFTER" ]; then
            case " $STUCK " in *" $name "*) ;; *) STUCK="$STUCK $name($state)";; esac
        fi
    done <<< "$rows"
    echo "$el $rss $fds $nz $total" >> "$W/samples"
    printf '  %5ss  rss %6s KiB  fds %4s  zombies %2s  restarts %6s\n' "$el" "$rss" "$fds" "$nz" "$total" >&2
done
for p in "${CLIENT_PIDS[@]}"; do wait "$p" 2>/dev/null; done
CLIENT_PIDS=()

# ---- stop ----
STOP_OK=0
if [ "$DIED" -eq 0 ]; then
    kill -TERM "$SUP"
    for _ in $(seq 1 300); do kill -0 "$SUP" 2>/dev/null || { STOP_OK=1; break; }; sleep 0.1; done
    wait "$SUP" 2>/dev/null
fi
SUP=""
sleep 1
HELPERS=$(live_helpers | grep -c . || true)

# ---- figures ----
ok=0; failed=0
for f in "$W"/client.*; do [ -f "$f" ] && read -r o fl < "$f" && ok=$((ok + o)) && failed=$((failed + fl)); done
python3 - "$W/samples" "$DURATION" "$SERVICES" "$CLIENTS" "$LINGERING" "$STUCK" "$DIED" "$STOP_OK" \
    "$HELPERS" "$ok" "$failed" "$SAMPLE" <<'EOF'
import sys
path, duration, services, clients, lingering, stuck, died, stop_ok, helpers, ok, failed, sample = sys.argv[1:]
rows = [list(map(int, l.split())) for l in open(path) if l.strip()]
fail = []
if not rows:
    print("no samples"); sys.exit(1)
rss = [r[1] for r in rows]; fds = [r[2] for r in rows]; zom = [r[3] for r in rows]
restarts = rows[-1][4]
# Baseline after warm-up: the first sample at least 30 s (or a quarter of the run) in.
warm = min(30, int(duration) // 4)
base = next((r for r in rows if r[0] >= warm), rows[0])
q = max(1, len(rows) // 4)
print(f"soak: {duration} s, {services} services, {clients} client loops, a sample every {sample} s ({len(rows)} samples)")
print(f"RSS (KiB):     first {rss[0]}, after warm-up {base[1]}, last {rss[-1]}, max {max(rss)}"
      f" ({(rss[-1] - base[1]) * 100 / base[1]:+.1f} % since warm-up)")
print(f"open fds:      first {fds[0]}, last {fds[-1]}, max {max(fds)};"
      f" lowest of the last quarter {min(fds[-q:])}, highest of the first {max(fds[:q])}")
print(f"zombies:       max {max(zom)} in a sample, {lingering} seen in two samples in a row")
print(f"restarts:      {restarts} in total ({rows[0][4]} at the first sample)")
print(f"clients:       {ok} requests answered ok, {failed} failed")
print(f"after SIGTERM: {'stopped' if stop_ok == '1' else 'DID NOT STOP'}, {helpers} helper(s) left running")
if rss[-1] > base[1] * 1.2: fail.append("RSS grew more than 20 %")
if min(fds[-q:]) > max(fds[:q]): fail.append("descriptors grew")
if int(lingering) > 0: fail.append("a zombie lingered")
if stuck.strip(): fail.append(f"services stopped being restarted:{stuck}")
if died == "1": fail.append("the supervisor died")
if stop_ok != "1" and died != "1": fail.append("the supervisor did not stop on SIGTERM")
if int(helpers) > 0: fail.append("helpers outlived the supervisor")
if restarts <= rows[0][4] and len(rows) > 1: fail.append("no restarts during the run")
print("result:        " + ("PASS" if not fail else "FAIL: " + "; ".join(fail)))
sys.exit(1 if fail else 0)
EOF
