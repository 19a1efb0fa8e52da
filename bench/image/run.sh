#!/usr/bin/env bash
# Container image benchmark: size of the image, boot-to-healthy time, and idle memory of a
# container running three gateways.
#
#   bash bench/image/run.sh                     (as root)
#
# It measures the image scripts/docker-test.sh builds (IMAGE, default hermes:docker-test) in
# the Docker engine that script uses: the running engine, or else a dockerd it starts on the
# suite's data directory (HERMES_DOCKER_ROOT, default /var/lib/hermes-docker-test, where the
# suite's images stay between runs) and stops at the end. It does not build: when the image is
# missing it says how (`scripts/docker-test.sh build-sha` builds the binary, the base image and
# the image, then runs one short scenario).
#
#   1. image size: `docker image inspect -f {{.Size}}` (uncompressed, all layers);
#   2. boot to healthy, median of RUNS (default 5) runs after one warm-up, each on a fresh
#      volume with HERMES_GATEWAY_BOOTSTRAP_STATE=running (first boot: seeding, the default
#      gateway started), timed from just before `docker run -d`:
#        a. until `docker exec C hermes health` (the image's HEALTHCHECK command) first exits 0,
#           polled every 50 ms — the container's real readiness;
#        b. until `docker inspect` first says `healthy`, polled every 50 ms, in separate runs
#           with `--health-interval 100ms`: the image's own interval is 30 s and Docker runs the
#           first check only after one interval, so with the image's settings Docker reports
#           healthy ~30 s after start whatever the boot takes (one run shows it: c.);
#        c. one run with the image's own HEALTHCHECK settings, for the record;
#   3. idle memory: a container (fresh volume) with three gateways running — the default
#      profile's (bootstrap state running) and two created with `hermes profile create` and
#      started with `hermes -p P gateway start` (no model needed: a gateway starts without one
#      and /health answers) — measured 10 s after all three are up: the container's total
#      from `docker stats --no-stream` and its cgroup (memory.current, anon), and per process
#      RSS and PSS from /proc (host pids from `docker top`).
#
# Prints a summary and writes bench/image/results.json. Not part of the test suite; absolute
# numbers depend on the machine and its load. Knobs: IMAGE, RUNS (5), HERMES_DOCKER_ROOT.
set -euo pipefail

IMAGE=${IMAGE:-hermes:docker-test}
RUNS=${RUNS:-5}
ROOT=${HERMES_DOCKER_ROOT:-/var/lib/hermes-docker-test}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
results=$here/results.json
export DOCKER_CLI_HINTS=false
LABEL=hermes-bench-image

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'bench/image: error: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

(( EUID == 0 )) || die "run as root (it may start dockerd, and reads /proc of the container's processes)"
command -v docker >/dev/null || die "no docker CLI: run scripts/docker-test.sh once (it installs Debian's docker.io)"

