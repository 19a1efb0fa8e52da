#!/usr/bin/env bash
# Compare the Hermes supervisor with Debian's s6, runit and supervisord, side by side:
#   1. memory of the supervision tree with 1, 10 and 100 services (services themselves excluded)
#   2. crash -> replacement latency (SIGKILL of a healthy service until its replacement runs)
#   3. one status query (client fork+exec included), with hyperfine
#
# Needs: Debian packages `s6 runit supervisor hyperfine` (installed when missing); run as any
# user that can write $TMPDIR.
# Usage: bench/supervisor/run.sh [reps]        (prints Markdown tables to stdout)
# Hermes is driven through the `supervise` example of crates/hermes-supervisor.
set -uo pipefail

REPS=${1:-7}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/bench/lib.sh"
ensure_commands s6-svscan:s6 runsvdir:runit supervisord:supervisor hyperfine:hyperfine
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
cargo build --quiet --release -p hermes-supervisor --example supervise --manifest-path "$ROOT/Cargo.toml"
[ -n "${BENCH_NO_BUILD:-}" ] || true
BIN=$CARGO_TARGET_DIR/release/examples/supervise
W=$(mktemp -d /tmp/hermes-bench.XXXXXX)
trap 'cleanup_all; rm -rf "$W"' EXIT
ROOTPIDS=()

now_ns() { date +%s%N; }

# All descendants of a pid (children first is not needed: we SIGKILL them all).
descendants() {
  local p=$1 kids
  kids=$(ps -o pid= --ppid "$p" 2>/dev/null || true)
  for k in $kids; do echo "$k"; descendants "$k"; done
}

kill_tree() {
  local root=$1 pids
  pids="$root $(descendants "$root" | tr '\n' ' ')"
  kill -KILL $pids 2>/dev/null || true
  wait "$root" 2>/dev/null || true
}

cleanup_all() { for p in "${ROOTPIDS[@]}"; do kill_tree "$p"; done; }

# Sum of Rss and Pss (kB) over the given pids.
mem() {
  local rss=0 pss=0 r s
  for p in "$@"; do
    r=$(awk '/^Rss:/{print $2}' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0)
    s=$(awk '/^Pss:/{print $2}' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0)
    rss=$((rss + ${r:-0})); pss=$((pss + ${s:-0}))
  done
  echo "$rss $pss"
}

# Pids in the tree of $1 whose command name is one of the remaining args.
tree_pids_named() {
  local root=$1; shift
  for p in $root $(descendants "$root"); do
    local c; c=$(cat "/proc/$p/comm" 2>/dev/null || true)
    for n in "$@"; do [ "$c" = "$n" ] && echo "$p"; done
  done
}

count_sleeps() { tree_pids_named "$1" sleep | wc -l; }
have_sleeps() { [ "$(count_sleeps "$1")" -ge "$2" ]; }   # have_sleeps <root> <n>
lines_gt() { [ "$(wc -l < "$1" 2>/dev/null || echo 0)" -gt "$2" ]; }  # lines_gt <file> <n>

wait_for() { # wait_for <seconds> <command...>
  local until=$(( $(date +%s) + $1 )); shift
  until "$@"; do [ "$(date +%s)" -ge "$until" ] && return 1; sleep 0.05; done
}

# ---- setups: each prints the root pid; services run `sleep 3600`, or log their start time ----
svc_cmd() { # $1 = marker file or empty
  if [ -n "$1" ]; then echo "date +%s%N >> $1; exec sleep 3600"; else echo "exec sleep 3600"; fi
}

start_hermes() { # n marker
  local d=$W/hermes; rm -rf "$d"; mkdir -p "$d"
  { echo "services:"; for i in $(seq 1 "$1"); do echo "  svc$i:"; echo "    command: \"$(svc_cmd "$2")\""; done; } > "$d/config.yaml"
  "$BIN" run "$d/run" "$d/logs" "$d/config.yaml" > /dev/null 2>&1 &
  echo $!
}

start_s6() {
  local d=$W/s6; rm -rf "$d"; mkdir -p "$d"
  for i in $(seq 1 "$1"); do
    mkdir -p "$d/svc$i"; printf '#!/bin/sh\n%s\n' "$(svc_cmd "$2")" > "$d/svc$i/run"; chmod +x "$d/svc$i/run"
  done
  s6-svscan "$d" > /dev/null 2>&1 &
  echo $!
}

start_runit() {
  local d=$W/runit; rm -rf "$d"; mkdir -p "$d"
  for i in $(seq 1 "$1"); do
    mkdir -p "$d/svc$i"; printf '#!/bin/sh\n%s\n' "$(svc_cmd "$2")" > "$d/svc$i/run"; chmod +x "$d/svc$i/run"
  done
  runsvdir -P "$d" > /dev/null 2>&1 &
  echo $!
}

