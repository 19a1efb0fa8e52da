#!/usr/bin/env bash
# Memory per gateway: our `hermes gateway run` against the original Python gateway
# (`hermes-agent` from PyPI, its OpenAI-compatible API server platform), both in front of
# the SAME local upstream and driven by the SAME client, in one run.
#
# What it does (every step is idempotent, so the script can simply be run again):
#   1. creates (or reuses) a venv with `hermes-agent[sms]==$PY_VERSION` outside the
#      repository (the API server platform needs aiohttp, which the base package does not
#      install; `sms` is the smallest extra that adds it and nothing else);
#   2. builds `cargo build --release -p hermes` and the `gateway_bench` example, whose
#      `--serve-upstream` mode is the upstream and whose `--load` mode is the client;
#   3. starts one upstream, then each gateway in turn from a fresh temporary HOME and
#      HERMES_HOME holding the same `.env` (`API_SERVER_ENABLED`, `API_SERVER_PORT`,
#      `API_SERVER_KEY`) and the same `config.yaml` (`model: {default, provider, base_url,
#      api_key, context_length}`, `security.tirith_enabled: false`);
#   4. per gateway: waits for `GET /health`, lets it settle, reads RSS (idle), sends
#      $WARMUP untimed requests, then $REQUESTS non-streamed and $REQUESTS streamed chat
#      requests at $CONCURRENCY, sampling the process tree's RSS every 100 ms, then reads
#      RSS (after load) and VmHWM (peak) and stops it with SIGTERM. Memory is summed over
#      the gateway process and every descendant it has at that moment;
#   5. writes `bench/gateway/compare.json` (machine, peers, per-peer results, what each
#      gateway sent upstream, log tails) and prints a markdown table with ratios.
#
# A gateway that does not come up is reported with its command, exit status and log tail
# (and its idle RSS if the process is alive); it is never given a number it did not earn.
# Not part of the test suite: CI never runs it. Usage: `bash bench/gateway/compare.sh`.
# Knobs (environment): PY_VERSION (default 0.19.0), REQUESTS (per mode, default 200),
# CONCURRENCY (default 8), WARMUP (default 8 per mode), SETTLE (seconds before the idle
# reading, default 10), BENCH_CACHE (where the venv lives, default
# ${TMPDIR:-/tmp}/hermes-bench-gateway), OUT (default bench/gateway/compare.json).
set -euo pipefail

PY_VERSION="${PY_VERSION:-0.19.0}"
REQUESTS="${REQUESTS:-200}"
CONCURRENCY="${CONCURRENCY:-8}"
WARMUP="${WARMUP:-8}"
SETTLE="${SETTLE:-10}"
BENCH_CACHE="${BENCH_CACHE:-${TMPDIR:-/tmp}/hermes-bench-gateway}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
results="${OUT:-$here/compare.json}"

. "$here/../lib.sh"

command -v python3 >/dev/null 2>&1 || die "\`python3\` is required (for the venv and the harness)"
command -v cargo >/dev/null 2>&1 || die "\`cargo\` is required to build the Rust peer"

# --- 1. the Python peer -----------------------------------------------------------------
venv="$BENCH_CACHE/venv-hermes-agent-$PY_VERSION-sms"
py_hermes="$(hermes_agent_venv "$venv" "hermes-agent[sms]==$PY_VERSION" "$PY_VERSION" aiohttp)"

# --- 2. the Rust peer, the upstream and the client --------------------------------------
log "building the release binary and the gateway_bench example"
(cd "$repo" && cargo build --release --quiet -p hermes && cargo build --release --quiet -p hermes-gateway --example gateway_bench)
target_dir="$(cargo_target_dir "$repo")"
rs_hermes="$target_dir/release/hermes"
bench_bin="$target_dir/release/examples/gateway_bench"
[ -x "$rs_hermes" ] || die "no release binary at \`$rs_hermes\`"
[ -x "$bench_bin" ] || die "no gateway_bench example at \`$bench_bin\`"

