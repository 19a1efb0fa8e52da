#!/usr/bin/env bash
# PID 1 benchmark: `hermes init` (release build) side by side with Debian's tini (dynamic and
# tini-static), dumb-init, catatonit and s6-svscan, in ONE run of this script:
#
#   1. idle resident memory of the init process (VmRSS and PSS from /proc) with one child
#      sleeping, each init as PID 1 of its own PID namespace;
#   2. start -> main program running: one hyperfine run over `<init> -- true` for every peer
#      (the whole life: start, spawn the main program, reap it, exit);
#   3. orphans reaped per second: as PID 1 of a fresh PID namespace, the main program makes
#      $ORPHANS orphans (`(true &)`) and waits until `ps` shows no zombie; one hyperfine run;
#  1b. `hermes up`'s own memory with one service (`sleep 600`, declared under `services:`; the
#      default gateway registered down, no dashboard), before and after its loop settles,
#      beside s6-svscan + its one s6-supervise from step 1.
#
# s6-svscan runs no CMD: its "main program" is a service in a scan directory whose run script
# does the work and then `s6-svscanctl -t` (so its rows include that exec and s6's shutdown).
#
# Writes raw data to bench/init/results/ (hyperfine JSON exports, rss.tsv, machine.txt) and
# prints markdown tables. Not part of the test suite. Needs root (PID namespaces).
# Usage: bash bench/init/run.sh      Knobs: WARMUP (3), MIN_RUNS (50), ORPHANS (500);
#   HERMES_BIN=path: measure that binary instead of building the release one; HERMES_ALT=path:
#   a second build (another profile or flags) measured in the same run as `hermes init (alt)`
#   and `hermes up (alt)` rows, for a decision between builds.
set -euo pipefail

WARMUP="${WARMUP:-3}"
MIN_RUNS="${MIN_RUNS:-50}"
ORPHANS="${ORPHANS:-500}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="$here/results"
mkdir -p "$out"

. "$here/../lib.sh"

[ "$(id -u)" -eq 0 ] || die "run as root: the benchmark uses PID namespaces (\`unshare --pid\`)"

# --- peers ------------------------------------------------------------------------------
ensure_commands tini:tini tini-static:tini dumb-init:dumb-init catatonit:catatonit \
    s6-svscan:s6 hyperfine:hyperfine

if [ -n "${HERMES_BIN:-}" ]; then
    HERMES="$HERMES_BIN"
else
    log "building the release binary"
    target="$(cargo_target_dir "$repo")"
    (cd "$repo" && cargo build --release -p hermes >/dev/null 2>&1) || die "\`cargo build --release -p hermes\` failed"
    HERMES="$target/release/hermes"
fi
[ -x "$HERMES" ] || die "no release binary at \`$HERMES\`"
ALT="${HERMES_ALT:-}"
[ -z "$ALT" ] || [ -x "$ALT" ] || die "no binary at HERMES_ALT=\`$ALT\`"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export HERMES_HOME="$work/data" HERMES_RUNTIME_DIR="$work/run"
# One boot un-timed, so every timed run is a warm boot of an existing volume.
"$HERMES" init -- true 2>/dev/null || die "\`hermes init -- true\` failed"

# A scan directory whose only service runs "$@" then stops s6-svscan.
s6dir() {
    local dir="$1"; shift
    mkdir -p "$dir/main"
    {
        printf '#!/bin/sh\n'
        printf '%s\n' "$*"
        printf 'exec s6-svscanctl -t %s\n' "$dir"
    } >"$dir/main/run"
    chmod +x "$dir/main/run"
}

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "kernel: $(uname -sr)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
    echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "hermes: $("$HERMES" --version)"
    for p in tini dumb-init catatonit s6; do
        echo "$p: $(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo '?')"
    done
    echo "hyperfine: $(hyperfine --version)"
    echo "hermes binary: $(stat -c %s "$HERMES") bytes ($(file -b "$HERMES" | cut -d, -f1-2))"
    [ -z "$ALT" ] || echo "hermes alt binary: $ALT, $(stat -c %s "$ALT") bytes ($(file -b "$ALT" | cut -d, -f1-2))"
    for b in tini tini-static dumb-init catatonit s6-svscan; do
        echo "$b binary: $(stat -c %s "$(command -v "$b")") bytes"
    done
} >"$out/machine.txt"