start_supervisord() {
  local d=$W/sd; rm -rf "$d"; mkdir -p "$d"
  {
    echo "[supervisord]"; echo "nodaemon=true"; echo "logfile=$d/supervisord.log"; echo "pidfile=$d/pid"
    echo "[unix_http_server]"; echo "file=$d/sock"
    echo "[rpcinterface:supervisor]"; echo "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface"
    echo "[supervisorctl]"; echo "serverurl=unix://$d/sock"
    for i in $(seq 1 "$1"); do
      echo "[program:svc$i]"; echo "command=/bin/sh -c '$(svc_cmd "$2" | sed 's/%/%%/g')'"; echo "autorestart=true"
      echo "stdout_logfile=$d/svc$i.log"; echo "stderr_logfile=$d/svc$i.err"
    done
  } > "$d/supervisord.conf"
  supervisord -c "$d/supervisord.conf" > /dev/null 2>&1 &
  echo $!
}

SUPERVISOR_NAMES_hermes="supervise"
SUPERVISOR_NAMES_s6="s6-svscan s6-supervise"
SUPERVISOR_NAMES_runit="runsvdir runsv"
SUPERVISOR_NAMES_supervisord="supervisord python3"

SYSTEMS="hermes s6 runit supervisord"

# ---- 1. memory ----
echo "## Memory of the supervision tree (services excluded), kB"
echo
echo "| system | services | processes | RSS | PSS |"
echo "|---|---:|---:|---:|---:|"
for n in 1 10 100; do
  for sys in $SYSTEMS; do
    root=$("start_$sys" "$n" ""); ROOTPIDS+=("$root")
    wait_for 60 have_sleeps "$root" "$n" || echo "<!-- $sys: only $(count_sleeps "$root") of $n started -->"
    sleep 1
    names=SUPERVISOR_NAMES_$sys
    pids=$(tree_pids_named "$root" ${!names} | sort -u)
    read -r rss pss < <(mem $pids)
    echo "| $sys | $n | $(echo $pids | wc -w) | $rss | $pss |"
    kill_tree "$root"
  done
done
echo

# ---- 2. crash -> replacement ----
echo "## SIGKILL of a healthy service -> replacement started (ms, $REPS runs)"
echo
echo "| system | min | median | max |"
echo "|---|---:|---:|---:|"
for sys in $SYSTEMS; do
  marker=$W/$sys.starts; rm -f "$marker"
  root=$("start_$sys" 1 "$marker"); ROOTPIDS+=("$root")
  wait_for 30 test -s "$marker"
  lat=()
  for r in $(seq 1 "$REPS"); do
    sleep 2   # healthy: longer than every settle/startsecs window
    before=$(wc -l < "$marker")
    victim=$(tree_pids_named "$root" sleep | head -n1)
    [ -n "$victim" ] || { echo "<!-- $sys: no service process -->"; break; }
    t0=$(now_ns); kill -KILL "$victim"
    wait_for 30 lines_gt "$marker" "$before" || { echo "<!-- $sys: no replacement -->"; break; }
    t1=$(tail -n1 "$marker")
    lat+=( $(( (t1 - t0) / 1000 )) )
  done
  kill_tree "$root"
  [ "${#lat[@]}" -gt 0 ] || continue
  sorted=$(printf '%s\n' "${lat[@]}" | sort -n)
  cnt=${#lat[@]}
  fmt() { awk -v u="$1" 'BEGIN{printf "%.1f", u/1000}'; }
  echo "| $sys | $(fmt "$(echo "$sorted" | head -n1)") | $(fmt "$(echo "$sorted" | sed -n "$(( (cnt + 1) / 2 ))p")") | $(fmt "$(echo "$sorted" | tail -n1)") |"
done
echo

# ---- 3. status query ----
echo "## One status query for one service of 10 (client process included)"
echo
for sys in $SYSTEMS; do root=$("start_$sys" 10 ""); ROOTPIDS+=("$root"); wait_for 60 have_sleeps "$root" 10; done
sleep 1
hyperfine --style basic -N --warmup 5 --runs 200 --export-markdown "$W/status.md" \
  -n hermes "$BIN client $W/hermes/run '{\"v\":1,\"op\":\"status\",\"service\":\"svc1\"}'" \
  -n s6 "s6-svstat $W/s6/svc1" \
  -n runit "sv status $W/runit/svc1" \
  -n supervisord "supervisorctl -c $W/sd/supervisord.conf status svc1" > /dev/null
cat "$W/status.md"
echo
echo "Hermes example binary: $(stat -c %s "$BIN") bytes (release, not stripped of symbols beyond the profile)."