# --- 3-5. the harness -------------------------------------------------------------------
work="$(mktemp -d "${TMPDIR:-/tmp}/hermes-bench-gateway-run.XXXXXX")"
# The harness stops what it starts; the trap catches what it could not (it was killed).
export BENCH_PGIDS="$work/pgids"
trap 'kill_recorded_groups "$BENCH_PGIDS"; rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
log "working under $work"

python3 - "$here" "$work" "$target_dir" "$venv" "$repo" "$results" "$rs_hermes" "$py_hermes" \
    "$bench_bin" "$PY_VERSION" "$REQUESTS" "$CONCURRENCY" "$WARMUP" "$SETTLE" <<'PY'
"""Start the upstream and each gateway, load them, read /proc, write compare.json."""
import json
import os
import secrets
import subprocess
import sys
import time

# No __pycache__ left in the checkout by importing the shared helpers.
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
import common  # noqa: E402  (bench/gateway/common.py, shared with latency.sh)
from common import log, memory, seen_delta  # noqa: E402

(work, target_dir, venv, repo, out_path, rs_hermes, py_hermes, bench_bin, py_pkg, requests,
 concurrency, warmup, settle) = sys.argv[2:]
requests, concurrency, warmup, settle = int(requests), int(concurrency), int(warmup), float(settle)

upstream = common.Upstream(bench_bin, work)
base_url = upstream.base_url
log(f"upstream at {base_url}")


def load(port, key, n, mode):
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    _, stdout, stderr = common.run_recorded(
        [bench_bin, "--load", url, key, str(n), str(concurrency), mode], 3600)
    try:
        return json.loads(stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"mode": mode, "ok": 0, "errors": n, "first_error": f"client failed: {stderr[-500:]}"}


def run_peer(name, argv):
    root = os.path.join(work, name)
    os.makedirs(root)
    port, key = common.free_port(), secrets.token_hex(16)
    # The same settings for both peers; each reads what it knows.
    env = common.hermes_home(root, port, key, base_url)
    cmd = argv + ["gateway", "run", "--no-supervise"]
    res = {"command": "HOME=<tmp> HERMES_HOME=<tmp> " + " ".join(cmd)}
    peer = common.Peer(name, cmd, env, root, port)
    try:
        res["seconds_to_health"] = peer.wait_healthy()
        up = res["healthy"] = res["seconds_to_health"] is not None
        if peer.alive():
            time.sleep(settle)
            res["idle"] = memory(peer.proc.pid)
        if up:
            res["warmup"] = [load(port, key, warmup, m) for m in ("plain", "stream")]
            before = upstream.seen()
            sampler = common.Sampler(peer.proc.pid)
            sampler.start()
            t0 = time.monotonic()
            res["plain"] = load(port, key, requests, "plain")
            res["stream"] = load(port, key, requests, "stream")
            res["load_seconds"] = round(time.monotonic() - t0, 2)
            sampler.stop.set()
            sampler.join()
            res["after_load"] = memory(peer.proc.pid)
            res["sampled_max_rss_kib"] = sampler.max_kib
            res["upstream_saw"] = seen_delta(before, upstream.seen())
    finally:
        peer.stop()
    if peer.killed:
        res["killed_after_sigterm_timeout"] = True
    res["exit_code"] = peer.exit_code
    res["log_tail"] = common.tail(peer.log_path)
    return res


rs_version = common.first_line([rs_hermes, "--version"])
peers = {}
try:
    for name, argv in (("rust", [rs_hermes]), ("python", [py_hermes])):
        log(f"{name} gateway: start, settle {settle:.0f} s, {warmup} warmup + {requests} plain + "
            f"{requests} streamed requests at concurrency {concurrency}")
        peers[name] = run_peer(name, argv)
finally:
    upstream.stop()


py_version = subprocess.run([os.path.join(venv, "bin", "python"), "--version"], capture_output=True,
                            text=True).stdout.strip()
commit = common.git_commit(repo)


def trusted(peer, mode):
    """A latency counts only when every request of the run was answered with the echo."""
    r = peers[peer].get(mode)
    return r is not None and r.get("errors") == 0 and r.get("ok") == requests


