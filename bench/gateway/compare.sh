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
# ${TMPDIR:-/tmp}/hermes-bench-gateway).
set -euo pipefail

PY_VERSION="${PY_VERSION:-0.19.0}"
REQUESTS="${REQUESTS:-200}"
CONCURRENCY="${CONCURRENCY:-8}"
WARMUP="${WARMUP:-8}"
SETTLE="${SETTLE:-10}"
BENCH_CACHE="${BENCH_CACHE:-${TMPDIR:-/tmp}/hermes-bench-gateway}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
results="$here/compare.json"

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
trap 'rm -rf "$work"' EXIT
log "working under $work"

python3 - "$work" "$target_dir" "$venv" "$repo" "$results" "$rs_hermes" "$py_hermes" "$bench_bin" \
    "$PY_VERSION" "$REQUESTS" "$CONCURRENCY" "$WARMUP" "$SETTLE" <<'PY'
"""Start the upstream and each gateway, load them, read /proc, write compare.json."""
import json
import os
import platform
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

(work, target_dir, venv, repo, out_path, rs_hermes, py_hermes, bench_bin, py_pkg, requests,
 concurrency, warmup, settle) = sys.argv[1:]
requests, concurrency, warmup, settle = int(requests), int(concurrency), int(warmup), float(settle)
START_TIMEOUT = 120  # seconds; the Python gateway imports a lot on a busy machine


