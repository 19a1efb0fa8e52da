#!/usr/bin/env python3
"""Memory of N profiles: one native gateway multiplexing them all (GATEWAY_MULTIPLEX_PROFILES=1,
the named ones at /p/<name>/v1) against N native gateways (`hermes [-p NAME] gateway run`, one
per profile), side by side in one run, interleaved, in front of ONE stub upstream
(`gateway_bench --serve-upstream`).

Each layout gets a fresh volume holding the same N profiles (the default one and N-1 named,
each with its own key and model). Per layout: wait until every profile answers its /health,
settle, read idle memory; send each profile the same chat requests (plain then streamed),
read memory again. Memory is summed over the layout's processes from /proc/<pid>/smaps_rollup:
RSS, PSS (shared pages divided among the processes that map them: what the machine spends) and
anonymous (heap and stacks); peak is the sum of VmHWM.

Usage: python3 bench/gateway/multiplex.py  (after `cargo build --release -p hermes` and
       `cargo build --release -p hermes-gateway --example gateway_bench`; bench/gateway/multiplex.sh
       does both and runs this)
Knobs: PROFILES (N, default 3), REPEATS (default 3), REQUESTS (per profile and mode, default 50),
       CONCURRENCY (default 4), SETTLE (seconds, default 3), OUT (default bench/gateway/multiplex.json).
"""
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from pss import rollup  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
N = int(os.environ.get("PROFILES", "3"))
REPEATS = int(os.environ.get("REPEATS", "3"))
REQUESTS = int(os.environ.get("REQUESTS", "50"))
CONCURRENCY = int(os.environ.get("CONCURRENCY", "4"))
SETTLE = float(os.environ.get("SETTLE", "3"))
OUT = os.environ.get("OUT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "multiplex.json"))
TARGET = os.environ.get("BENCH_TARGET", os.path.join(REPO, "target"))
HERMES = os.path.join(TARGET, "release", "hermes")
BENCH_BIN = os.path.join(TARGET, "release", "examples", "gateway_bench")
NAMES = ["default"] + [f"p{i}" for i in range(1, N)]


def volume(root, base_url):
    """A volume with the N profiles; returns {name: (dir, key, port)}."""
    hh = os.path.join(root, "hermes_home")
    out = {}
    for name in NAMES:
        d = hh if name == "default" else os.path.join(hh, "profiles", name)
        os.makedirs(d, exist_ok=True)
        key, port = f"bench-key-of-{name}-0123456789", common.free_port()
        with open(os.path.join(d, ".env"), "w") as f:
            f.write(f"API_SERVER_PORT={port}\nAPI_SERVER_KEY={key}\n")
        with open(os.path.join(d, "config.yaml"), "w") as f:
            f.write(f"model:\n  default: model-{name}\n  provider: custom\n  base_url: {base_url}\n"
                    "  api_key: upstream-key\n")
        with open(os.path.join(d, "SOUL.md"), "w") as f:
            f.write(f"You are the {name} profile.\n")
        out[name] = (d, key, port)
    home = os.path.join(root, "home")
    os.makedirs(home)
    return hh, home, out


def start(layout, root, base_url):
    """Starts the layout; returns (procs, {name: base URL of its API})."""
    hh, home, profiles = volume(root, base_url)
    env = dict(os.environ, HOME=home, HERMES_HOME=hh, HERMES_GATEWAY_NO_SUPERVISE="1",
               RUST_LOG="warn")
    env.pop("GATEWAY_MULTIPLEX_PROFILES", None)
    procs, urls = [], {}
    log = open(os.path.join(root, "gateways.log"), "w")
    if layout == "multiplexed":
        port = profiles["default"][2]
        procs.append(common.spawn([HERMES, "gateway", "run", "--no-supervise"], stdout=log, stderr=log,
                                  env=dict(env, GATEWAY_MULTIPLEX_PROFILES="1")))
        for name in NAMES:
            prefix = "" if name == "default" else f"/p/{name}"
            urls[name] = f"http://127.0.0.1:{port}{prefix}"
    else:
        for name in NAMES:
            argv = [HERMES] + ([] if name == "default" else ["-p", name]) + ["gateway", "run", "--no-supervise"]
            procs.append(common.spawn(argv, stdout=log, stderr=log, env=env))
            urls[name] = f"http://127.0.0.1:{profiles[name][2]}"
    deadline = time.time() + common.START_TIMEOUT
    for name, url in urls.items():
        port = profiles["default"][2] if layout == "multiplexed" else profiles[name][2]
        path = ("" if layout == "separate" or name == "default" else f"/p/{name}") + "/health"
        while not common.healthy(port, path):
            if time.time() > deadline or any(p.poll() is not None for p in procs):
                sys.exit(f"multiplex: {layout}: profile {name} did not come up; log:\n{common.tail(log.name)}")
            time.sleep(0.1)
    return procs, urls, {n: k for n, (_, k, _) in profiles.items()}


def summed(procs):
    total = {}
    for p in procs:
        for k, v in rollup(p.pid).items():
            total[k] = total.get(k, 0) + v
        total["VmHWM"] = total.get("VmHWM", 0) + common.kib(common.status(p.pid) or {}, "VmHWM")
    return {k: total.get(k, 0) for k in ("Rss", "Pss", "Anonymous", "VmHWM")}


def load(url, key, mode):
    _, stdout, stderr = common.run_recorded(
        [BENCH_BIN, "--load", f"{url}/v1/chat/completions", key, str(REQUESTS), str(CONCURRENCY), mode], 600)
    try:
        res = json.loads(stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        sys.exit(f"multiplex: the client failed: {stderr[-500:]}")
    if res.get("errors"):
        sys.exit(f"multiplex: {url}: {res['errors']} errors, first: {res.get('first_error')}")
    return res


def run_layout(layout, work, base_url, i):
    root = os.path.join(work, f"{layout}-{i}")
    os.makedirs(root)
    procs, urls, keys = start(layout, root, base_url)
    try:
        time.sleep(SETTLE)
        idle = summed(procs)
        for name in NAMES:
            for mode in ("plain", "stream"):
                load(urls[name], keys[name], mode)
        time.sleep(1)
        loaded = summed(procs)
        return {"processes": len(procs), "idle": idle, "after_load": loaded}
    finally:
        for p in procs:
            common.stop_group(p, timeout=40)


def main():
    for path, hint in ((HERMES, "cargo build --release -p hermes"),
                       (BENCH_BIN, "cargo build --release -p hermes-gateway --example gateway_bench")):
        if not os.access(path, os.X_OK):
            sys.exit(f"multiplex: no `{path}`; run `{hint}` first")
    with tempfile.TemporaryDirectory(prefix="hermes-multiplex-") as work:
        up = common.Upstream(BENCH_BIN, work)
        try:
            runs = {"separate": [], "multiplexed": []}
            for i in range(REPEATS):
                for layout in ("separate", "multiplexed"):
                    runs[layout].append(run_layout(layout, work, up.base_url, i))
                    common.log(f"{layout} #{i + 1}: {runs[layout][-1]}")
        finally:
            up.stop()
    med = {layout: {phase: {k: statistics.median(r[phase][k] for r in rs) for k in ("Rss", "Pss", "Anonymous", "VmHWM")}
                    for phase in ("idle", "after_load")} for layout, rs in runs.items()}
    doc = {"profiles": N, "repeats": REPEATS, "requests_per_profile_and_mode": REQUESTS,
           "concurrency": CONCURRENCY, "machine": common.machine(), "commit": common.git_commit(REPO),
           "runs": runs, "medians_kib": med}
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(f"| {N} profiles, summed over the processes (median of {REPEATS}) | {N} gateways | 1 multiplexing | {N} gateways / 1 |")
    print("|---|---:|---:|---:|")
    for phase, label in (("idle", "idle"), ("after_load", "after load")):
        for k, name in (("Rss", "RSS"), ("Pss", "PSS"), ("Anonymous", "anonymous")):
            s, m = med["separate"][phase][k], med["multiplexed"][phase][k]
            print(f"| {name}, {label} | {s / 1024:.1f} MiB | {m / 1024:.1f} MiB | **{s / m:.1f}x** |")
    s, m = med["separate"]["after_load"]["VmHWM"], med["multiplexed"]["after_load"]["VmHWM"]
    print(f"| peak RSS (VmHWM, summed) | {s / 1024:.1f} MiB | {m / 1024:.1f} MiB | **{s / m:.1f}x** |")


if __name__ == "__main__":
    main()