rows = []
for label, path, unit in (
    ("RSS idle (after start + settle)", ("idle", "rss_kib"), "KiB"),
    ("RSS after load", ("after_load", "rss_kib"), "KiB"),
    ("peak RSS (VmHWM, summed)", ("after_load", "hwm_kib"), "KiB"),
    ("peak RSS (sampled sum, 100 ms)", ("sampled_max_rss_kib",), "KiB"),
    ("p50 non-streamed", ("plain", "p50_ms"), "ms"),
    ("p50 streamed", ("stream", "p50_ms"), "ms"),
    ("p99 non-streamed", ("plain", "p99_ms"), "ms"),
    ("p99 streamed", ("stream", "p99_ms"), "ms"),
    ("requests/s non-streamed", ("plain", "rps"), "req/s"),
    ("requests/s streamed", ("stream", "rps"), "req/s"),
):
    row = {"metric": label, "unit": unit}
    for peer in ("rust", "python"):
        v = common.dig(peers[peer], path)
        if unit != "KiB" and not trusted(peer, path[0]):
            v = None
        row[peer] = v
    if row["rust"] and row["python"] is not None:
        row["ratio_python_over_rust"] = float(f"{row['python'] / row['rust']:.4g}")
    rows.append(row)

doc = {
    "benchmark": "gateway-memory-vs-python",
    "command": "bash bench/gateway/compare.sh",
    "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "machine": common.machine(),
    "settings": {"requests_per_mode": requests, "concurrency": concurrency,
                 "warmup_per_mode": warmup, "settle_seconds": settle},
    "peers": {
        "rust": {"binary": "hermes (cargo build --release -p hermes)", "version": rs_version,
                 "commit": commit},
        "python": {"package": f"hermes-agent[sms]=={py_pkg}", "interpreter": py_version},
    },
    "summary": rows,
    "results": peers,
}
# The file is committed: name machine-specific directories by role, not by where they were
# (log lines may quote a path cut short, hence the venv's parent too).
common.write_scrubbed(doc, out_path, {work: "$WORK", target_dir: "$TARGET", venv: "$VENV",
                                      os.path.dirname(venv): "$BENCH_CACHE", repo: "$REPO",
                                      sys.executable: "python3"})


def show(v, unit):
    if v is None:
        return "n/a"
    if unit == "KiB":
        return f"{v / 1024:.1f} MiB"
    if unit == "ms":
        return f"{v:.2f} ms"
    return f"{v:.1f}"


print(f"{requests} non-streamed + {requests} streamed chat requests per gateway, concurrency "
      f"{concurrency}, after {warmup} + {warmup} untimed warmup requests\n")
print("| metric | rust | python | python / rust |")
print("|---|---:|---:|---:|")
for row in rows:
    ratio = row.get("ratio_python_over_rust")
    print(f"| {row['metric']} | {show(row['rust'], row['unit'])} | {show(row['python'], row['unit'])} | "
          f"{common.times(ratio)} |")
print()
for peer in ("rust", "python"):
    r = peers[peer]
    saw = r.get("upstream_saw", {})
    n = 2 * requests
    per = f"{saw.get('chat_requests', 0) / n:.2f}" if saw else "n/a"
    size = f"{saw.get('chat_body_bytes', 0) / max(saw.get('chat_requests', 0), 1) / 1024:.1f} KiB" if saw else "n/a"
    other = sum(saw.get("other", {}).values()) if saw else 0
    procs = r.get("after_load", r.get("idle", {})).get("processes", "n/a")
    print(f"{peer}: healthy={r['healthy']} after {r['seconds_to_health']} s, processes {procs}, "
          f"upstream chat calls per request {per} (mean body {size}), other upstream requests "
          f"{other}, exit code after SIGTERM {r['exit_code']}")
    for mode in ("plain", "stream"):
        m = r.get(mode)
        if m and m.get("errors"):
            print(f"  {mode}: {m['errors']} of {requests} failed, first: {m['first_error']}")
    if not r["healthy"]:
        print(f"  did not serve: {r['command']}\n{r['log_tail'][-1500:]}")
print(f"\nmachine: {os.cpu_count()} CPUs, {common.cpu_model()}, load {os.getloadavg()[0]:.1f}; rust {rs_version} "
      f"({commit}); python hermes-agent=={py_pkg} on {py_version}")
PY