# --- 1. idle RSS --------------------------------------------------------------------------
log "idle resident memory"
rss_row() {
    local name="$1"; shift
    unshare --pid --fork --mount-proc "$@" >/dev/null 2>&1 &
    local wrapper=$!
    local pid=""
    for _ in $(seq 100); do
        pid="$(pgrep -P "$wrapper" | head -1 || true)"
        [ -n "$pid" ] && [ -n "$(pgrep -P "$pid" | head -1 || true)" ] && break
        sleep 0.05
    done
    # Past hermes init's settle point (1 s after its loop starts), as for a real container.
    sleep 2
    local rss pss
    rss="$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")"
    pss="$(awk '/^Pss:/ {print $2}' "/proc/$pid/smaps_rollup")"
    local extra=""
    if [ "$name" = "s6-svscan" ]; then
        # s6 also keeps one s6-supervise per service.
        local sup
        sup="$(pgrep -P "$pid" -x s6-supervise | head -1 || true)"
        [ -n "$sup" ] && extra="$(awk '/^VmRSS:/ {print $2}' "/proc/$sup/status")"
    fi
    # The init is PID 1 of its namespace: killing it ends everything inside.
    kill -KILL "$pid" 2>/dev/null || true
    wait "$wrapper" 2>/dev/null || true
    printf '%s\t%s\t%s\t%s\n' "$name" "$rss" "$pss" "$extra"
}
s6idle="$work/s6-idle"
mkdir -p "$s6idle/sleeper"
printf '#!/bin/sh\nexec sleep 600\n' >"$s6idle/sleeper/run"
chmod +x "$s6idle/sleeper/run"
{
    printf 'init\trss_kb\tpss_kb\tsupervise_rss_kb\n'
    rss_row "hermes init" "$HERMES" init -- sleep 600
    [ -z "$ALT" ] || rss_row "hermes init (alt)" "$ALT" init -- sleep 600
    rss_row "tini-static" tini-static -- sleep 600
    rss_row "tini" tini -- sleep 600
    rss_row "dumb-init" dumb-init sleep 600
    rss_row "catatonit" catatonit -- sleep 600
    rss_row "s6-svscan" s6-svscan "$s6idle"
} >"$out/rss.tsv"

# --- 1b. hermes up, one service -----------------------------------------------------------
log "hermes up with one service"
up_row() {
    local name="$1" bin="$2" root="$work/up-$3" run="$work/up-run-$3"
    mkdir -p "$root" "$run"
    printf 'services:\n  sleeper:\n    command: sleep 600\n' >"$root/config.yaml"
    # The default profile's gateway registered, not started: the one service is the sleeper.
    printf '{"gateway_state": "stopped"}\n' >"$root/gateway_state.json"
    HERMES_HOME="$root" HERMES_RUNTIME_DIR="$run" HERMES_AGENT_CLI="" \
        "$bin" up --no-dashboard >/dev/null 2>&1 &
    local pid=$!
    # The service is `sh -c 'sleep 600'`: up once the shell's child runs.
    local sh=""
    for _ in $(seq 100); do
        sh="$(pgrep -P "$pid" | head -1 || true)"
        [ -n "$sh" ] && [ -n "$(pgrep -P "$sh" | head -1 || true)" ] && break
        sleep 0.05
    done
    [ -n "$sh" ] || { kill -TERM "$pid"; die "\`hermes up\` did not start its service"; }
    # Before its loop settles (1 s), then past it (as for PID 1).
    sleep 0.3
    local early
    early="$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")"
    sleep 2
    local rss pss
    rss="$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")"
    pss="$(awk '/^Pss:/ {print $2}' "/proc/$pid/smaps_rollup")"
    cp "/proc/$pid/smaps_rollup" "$out/up-$3-smaps_rollup.txt"
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    printf '%s\t%s\t%s\t%s\n' "$name" "$rss" "$pss" "$early"
}
up_row "hermes up" "$HERMES" main >>"$out/rss.tsv"
[ -z "$ALT" ] || up_row "hermes up (alt)" "$ALT" alt >>"$out/rss.tsv"

# --- 2. start -> main program running ------------------------------------------------------
log "start -> main program running (hyperfine)"
s6start="$work/s6-start"
# A fresh scan directory before every run (s6 keeps state in it); timed for no peer.
printf '#!/bin/sh\nrm -rf %s\nmkdir -p %s/main\nprintf "#!/bin/sh\\nexec s6-svscanctl -t %s\\n" > %s/main/run\nchmod +x %s/main/run\n' \
    "$s6start" "$s6start" "$s6start" "$s6start" "$s6start" >"$work/prep-start.sh"