def log(msg):
    print(f"==> {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children_map():
    kids = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may contain spaces and parentheses: fields start after the last ')'.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    return kids


def tree(pid):
    kids, out, todo = children_map(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def status(pid):
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
    except OSError:
        return None
    return fields


def kib(fields, key):
    try:
        return int(fields.get(key, "0 kB").split()[0])
    except (ValueError, IndexError):
        return 0


def memory(pid):
    """VmRSS and VmHWM summed over the process and its descendants, in KiB."""
    rss = hwm = threads = procs = 0
    names = []
    for p in tree(pid):
        st = status(p)
        if st is None:
            continue
        procs += 1
        rss += kib(st, "VmRSS")
        hwm += kib(st, "VmHWM")
        threads += int(st.get("Threads", "0") or 0)
        names.append(st.get("Name", "?"))
    return {"rss_kib": rss, "hwm_kib": hwm, "processes": procs, "threads": threads,
            "names": sorted(set(names))}


class Sampler(threading.Thread):
    """The largest summed RSS of the tree seen while the load runs (100 ms period)."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.max_kib, self.stop = pid, 0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            self.max_kib = max(self.max_kib, memory(self.pid)["rss_kib"])
            self.stop.wait(0.1)


def health(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return r.status == 200
    except Exception:
        return False


def tail(path, limit=3000):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-limit:]
    except OSError:
        return ""


# --- the upstream ---
up_out = open(os.path.join(work, "upstream.out"), "w+")
upstream = subprocess.Popen([bench_bin, "--serve-upstream"], stdout=up_out, stderr=subprocess.STDOUT)
base_url = None
for _ in range(200):
    up_out.seek(0)
    for line in up_out.read().splitlines():
        if line.startswith("LISTENING "):
            base_url = line.split()[1]
    if base_url:
        break
    time.sleep(0.05)
if not base_url:
    sys.exit("error: the upstream did not start:\n" + tail(up_out.name))
log(f"upstream at {base_url}")


def upstream_seen():
    """Ask the upstream what it has been sent so far (SIGUSR1 -> a `SEEN` line)."""
    up_out.seek(0)
    before = up_out.read().count("SEEN ")
    upstream.send_signal(signal.SIGUSR1)
    for _ in range(100):
        up_out.seek(0)
        lines = [l for l in up_out.read().splitlines() if l.startswith("SEEN ")]
        if len(lines) > before:
            _, chats, size, other = lines[-1].split(" ", 3)
            return {"chat_requests": int(chats), "chat_body_bytes": int(size),
                    "other": json.loads(other)}
        time.sleep(0.05)
    return {"chat_requests": 0, "chat_body_bytes": 0, "other": {}}


def seen_delta(a, b):
    other = {k: v - a["other"].get(k, 0) for k, v in b["other"].items() if v - a["other"].get(k, 0)}
    return {"chat_requests": b["chat_requests"] - a["chat_requests"],
            "chat_body_bytes": b["chat_body_bytes"] - a["chat_body_bytes"], "other": other}


def load(port, key, n, mode):
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    r = subprocess.run([bench_bin, "--load", url, key, str(n), str(concurrency), mode],
                       capture_output=True, text=True, timeout=3600)
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"mode": mode, "ok": 0, "errors": n, "first_error": f"client failed: {r.stderr[-500:]}"}


def run_peer(name, argv):
    home = os.path.join(work, name, "home")
    hermes_home = os.path.join(work, name, "hermes_home")
    os.makedirs(home)
    os.makedirs(hermes_home)
    port, key = free_port(), secrets.token_hex(16)
    # The same settings for both peers; each reads what it knows.
    with open(os.path.join(hermes_home, ".env"), "w") as f:
        f.write(f"API_SERVER_ENABLED=true\nAPI_SERVER_PORT={port}\nAPI_SERVER_KEY={key}\n")
    with open(os.path.join(hermes_home, "config.yaml"), "w") as f:
        f.write("model:\n"
                "  default: bench-model\n"
                "  provider: custom\n"
                f"  base_url: {base_url}\n"
                "  api_key: upstream-key\n"
                # Without it the Python agent asks openrouter.ai for the context window.
                "  context_length: 131072\n"
                "security:\n"
                # Without it the Python gateway downloads the `tirith` scanner at start.
                "  tirith_enabled: false\n")
    env = dict(os.environ, HOME=home, HERMES_HOME=hermes_home)
    log_path = os.path.join(work, name, "gateway.log")
    cmd = argv + ["gateway", "run", "--no-supervise"]
    res = {"command": "HOME=<tmp> HERMES_HOME=<tmp> " + " ".join(cmd)}
    with open(log_path, "w") as log_f:
        proc = subprocess.Popen(cmd, env=env, cwd=os.path.join(work, name), stdout=log_f,
                                stderr=subprocess.STDOUT, start_new_session=True)
    started = time.monotonic()
    while time.monotonic() - started < START_TIMEOUT and proc.poll() is None and not health(port):
        time.sleep(0.1)
    up = proc.poll() is None and health(port)
    res["healthy"] = up
    res["seconds_to_health"] = round(time.monotonic() - started, 2) if up else None
    if proc.poll() is None:
        time.sleep(settle)
        res["idle"] = memory(proc.pid)
    if up:
        res["warmup"] = [load(port, key, warmup, m) for m in ("plain", "stream")]
        before = upstream_seen()
        sampler = Sampler(proc.pid)
        sampler.start()
        t0 = time.monotonic()
        res["plain"] = load(port, key, requests, "plain")
        res["stream"] = load(port, key, requests, "stream")
        res["load_seconds"] = round(time.monotonic() - t0, 2)
        sampler.stop.set()
        sampler.join()
        res["after_load"] = memory(proc.pid)
        res["sampled_max_rss_kib"] = sampler.max_kib
        res["upstream_saw"] = seen_delta(before, upstream_seen())
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            res["killed_after_sigterm_timeout"] = True
    res["exit_code"] = proc.returncode
    res["log_tail"] = tail(log_path)
    return res


rs_version = (subprocess.run([rs_hermes, "--version"], capture_output=True, text=True).stdout.strip()
              .splitlines() or ["unknown"])[0]
peers = {}
for name, argv in (("rust", [rs_hermes]), ("python", [py_hermes])):
    log(f"{name} gateway: start, settle {settle:.0f} s, {warmup} warmup + {requests} plain + "
        f"{requests} streamed requests at concurrency {concurrency}")
    peers[name] = run_peer(name, argv)
upstream.send_signal(signal.SIGTERM)
upstream.wait(timeout=30)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


py_version = subprocess.run([os.path.join(venv, "bin", "python"), "--version"], capture_output=True,
                            text=True).stdout.strip()
commit = subprocess.run(["git", "-C", repo, "rev-parse", "--short=8", "HEAD"], capture_output=True,
                        text=True).stdout.strip() or "unknown"


def metric(peer, path):
    v = peers[peer]
    for k in path:
        if not isinstance(v, dict) or k not in v:
            return None
        v = v[k]
    return v


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
        v = metric(peer, path)
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
    "machine": {
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model(),
        "kernel": platform.release(),
        "arch": platform.machine(),
        "loadavg_after_run": [round(x, 2) for x in os.getloadavg()],
    },
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
text = json.dumps(doc, indent=2) + "\n"
# The file is committed: name machine-specific directories by role, not by where they were
# (log lines may quote a path cut short, hence the venv's parent too).
for path, label in sorted(((work, "$WORK"), (target_dir, "$TARGET"), (venv, "$VENV"),
                           (os.path.dirname(venv), "$BENCH_CACHE"), (repo, "$REPO"),
                           (sys.executable, "python3")),
                          key=lambda p: -len(p[0])):
    text = text.replace(path, label)
with open(out_path, "w") as f:
    f.write(text)


def show(v, unit):
    if v is None:
        return "n/a"
    if unit == "KiB":
        return f"{v / 1024:.1f} MiB"
    if unit == "ms":
        return f"{v:.2f} ms"
    return f"{v:.1f}"


def times(r):
    """A ratio as people read it: 9.53x, 16.1x, 2361x, or 1/1977 when below one."""
    if r is None:
        return "n/a"
    if r < 1:
        return f"1/{1 / r:.0f}" if r > 0 else "0"
    return f"{r:.2f}x" if r < 10 else f"{r:.1f}x" if r < 100 else f"{r:.0f}x"


print(f"{requests} non-streamed + {requests} streamed chat requests per gateway, concurrency "
      f"{concurrency}, after {warmup} + {warmup} untimed warmup requests\n")
print("| metric | rust | python | python / rust |")
print("|---|---:|---:|---:|")
for row in rows:
    ratio = row.get("ratio_python_over_rust")
    print(f"| {row['metric']} | {show(row['rust'], row['unit'])} | {show(row['python'], row['unit'])} | "
          f"{times(ratio)} |")
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
print(f"\nmachine: {os.cpu_count()} CPUs, {cpu_model()}, load {os.getloadavg()[0]:.1f}; rust {rs_version} "
      f"({commit}); python hermes-agent=={py_pkg} on {py_version}")
PY
