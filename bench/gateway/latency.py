"""The harness of `latency.sh`: one stub upstream paced like a provider, our gateway,
LiteLLM's proxy and the original Python gateway in front of it, the same client for every
path; writes `latency.json` and prints the tables. Run it through `latency.sh`, which
prepares the venvs and the builds and exports the settings."""

import json
import os
import re
import resource
import secrets
import signal
import statistics
import subprocess
import sys
import time

# No __pycache__ left in the checkout by importing the shared helpers.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import log  # noqa: E402


def settings(env):
    """The knobs and paths `latency.sh` exports (its header documents each knob)."""
    f = lambda k: float(env[k])  # noqa: E731
    i = lambda k: int(env[k])  # noqa: E731
    return {
        "work": env["BENCH_WORK"], "repo": env["BENCH_REPO"], "target_dir": env["BENCH_TARGET"],
        "cache": env["BENCH_CACHE"], "out": env["OUT"], "bench_bin": env["BENCH_BIN"],
        "rust_hermes": env["RUST_HERMES"], "python_hermes": env["PYTHON_HERMES"],
        "litellm": env["LITELLM_BIN"], "python": env["SKIP_PYTHON"] != "1",
        "python_requirement": env["PYTHON_REQUIREMENT"],
        "litellm_requirement": env["LITELLM_REQUIREMENT"],
        "first_ms": f("FIRST_MS"), "gap_ms": f("GAP_MS"),
        "concurrencies": [int(c) for c in env["CONCURRENCIES"].split()],
        "repeats": i("REPEATS"), "seconds": f("SECONDS_PER_RUN"), "warmup": f("WARMUP"),
        "grace": f("GRACE"), "settle": f("SETTLE"), "pause": f("PAUSE"),
        "py_seconds": f("PY_SECONDS"), "py_grace": f("PY_GRACE"),
        "py_max_requests": i("PY_MAX_REQUESTS"), "py_warmup": i("PY_WARMUP"),
    }


cfg = settings(os.environ)
WORK, BENCH_BIN = cfg["work"], cfg["bench_bin"]
PEERS = ("rust", "litellm", "python")


def children_cpu():
    """CPU of the harness's waited-for children: the clients (the peers are still running)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(url, key, concurrency, bounds, gateway_pid=None):
    """One `gateway_bench --timed` run, with the CPU the gateway, the client and the whole
    machine used meanwhile. `bounds` holds warmup, run and grace seconds and max requests."""
    argv = [BENCH_BIN, "--timed", url, key, "stream", str(concurrency), str(bounds["warmup"]),
            str(bounds["run"]), str(bounds["grace"]), str(bounds["max_requests"])]
    limit = bounds["warmup"] + bounds["run"] + 2 * bounds["grace"] + 60
    gw0 = common.cpu_seconds(gateway_pid) if gateway_pid else None
    load_before = round(os.getloadavg()[0], 2)
    cl0, (busy0, total0) = children_cpu(), common.machine_busy()
    try:
        _, stdout, stderr = common.run_recorded(argv, limit)
        out = json.loads(stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        out = {"ok": 0, "errors": 0, "first_error": f"client still running after {limit} s"}
    except (IndexError, json.JSONDecodeError):
        out = {"ok": 0, "errors": 0, "first_error": f"client failed: {stderr[-500:]}"}
    busy1, total1 = common.machine_busy()
    answered = out.get("ok", 0) + out.get("warmup", {}).get("ok", 0)
    out["loadavg_1m_before"] = load_before
    out["client_cpu_s"] = round(children_cpu() - cl0, 3)
    out["machine_busy_share"] = round((busy1 - busy0) / max(total1 - total0, 1), 3)
    if gateway_pid:
        used = common.cpu_seconds(gateway_pid) - gw0
        out["gateway_cpu_s"] = round(used, 3)
        out["gateway_cpu_ms_per_answer"] = round(1000 * used / answered, 3) if answered else None
    return out


def log_size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def logged_added(path, offset):
    """The gateway's own view of what it added (`added_ms=` of its access lines written
    since `offset`: head received to first byte sent, minus the upstream's first byte)."""
    with open(path, errors="replace") as f:
        f.seek(offset)
        values = sorted(float(m) for m in re.findall(r" added_ms=([0-9.]+)", f.read()))
    if not values:
        return None
    at = lambda q: values[min(len(values) - 1, round((len(values) - 1) * q))]  # noqa: E731
    return {"lines": len(values), "p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": values[-1]}