chmod +x "$work/prep-start.sh"
hyperfine -N --warmup "$WARMUP" --min-runs "$MIN_RUNS" --export-json "$out/start.json" \
    --prepare "$work/prep-start.sh" \
    -n "hermes init" "$HERMES init -- true" \
    ${ALT:+-n "hermes init (alt)" "$ALT init -- true"} \
    -n "tini-static" "tini-static -s -- true" \
    -n "tini" "tini -s -- true" \
    -n "dumb-init" "dumb-init true" \
    -n "catatonit" "catatonit -- true" \
    -n "s6-svscan" "s6-svscan $s6start" \
    -n "true (exec floor)" "true" >"$out/start.txt" 2>&1 || die "hyperfine failed; see $out/start.txt"

# --- 3. orphans reaped per second ---------------------------------------------------------
log "orphans reaped per second (hyperfine, $ORPHANS orphans per run)"
script="$work/orphans.sh"
cat >"$script" <<EOF
#!/bin/sh
i=0
while [ \$i -lt $ORPHANS ]; do (true &); i=\$((i+1)); done
while ps -eo stat= | grep -q '^Z'; do :; done
EOF
chmod +x "$script"
s6orph="$work/s6-orphans"
printf '#!/bin/sh\nrm -rf %s\nmkdir -p %s/main\nprintf "#!/bin/sh\\n%s\\nexec s6-svscanctl -t %s\\n" > %s/main/run\nchmod +x %s/main/run\n' \
    "$s6orph" "$s6orph" "$script" "$s6orph" "$s6orph" "$s6orph" >"$work/prep-orphans.sh"
chmod +x "$work/prep-orphans.sh"
hyperfine -N --warmup 1 --min-runs 10 --export-json "$out/orphans.json" \
    --prepare "$work/prep-orphans.sh" \
    -n "hermes init" "unshare --pid --fork --mount-proc $HERMES init -- $script" \
    -n "tini-static" "unshare --pid --fork --mount-proc tini-static -- $script" \
    -n "tini" "unshare --pid --fork --mount-proc tini -- $script" \
    -n "dumb-init" "unshare --pid --fork --mount-proc dumb-init $script" \
    -n "catatonit" "unshare --pid --fork --mount-proc catatonit -- $script" \
    -n "s6-svscan" "unshare --pid --fork --mount-proc s6-svscan $s6orph" >"$out/orphans.txt" 2>&1 \
    || die "hyperfine failed; see $out/orphans.txt"

# --- tables -------------------------------------------------------------------------------
python3 - "$out" "$ORPHANS" <<'EOF'
import json, sys, statistics
out, orphans = sys.argv[1], int(sys.argv[2])
rows = [l.rstrip("\n").split("\t") for l in open(f"{out}/rss.tsv")][1:]
ups = [r for r in rows if r[0].startswith("hermes up")]
rows = [r for r in rows if r not in ups]
tini_static = next(int(r[1]) for r in rows if r[0] == "tini-static")
print("| init | RSS idle | PSS idle | RSS / tini-static |")
print("|---|---:|---:|---:|")
for r in rows:
    extra = f" (+{int(r[3]):,} kB per s6-supervise)" if len(r) > 3 and r[3] else ""
    print(f"| {r[0]} | {int(r[1]):,} kB{extra} | {int(r[2]):,} kB | {int(r[1]) / tini_static:.2f}x |")
print()
s6 = next(r for r in rows if r[0] == "s6-svscan")
s6_rss = int(s6[1]) + int(s6[3] or 0)
print("| supervisor, 1 service | RSS idle | PSS idle | RSS / s6 |")
print("|---|---:|---:|---:|")
for up in ups:
    print(f"| {up[0]} | {int(up[1]):,} kB ({int(up[3]):,} kB before it settles) | {int(up[2]):,} kB | {int(up[1]) / s6_rss:.2f}x |")
print(f"| s6-svscan + s6-supervise | {s6_rss:,} kB | {int(s6[2]):,} kB (s6-svscan) | 1.00x |")
print()
def load(name):
    return {r["command"]: r for r in json.load(open(f"{out}/{name}.json"))["results"]}
start = load("start")
ref = start["tini-static"]["median"]
print("| init | start -> main done (median) | ± | runs | / tini-static |")
print("|---|---:|---:|---:|---:|")
for name, r in start.items():
    print(f"| {name} | {r['median']*1000:.2f} ms | {r['stddev']*1000:.2f} | {len(r['times'])} | {r['median']/ref:.2f}x |")
print()
orph = load("orphans")
ref = orph["tini-static"]["median"]
print(f"| init | {orphans} orphans, median | orphans / s | time / tini-static |")
print("|---|---:|---:|---:|")
for name, r in orph.items():
    print(f"| {name} | {r['median']*1000:.0f} ms | {orphans / r['median']:,.0f} | {r['median']/ref:.2f}x |")
EOF