# --- the engine (the one scripts/docker-test.sh uses) ----------------------------------------
dockerd_pid=
work=$(mktemp -d /tmp/hermes-bench-image.XXXXXX)
cleanup() {
    local rc=$?
    if docker info >/dev/null 2>&1; then
        docker ps -aq --filter "label=$LABEL" | xargs -r docker rm -f >/dev/null 2>&1 || true
        docker volume ls -q --filter "label=$LABEL" | xargs -r docker volume rm -f >/dev/null 2>&1 || true
    fi
    if [[ -n $dockerd_pid ]]; then
        log "stopping the dockerd this run started (pid $dockerd_pid)"
        kill -TERM "$dockerd_pid" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$dockerd_pid" 2>/dev/null || true
        for m in "$ROOT"/exec/netns/*; do [[ -e $m ]] && umount "$m" 2>/dev/null; done
    fi
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! docker info >/dev/null 2>&1; then
    [[ -d $ROOT/data ]] || die "no Docker engine answers and $ROOT has no images: build the image first with \`scripts/docker-test.sh build-sha\`"
    log "no Docker engine answers; starting dockerd on the suite's data ($ROOT)"
    for flags in "" "--bridge=none"; do
        rm -f "$ROOT/docker.sock"
        # Same engine settings as scripts/docker-test.sh (the host's firewall is left alone).
        # shellcheck disable=SC2086
        dockerd --data-root "$ROOT/data" --exec-root "$ROOT/exec" --pidfile "$ROOT/dockerd.pid" \
            -H "unix://$ROOT/docker.sock" --iptables=false --ip6tables=false $flags >"$ROOT/dockerd-bench.log" 2>&1 &
        dockerd_pid=$!
        export DOCKER_HOST=unix://$ROOT/docker.sock
        for _ in $(seq 1 300); do docker info >/dev/null 2>&1 && break; kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.1; done
        docker info >/dev/null 2>&1 && break
        kill -TERM "$dockerd_pid" 2>/dev/null || true
        wait "$dockerd_pid" 2>/dev/null || true
        dockerd_pid=
    done
    [[ -n $dockerd_pid ]] || die "dockerd does not start (see $ROOT/dockerd-bench.log)"
fi
docker image inspect "$IMAGE" >/dev/null 2>&1 \
    || die "no image $IMAGE in this engine: build it with \`scripts/docker-test.sh build-sha\` (or set IMAGE)"

# --- 1. size ---------------------------------------------------------------------------------
size=$(docker image inspect -f '{{.Size}}' "$IMAGE")
revision=$(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.revision"}}' "$IMAGE" 2>/dev/null || true)
healthcheck=$(docker image inspect -f '{{json .Config.Healthcheck}}' "$IMAGE")
log "image $IMAGE ($revision): $(awk -v s="$size" 'BEGIN { printf "%.1f MB", s / 1e6 }') uncompressed; HEALTHCHECK $healthcheck"

# --- 2. boot to healthy -------------------------------------------------------------------------
n=0
start() { # extra docker-run options...  -> prints the container name; $T0 = time before docker run
    n=$((n + 1))
    local name=hermes-bench-image-$$-$n vol
    vol=$(docker volume create --label "$LABEL" "hermes-bench-image-$$-$n")
    T0=$(now)
    docker run -d --name "$name" --label "$LABEL" --network none -v "$vol:/opt/data" \
        -e HERMES_GATEWAY_BOOTSTRAP_STATE=running "$@" "$IMAGE" sleep infinity >/dev/null
    RUN_RETURNED=$(secs "$T0" "$(now)")
    NAME=$name
}
poll() { # seconds-limit command...  -> time from $T0 to the first success
    local limit=$1 t
    shift
    local deadline=$(($(date +%s) + limit))
    while :; do
        if "$@" >/dev/null 2>&1; then t=$(now); secs "$T0" "$t"; return 0; fi
        (($(date +%s) < deadline)) || { echo timeout; return 1; }
        sleep 0.05
    done
}
is_healthy() { [[ $(docker inspect -f '{{.State.Health.Status}}' "$1") == healthy ]]; }

exec_runs=() inspect_runs=() run_returned=()
log "warm-up boot (not counted)"
start && poll 60 docker exec "$NAME" hermes health >/dev/null || die "the warm-up container never became healthy: docker logs $NAME"
docker rm -f "$NAME" >/dev/null
for i in $(seq 1 "$RUNS"); do
    start
    t=$(poll 60 docker exec "$NAME" hermes health) || die "run $i: \`hermes health\` never answered 0 (docker logs $NAME)"
    exec_runs+=("$t")
    run_returned+=("$RUN_RETURNED")
    docker rm -f "$NAME" >/dev/null
    start --health-interval 100ms --health-timeout 10s --health-start-period 30s
    t=$(poll 60 is_healthy "$NAME") || die "run $i: never healthy in docker inspect (docker logs $NAME)"
    inspect_runs+=("$t")
    docker rm -f "$NAME" >/dev/null
    log "run $i: docker run -d returned after ${run_returned[-1]} s, hermes health ok after ${exec_runs[-1]} s; docker inspect healthy (100 ms interval) after $t s"
done
start
default_interval=$(poll 120 is_healthy "$NAME") || die "never healthy with the image's own HEALTHCHECK (docker logs $NAME)"
docker rm -f "$NAME" >/dev/null
log "with the image's own HEALTHCHECK settings: docker inspect healthy after $default_interval s"
exec_median=$(median "${exec_runs[@]}")
inspect_median=$(median "${inspect_runs[@]}")

# --- 3. idle memory with three gateways ----------------------------------------------------------
start
c=$NAME
poll 60 docker exec "$c" hermes health >/dev/null || die "the memory container never became healthy"
for p in alpha beta; do
    docker exec "$c" hermes profile create "$p" --no-alias >/dev/null
    docker exec "$c" hermes -p "$p" gateway start >/dev/null
done
up_all() {
    docker exec "$c" hermes service status --json | python3 -c '
import json, sys
data = json.load(sys.stdin)
items = data.get("services", data) if isinstance(data, dict) else data
want = {"gateway-default", "gateway-alpha", "gateway-beta"}
sys.exit(0 if want <= {s["name"] for s in items if s.get("state") == "up"} else 1)'
}
poll 60 up_all >/dev/null || die "the three gateways did not all come up: docker exec $c hermes service status"
log "three gateways up; idle for 10 s"
sleep 10
stats=$(docker stats --no-stream --format '{{.MemUsage}}' "$c")
cg=$(docker exec "$c" sh -c 'if [ -f /sys/fs/cgroup/memory.current ]; then echo v2 $(cat /sys/fs/cgroup/memory.current) $(grep -E "^(anon|file) " /sys/fs/cgroup/memory.stat | tr "\n" " "); else echo v1 $(cat /sys/fs/cgroup/memory/memory.usage_in_bytes) $(grep -E "^(rss|cache) " /sys/fs/cgroup/memory/memory.stat | tr "\n" " "); fi')
docker top "$c" -o pid,args | tail -n +2 >"$work/top"
procs_json=$(python3 - "$work/top" <<'EOF'
import json, sys
rows = []
for line in open(sys.argv[1]):
    pid, args = line.strip().split(None, 1)
    def field(path, key):
        try:
            for l in open(path):
                if l.startswith(key + ":"):
                    return int(l.split()[1])
        except OSError:
            return None
    rows.append({"pid": int(pid), "args": args, "rss_kib": field(f"/proc/{pid}/status", "VmRSS"),
                 "pss_kib": field(f"/proc/{pid}/smaps_rollup", "Pss")})
print(json.dumps(rows))
EOF
)
docker rm -f "$c" >/dev/null

# --- summary -------------------------------------------------------------------------------------
python3 - "$results" "$IMAGE" "$revision" "$size" "$exec_median" "$inspect_median" "$default_interval" \
    "$stats" "$cg" "$procs_json" "${exec_runs[*]}" "${inspect_runs[*]}" "$healthcheck" "${run_returned[*]}" <<'EOF'
import json, os, platform, statistics, subprocess, sys, time
(path, image, revision, size, exec_median, inspect_median, default_interval, stats, cg, procs,
 exec_runs, inspect_runs, healthcheck, run_returned) = sys.argv[1:]
run_returned = [float(x) for x in run_returned.split()]
run_median = statistics.median(run_returned)
procs = json.loads(procs)
cg = cg.split()
cgroup = {"version": cg[0], "current_bytes": int(cg[1])}
cgroup.update({cg[i]: int(cg[i + 1]) for i in range(2, len(cg) - 1, 2)})
docker = subprocess.run(["docker", "version", "-f", "{{.Server.Version}}"], capture_output=True, text=True).stdout.strip()
result = {
    "date": time.strftime("%Y-%m-%d"),
    "machine": {"cpus": os.cpu_count(), "kernel": platform.release(), "docker": docker,
                "loadavg": open("/proc/loadavg").read().split()[:3]},
    "image": image, "revision": revision, "size_bytes": int(size), "healthcheck": json.loads(healthcheck),
    "boot_to_healthy_s": {
        "docker_run_returned": {"median": run_median, "runs": run_returned},
        "hermes_health_poll_50ms": {"median": float(exec_median), "runs": [float(x) for x in exec_runs.split()]},
        "docker_inspect_interval_100ms": {"median": float(inspect_median), "runs": [float(x) for x in inspect_runs.split()]},
        "docker_inspect_image_healthcheck": float(default_interval),
    },
    "idle_three_gateways": {"docker_stats": stats, "cgroup": cgroup, "processes": procs},
}
with open(path, "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")
mib = lambda b: b / 1048576
print()
print(f"image {image} ({revision or 'no revision label'}), {result['date']}, {os.cpu_count()} CPUs, load {' '.join(result['machine']['loadavg'])}")
print(f"| measure | value |")
print(f"|---|---:|")
print(f"| image size (uncompressed) | {int(size) / 1e6:.1f} MB |")
print(f"| `docker run -d` returns (median) | {run_median:.2f} s |")
print(f"| boot → `hermes health` exits 0 (median of {len(exec_runs.split())}, 50 ms polling) | {float(exec_median):.2f} s |")
print(f"| boot → `docker inspect` healthy, `--health-interval 100ms` (median) | {float(inspect_median):.2f} s |")
print(f"| boot → `docker inspect` healthy, the image's HEALTHCHECK (one run) | {float(default_interval):.1f} s |")
print(f"| idle, three gateways: `docker stats` | {stats} |")
extra = ", ".join(f"{k} {mib(v):.1f} MiB" for k, v in cgroup.items() if k not in ("version", "current_bytes"))
usage = "memory.current" if cgroup["version"] == "v2" else "memory.usage_in_bytes"
print(f"| idle, three gateways: cgroup {cgroup['version']} {usage} | {mib(cgroup['current_bytes']):.1f} MiB ({extra}) |")
print()
print("| process | RSS | PSS |")
print("|---|---:|---:|")
for p in procs:
    rss = f"{p['rss_kib'] / 1024:.1f} MiB" if p["rss_kib"] is not None else "?"
    pss = f"{p['pss_kib'] / 1024:.1f} MiB" if p["pss_kib"] is not None else "?"
    print(f"| `{p['args']}` | {rss} | {pss} |")
tot_rss = sum(p["rss_kib"] or 0 for p in procs) / 1024
tot_pss = sum(p["pss_kib"] or 0 for p in procs) / 1024
print(f"| total | {tot_rss:.1f} MiB | {tot_pss:.1f} MiB |")
print(f"\nraw: {path}")
EOF