def litellm_config(root, base_url, master_key):
    """The minimal offline LiteLLM proxy: one model entry for the stub as an OpenAI-compatible
    provider, a master key, no database, no UI."""
    path = os.path.join(root, "config.yaml")
    with open(path, "w") as f:
        f.write("model_list:\n"
                # The alias the client asks every peer for, so all get the same request.
                "  - model_name: hermes-agent\n"
                "    litellm_params:\n"
                "      model: openai/bench-model\n"
                f"      api_base: {base_url}\n"
                "      api_key: upstream-key\n"
                "general_settings:\n"
                f"  master_key: {master_key}\n"
                "litellm_settings:\n"
                "  telemetry: false\n")
    return path


def start_peer(name, base_url):
    """Starts one gateway from a fresh directory; returns (Peer, key, result dict)."""
    root = os.path.join(WORK, name)
    os.makedirs(root)
    port = common.free_port()
    if name == "litellm":
        key = "sk-" + secrets.token_hex(16)
        conf = litellm_config(root, base_url, key)
        home = os.path.join(root, "home")
        os.makedirs(home)
        env = dict(os.environ, HOME=home,
                   # Offline: the bundled model cost map instead of fetching it at start.
                   LITELLM_LOCAL_MODEL_COST_MAP="True",
                   DISABLE_ADMIN_UI="True")
        env.pop("DATABASE_URL", None)
        cmd = [cfg["litellm"], "--config", conf, "--host", "127.0.0.1", "--port", str(port),
               "--num_workers", "1"]
        health = "/health/liveliness"
    else:
        key = secrets.token_hex(16)
        # The Python gateway answers 429 beyond 10 concurrent agent runs unless told
        # otherwise (0 lifts the cap); ours has no such cap and ignores the key.
        env = common.hermes_home(root, port, key, base_url,
                                 "gateway:\n  api_server:\n    max_concurrent_runs: 0\n")
        cmd = [cfg[f"{name}_hermes"], "gateway", "run", "--no-supervise"]
        health = "/health"
    peer = common.Peer(name, cmd, env, root, port, health)
    res = {"command": " ".join(cmd), "port": port}
    res["seconds_to_health"] = peer.wait_healthy()
    res["healthy"] = res["seconds_to_health"] is not None
    if peer.alive():
        c0 = common.cpu_seconds(peer.proc.pid)
        time.sleep(cfg["settle"])
        res["idle"] = common.memory(peer.proc.pid)
        res["idle_cpu_s_during_settle"] = round(common.cpu_seconds(peer.proc.pid) - c0, 3)
    return peer, key, res


def finish_peer(peer, res, sampler=None):
    """Memory after load, then SIGTERM (SIGKILL after 60 s), exit status and log tail."""
    if sampler:
        sampler.stop.set()
        sampler.join()
        res["sampled_max_rss_kib"] = sampler.max_kib
    if peer.alive():
        res["after_load"] = common.memory(peer.proc.pid)
    peer.stop()
    res["exit_code"] = peer.exit_code
    res["killed_after_sigterm_timeout"] = peer.killed
    res["log_head"] = common.head(peer.log_path, 2000)
    res["log_tail"] = common.tail(peer.log_path, 2000)


def fast_bounds():
    return {"warmup": cfg["warmup"], "run": cfg["seconds"], "grace": cfg["grace"],
            "max_requests": 10**9}


def python_bounds(concurrency):
    return {"warmup": 0, "run": cfg["py_seconds"], "grace": cfg["py_grace"],
            "max_requests": max(cfg["py_max_requests"], concurrency)}


def run_fast_paths(up, started):
    """Direct, rust and litellm interleaved: every repeat runs each concurrency on every
    path back to back, so all three see the same machine state."""
    runs = []
    for rep in range(cfg["repeats"]):
        for c in cfg["concurrencies"]:
            for path in ("direct", "rust", "litellm"):
                if path == "direct":
                    url, key, pid = f"{up.base_url}/chat/completions", "none", None
                else:
                    peer, key, res = started[path]
                    if not res["healthy"]:
                        continue
                    url, pid = f"http://127.0.0.1:{peer.port}/v1/chat/completions", peer.proc.pid
                log(f"repeat {rep + 1}/{cfg['repeats']}: {path} at {c} streams")
                offset = log_size(peer.log_path) if path == "rust" else 0
                out = timed(url, key, c, fast_bounds(), pid)
                if path == "rust":
                    out["gateway_logged_added"] = logged_added(peer.log_path, offset)
                runs.append({"path": path, "concurrency": c, "repeat": rep + 1, **out})
                time.sleep(cfg["pause"])
    return runs


