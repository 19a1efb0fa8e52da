#!/usr/bin/env python3
"""Memory per gateway when several run on one machine: N idle gateways of ours and N of the
original (hermes-agent 0.19.0, its API server platform), each from a fresh HERMES_HOME (the
.env and config.yaml of compare.sh), summed over the N processes from
/proc/<pid>/smaps_rollup: RSS, PSS (pages shared between processes divided among them: what
the machine spends) and anonymous memory (heap and stacks, private to each process).

Usage: python3 bench/gateway/pss.py [N]      (default 3; needs the release build of `hermes`
       and the venv that bench/gateway/compare.sh makes: run that once first)
Knobs: BENCH_CACHE (where compare.sh keeps its venv, default ${TMPDIR:-/tmp}/hermes-bench-gateway),
       PY_VERSION (default 0.19.0), SETTLE (seconds after all answer /health, default 5).
Every process is started in its own session and stopped with its group on every path.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CACHE = os.environ.get("BENCH_CACHE", os.path.join(os.environ.get("TMPDIR", "/tmp"), "hermes-bench-gateway"))
PY_VERSION = os.environ.get("PY_VERSION", "0.19.0")
SETTLE = float(os.environ.get("SETTLE", "5"))
KEY = "pss-bench-key-0123456789abcdef"
UPSTREAM = "http://127.0.0.1:9/v1"  # never called: the gateways stay idle


def rollup(pid):
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[-1] == "kB":
                out[parts[0].rstrip(":")] = int(parts[1])
    return out


def measure(name, argv, n, work):
    procs = []
    try:
        for i in range(n):
            root = os.path.join(work, f"{name}-{i}")
            os.makedirs(root)
            port = common.free_port()
            env = common.hermes_home(root, port, KEY, UPSTREAM)
            p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
            procs.append((p, port))
        for p, port in procs:
            deadline = time.time() + 120
            while not common.healthy(port):
                if p.poll() is not None or time.time() > deadline:
                    sys.exit(f"pss: {name} gateway on port {port} did not come up (exit {p.poll()})")
                time.sleep(0.1)
        time.sleep(SETTLE)
        total = {}
        for p, _ in procs:
            for k, v in rollup(p.pid).items():
                total[k] = total.get(k, 0) + v
        return total
    finally:
        for p, _ in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p, _ in procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    ours = os.path.join(REPO, "target", "release", "hermes")
    python = os.path.join(CACHE, f"venv-hermes-agent-{PY_VERSION}-sms", "bin", "hermes")
    for path, hint in ((ours, "cargo build --release -p hermes"), (python, "bash bench/gateway/compare.sh")):
        if not os.access(path, os.X_OK):
            sys.exit(f"pss: no `{path}`; run `{hint}` first")
    with tempfile.TemporaryDirectory(prefix="hermes-pss-") as work:
        res = {
            "ours": measure("ours", [ours, "gateway", "run", "--no-supervise"], n, work),
            "python": measure("python", [python, "gateway", "run", "--no-supervise"], n, work),
        }
    print(f"| {n} idle gateways, summed | ours | original | original / ours | per gateway: ours | original |")
    print("|---|---:|---:|---:|---:|---:|")
    for key in ("Rss", "Pss", "Anonymous"):
        o, py = res["ours"][key], res["python"][key]
        print(f"| {key} | {o / 1024:.1f} MiB | {py / 1024:.1f} MiB | {py / o:.1f}x "
              f"| {o / n / 1024:.1f} MiB | {py / n / 1024:.1f} MiB |")


if __name__ == "__main__":
    main()