def run_python(up):
    """The original gateway, alone (its agent turns would load the others' runs), once per
    concurrency, bounded by time and request count."""
    peer, key, res = start_peer("python", up.base_url)
    runs = []
    try:
        if res["healthy"]:
            url = f"http://127.0.0.1:{peer.port}/v1/chat/completions"
            # Untimed: the first turns import and build what later ones reuse.
            _, warm, _ = common.run_recorded([BENCH_BIN, "--load", url, key, str(cfg["py_warmup"]),
                                              "2", "stream"], 600)
            res["warmup"] = (warm.strip().splitlines() or [""])[-1]
            before = up.seen()
            sampler = common.Sampler(peer.proc.pid)
            sampler.start()
            for c in cfg["concurrencies"]:
                log(f"python at {c} streams (at most {cfg['py_seconds']} s + "
                    f"{cfg['py_grace']} s grace, {python_bounds(c)['max_requests']} requests)")
                out = timed(url, key, c, python_bounds(c), peer.proc.pid)
                runs.append({"path": "python", "concurrency": c, "repeat": 1, **out})
            res["upstream_saw"] = common.seen_delta(before, up.seen())
            finish_peer(peer, res, sampler)
    finally:
        peer.stop()
    if "exit_code" not in res:
        finish_peer(peer, res)
    return res, runs


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def trusted(run):
    """A run's latency counts only when every request it started was answered with the echo."""
    return run.get("ok", 0) > 0 and run.get("errors") == 0 and run.get("abandoned") == 0


def summarize(runs):
    """Per path and concurrency: medians over repeats of p50 / p99, and the added latency,
    `median over repeats of (pX through the gateway - pX direct in the same repeat)`; for a
    path run once (python), against the median of the direct runs."""
    rows = []
    for c in cfg["concurrencies"]:
        direct = {r["repeat"]: r for r in runs if r["path"] == "direct" and r["concurrency"] == c}
        for path in ("direct", *PEERS):
            mine = [r for r in runs if r["path"] == path and r["concurrency"] == c]
            if not mine:
                continue
            good = [r for r in mine if trusted(r)]
            row = {"path": path, "concurrency": c, "runs": len(mine), "trusted_runs": len(good),
                   "answered": sum(r.get("ok", 0) for r in mine),
                   "errors": sum(r.get("errors", 0) for r in mine),
                   "abandoned": sum(r.get("abandoned", 0) for r in mine),
                   "first_error": next((r["first_error"] for r in mine if r.get("first_error")), None),
                   "rps": median([r.get("rps") for r in good]),
                   "gateway_cpu_ms_per_answer": median([r.get("gateway_cpu_ms_per_answer") for r in good]),
                   "machine_busy_share": median([r.get("machine_busy_share") for r in good])}
            if path == "rust":
                for q in ("p50", "p99"):
                    row[f"gateway_logged_added_{q}_ms"] = median(
                        [common.dig(r, ("gateway_logged_added", f"{q}_ms")) for r in good])
            for q in ("p50", "p99"):
                row[f"{q}_ms"] = median([r["latency"][f"{q}_ms"] for r in good])
                row[f"first_byte_{q}_ms"] = median([r["first_byte"][f"{q}_ms"] for r in good])
                if path == "direct":
                    continue
                added = []
                for r in good:
                    base = direct.get(r["repeat"]) if path != "python" else None
                    if base is not None and trusted(base):
                        added.append(r["latency"][f"{q}_ms"] - base["latency"][f"{q}_ms"])
                    elif path == "python":
                        d = median([d["latency"][f"{q}_ms"] for d in direct.values() if trusted(d)])
                        if d is not None:
                            added.append(r["latency"][f"{q}_ms"] - d)
                row[f"added_{q}_ms"] = round(median(added), 2) if added else None
            rows.append(row)
    return rows


MEMORY_ROWS = (("RSS idle (after start + settle)", ("idle", "rss_kib")),
               ("RSS after load", ("after_load", "rss_kib")),
               ("peak RSS (VmHWM, summed)", ("after_load", "hwm_kib")),
               ("peak RSS (sampled sum, 100 ms)", ("sampled_max_rss_kib",)))


def memory_rows(peers):
    rows = []
    for label, path in MEMORY_ROWS:
        row = {"metric": label}
        for name in PEERS:
            row[name] = common.dig(peers.get(name, {}), path)
        for name in ("litellm", "python"):
            if row["rust"] and row[name] is not None:
                row[f"{name}_over_rust"] = float(f"{row[name] / row['rust']:.4g}")
        rows.append(row)
    return rows


def show_ms(v):
    return "n/a" if v is None else f"{v:.2f} ms" if abs(v) < 100 else f"{v:.0f} ms"


def print_tables(latency_rows, mem_rows, peers):
    print(f"stub: first chunk after {cfg['first_ms']} ms, then one every {cfg['gap_ms']} ms; "
          f"{cfg['repeats']} repeats of {cfg['seconds']} s per path and concurrency "
          f"(python: once, <= {cfg['py_seconds']} s)\n")
    print("| streams | path | answered | errors / abandoned | p50 | p99 | added p50 | added p99 "
          "| gateway CPU / answer |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in latency_rows:
        cpu = r.get("gateway_cpu_ms_per_answer")
        print(f"| {r['concurrency']} | {r['path']} | {r['answered']} | {r['errors']} / "
              f"{r['abandoned']} | {show_ms(r['p50_ms'])} | {show_ms(r['p99_ms'])} | "
              f"{show_ms(r.get('added_p50_ms')) if r['path'] != 'direct' else ''} | "
              f"{show_ms(r.get('added_p99_ms')) if r['path'] != 'direct' else ''} | "
              f"{'' if cpu is None else f'{cpu:.2f} ms'} |")
    print("\n| memory | rust | litellm | python | litellm / rust | python / rust |")
    print("|---|---:|---:|---:|---:|---:|")
    mib = lambda v: "n/a" if v is None else f"{v / 1024:.1f} MiB"  # noqa: E731
    for r in mem_rows:
        print(f"| {r['metric']} | {mib(r['rust'])} | {mib(r['litellm'])} | {mib(r['python'])} | "
              f"{common.times(r.get('litellm_over_rust'))} | {common.times(r.get('python_over_rust'))} |")
    for name in PEERS:
        res = peers.get(name, {})
        if not res.get("healthy"):
            print(f"\n{name} did not serve: {res.get('command')}\n{res.get('log_tail', '')[-1500:]}")
    for r in latency_rows:
        if r["first_error"]:
            print(f"{r['path']} at {r['concurrency']}: {r['errors']} failed, {r['abandoned']} "
                  f"abandoned, first error: {r['first_error'][:300]}")


def main():
    # SIGTERM ends the harness like Ctrl-C does: through the `finally` that stops every peer.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t0 = time.monotonic()
    up = common.Upstream(BENCH_BIN, WORK, (cfg["first_ms"], cfg["gap_ms"]))
    log(f"stub upstream at {up.base_url}")
    started, peers, runs = {}, {}, []
    try:
        for name in ("rust", "litellm"):
            log(f"{name} gateway: start, settle {cfg['settle']} s")
            started[name] = start_peer(name, up.base_url)
            peers[name] = started[name][2]
        samplers = {n: common.Sampler(p.proc.pid) for n, (p, _, _) in started.items() if p.alive()}
        for s in samplers.values():
            s.start()
        runs += run_fast_paths(up, started)
        for name, (peer, _, res) in started.items():
            finish_peer(peer, res, samplers.get(name))
        if cfg["python"]:
            peers["python"], py_runs = run_python(up)
            runs += py_runs
    finally:
        for peer, _, _ in started.values():
            peer.stop()
        up.stop()
    latency_rows, mem_rows = summarize(runs), memory_rows(peers)
    doc = {
        "benchmark": "gateway-added-latency-and-memory",
        "command": "bash bench/gateway/latency.sh",
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "wall_seconds": round(time.monotonic() - t0, 1),
        "machine": common.machine(),
        "settings": {k: cfg[k] for k in ("first_ms", "gap_ms", "concurrencies", "repeats", "seconds",
                                         "warmup", "grace", "settle", "pause", "py_seconds",
                                         "py_grace", "py_max_requests", "py_warmup")},
        "definition": "added pX = pX of whole streamed answers through the gateway minus pX "
                      "calling the stub directly, same client, concurrency and stub pacing; "
                      "median over repeats of the per-repeat difference (python: one run, "
                      "against the median direct pX)",
        "peers": {"rust": {"binary": "hermes (cargo build --release -p hermes)",
                           "version": common.first_line([cfg["rust_hermes"], "--version"]),
                           "commit": common.git_commit(cfg["repo"])},
                  "litellm": {"package": cfg["litellm_requirement"]},
                  "python": {"package": cfg["python_requirement"]}},
        "latency": latency_rows,
        "memory": mem_rows,
        "gateways": peers,
        "runs": runs,
    }
    common.write_scrubbed(doc, cfg["out"], {WORK: "$WORK", cfg["target_dir"]: "$TARGET",
                                            cfg["cache"]: "$BENCH_CACHE", cfg["repo"]: "$REPO",
                                            sys.executable: "python3"})
    print_tables(latency_rows, mem_rows, peers)


main()
