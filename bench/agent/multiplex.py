#!/usr/bin/env python3
"""Memory of 3 profiles, both engines, multiplexed or not, side by side in one run: the harness
behind bench/agent/multiplex.sh (run it through that script, which prepares its inputs).

Four layouts of the same volume (the default profile and N-1 named ones, each with its API
server on: `API_SERVER_ENABLED=true`, its own `API_SERVER_PORT` and `API_SERVER_KEY`, a model
at ONE stub upstream, a `SOUL.md`), all started through OUR binary:

* agent, separate:    `hermes [-p P] gateway run --no-supervise` per profile, `gateway.engine:
                      agent`, `HERMES_AGENT_CLI` = the agent's `hermes`; each execs the
                      agent's `-p P gateway run --replace` (docs/gateway.md, "Engines");
* agent, multiplexed: one `GATEWAY_MULTIPLEX_PROFILES=1 hermes gateway run --no-supervise`,
                      which execs the agent's multiplexing gateway (the switch passes through
                      in the environment); the named profiles at `/p/<name>/`;
* native, separate / native, multiplexed: the same with `gateway.engine: native` (the
                      layouts of bench/gateway/multiplex.py).

Per layout, on a fresh copy of the volume: wait until every profile answers its `/health`
(`/p/<name>/health` when multiplexed), settle, read idle memory; then per profile one plain and
one streamed chat request with its own key (both must be 200 and carry the stub's answer),
plus the same request with the NEXT profile's key, which must be 401 (each key opens only its
own routes); settle 1 s, read memory again. Memory is summed over each started process and all
its descendants from /proc/<pid>/smaps_rollup (RSS, PSS, anonymous) and /proc/<pid>/status
(VmHWM). Layouts are interleaved, their order rotated each repeat; medians of REPEATS.

argv: hermes agent_cli bench_bin work out repo
Knobs (environment): PROFILES [3], REPEATS [3], SETTLE [seconds, 5], AGENT_LABEL (what the
agent is, for the JSON), STOP_TIMEOUT [seconds, 40].
"""
import json
import os
import statistics
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gateway"))
import common  # noqa: E402  (bench/gateway/common.py: upstream, /proc, process groups)
from pss import rollup  # noqa: E402

HERMES, AGENT, BENCH_BIN, WORK, OUT, REPO = sys.argv[1:7]
N = int(os.environ.get("PROFILES", "3"))
REPEATS = int(os.environ.get("REPEATS", "3"))
SETTLE = float(os.environ.get("SETTLE", "5"))
STOP_TIMEOUT = float(os.environ.get("STOP_TIMEOUT", "40"))
NAMES = ["default"] + [f"p{i}" for i in range(1, N)]
LAYOUTS = [("agent", "separate"), ("agent", "multiplexed"), ("native", "separate"), ("native", "multiplexed")]
QUESTION = "hello from the benchmark"
ECHO = f"echo: {QUESTION}"  # what the stub upstream answers (gateway_bench --serve-upstream)
KEYS = ("Rss", "Pss", "Anonymous", "VmHWM")


def volume(root, base_url, engine):
    """The N profiles under root/hermes_home; returns (env, {name: (key, port)})."""
    hh, home = os.path.join(root, "hermes_home"), os.path.join(root, "home")
    os.makedirs(home)
    profiles = {}
    for name in NAMES:
        d = hh if name == "default" else os.path.join(hh, "profiles", name)
        os.makedirs(d, exist_ok=True)
        key, port = f"bench-key-of-{name}-{os.urandom(12).hex()}", common.free_port()
        with open(os.path.join(d, ".env"), "w") as f:
            f.write(f"API_SERVER_ENABLED=true\nAPI_SERVER_PORT={port}\nAPI_SERVER_KEY={key}\n")
        with open(os.path.join(d, "config.yaml"), "w") as f:
            f.write(f"gateway:\n  engine: {engine}\n"
                    f"model:\n  default: model-{name}\n  provider: custom\n  base_url: {base_url}\n"
                    "  api_key: upstream-key\n"
                    # Without it the agent asks openrouter.ai for the context window.
                    "  context_length: 131072\n"
                    # Without it the agent downloads the `tirith` scanner at start.
                    "security:\n  tirith_enabled: false\n")
        with open(os.path.join(d, "SOUL.md"), "w") as f:
            f.write(f"You are the {name} profile.\n")
        profiles[name] = (key, port)
    env = dict(os.environ, HOME=home, HERMES_HOME=hh, HERMES_AGENT_CLI=AGENT,
               HERMES_GATEWAY_NO_SUPERVISE="1", RUST_LOG="warn", PYTHONUNBUFFERED="1")
    for var in ("GATEWAY_MULTIPLEX_PROFILES", "HERMES_GATEWAY_ENGINE"):
        env.pop(var, None)
    return env, profiles


def routes(mode, profiles):
    """{name: base URL of its routes}."""
    if mode == "multiplexed":
        port = profiles["default"][1]
        return {n: f"http://127.0.0.1:{port}" + ("" if n == "default" else f"/p/{n}") for n in NAMES}
    return {n: f"http://127.0.0.1:{profiles[n][1]}" for n in NAMES}


def start(engine, mode, root, base_url):
    env, profiles = volume(root, base_url, engine)
    log_path = os.path.join(root, "gateways.log")
    log = open(log_path, "w")
    procs = []
    if mode == "multiplexed":
        procs.append(common.spawn([HERMES, "gateway", "run", "--no-supervise"], stdout=log,
                                  stderr=log, env=dict(env, GATEWAY_MULTIPLEX_PROFILES="1")))
    else:
        for name in NAMES:
            argv = [HERMES] + ([] if name == "default" else ["-p", name]) + ["gateway", "run", "--no-supervise"]
            procs.append(common.spawn(argv, stdout=log, stderr=log, env=env))
    urls = routes(mode, profiles)
    deadline = time.time() + common.START_TIMEOUT
    for name, url in urls.items():
        while not healthy(url):
            if time.time() > deadline or any(p.poll() is not None for p in procs):
                stop(procs)
                sys.exit(f"multiplex: {engine} {mode}: profile {name} did not come up at {url}/health; "
                         f"log:\n{common.tail(log_path)}")
            time.sleep(0.2)
    return procs, urls, {n: k for n, (k, _) in profiles.items()}, log_path


def healthy(url):
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=3) as r:
            return r.status == 200
    except Exception:
        return False


def chat(url, key, stream):
    """(status, body) of one chat request to url with key."""
    body = json.dumps({"model": "bench", "stream": stream,
                       "messages": [{"role": "user", "content": QUESTION}]}).encode()
    req = urllib.request.Request(f"{url}/v1/chat/completions", data=body, method="POST",
                                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except OSError as e:
        return None, str(e)


def answer(body, stream):
    """The assistant's text of a chat answer (a JSON body, or the deltas of an SSE stream)."""
    try:
        if not stream:
            return json.loads(body)["choices"][0]["message"]["content"]
        pieces = []
        for line in body.splitlines():
            data = line[len("data: "):] if line.startswith("data: ") else None
            if data and data != "[DONE]":
                delta = json.loads(data)["choices"][0].get("delta") or {}
                pieces.append(delta.get("content") or "")
        return "".join(pieces) if "data: [DONE]" in body else None
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def exercise(engine, mode, urls, keys, log_path):
    """Each profile answers its own key, plain and streamed, and refuses the next profile's."""
    for i, name in enumerate(NAMES):
        for stream in (False, True):
            status, body = chat(urls[name], keys[name], stream)
            if status != 200 or answer(body, stream) != ECHO:
                sys.exit(f"multiplex: {engine} {mode}: {name} (stream={stream}) answered {status}: "
                         f"{body[:400]}\nlog:\n{common.tail(log_path)}")
        other = NAMES[(i + 1) % len(NAMES)]
        status, body = chat(urls[name], keys[other], False)
        if status != 401:
            sys.exit(f"multiplex: {engine} {mode}: {name} with {other}'s key answered {status}, not 401: {body[:400]}")


def summed(procs):
    """Memory summed over every started process and its descendants, KiB."""
    total = dict.fromkeys(KEYS, 0)
    count = 0
    for p in procs:
        for pid in common.tree(p.pid):
            try:
                r = rollup(pid)
            except OSError:
                continue
            count += 1
            for k in ("Rss", "Pss", "Anonymous"):
                total[k] += r.get(k, 0)
            total["VmHWM"] += common.kib(common.status(pid) or {}, "VmHWM")
    total["processes"] = count
    return total


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.send_signal(15)
    for p in procs:
        common.stop_group(p, timeout=STOP_TIMEOUT)


def run_layout(engine, mode, base_url, i):
    root = os.path.join(WORK, f"{engine}-{mode}-{i}")
    os.makedirs(root)
    procs, urls, keys, log_path = start(engine, mode, root, base_url)
    try:
        time.sleep(SETTLE)
        idle = summed(procs)
        exercise(engine, mode, urls, keys, log_path)
        time.sleep(1)
        loaded = summed(procs)
        with open(log_path, errors="replace") as f:
            text = f.read()
        notes = [line.strip() for line in text.splitlines() if "port-binding" in line][:2]
        return {"started": len(procs), "idle": idle, "after_requests": loaded, "log_notes": notes}
    finally:
        stop(procs)


def main():
    up = common.Upstream(BENCH_BIN, WORK)
    runs = {f"{e} {m}": [] for e, m in LAYOUTS}
    try:
        for i in range(REPEATS):
            order = LAYOUTS[i % len(LAYOUTS):] + LAYOUTS[:i % len(LAYOUTS)]
            for engine, mode in order:
                res = run_layout(engine, mode, up.base_url, i)
                runs[f"{engine} {mode}"].append(res)
                common.log(f"{engine} {mode} #{i + 1}: idle {res['idle']}, after {res['after_requests']}")
    finally:
        up.stop()
    med = {layout: {phase: {k: statistics.median(r[phase][k] for r in rs) for k in KEYS + ("processes",)}
                    for phase in ("idle", "after_requests")} for layout, rs in runs.items()}
    doc = {"profiles": N, "repeats": REPEATS, "settle_s": SETTLE,
           "agent": os.environ.get("AGENT_LABEL", "unknown"), "machine": common.machine(),
           "commit": common.git_commit(REPO), "runs": runs, "medians_kib": med}
    common.write_scrubbed(doc, OUT, {WORK: "<work>"})
    print_table(med)


def print_table(med):
    mib = lambda kib: f"{kib / 1024:.1f} MiB"  # noqa: E731
    print(f"| {N} profiles, summed over the process trees (median of {REPEATS}) "
          f"| agent: {N} gateways | agent: 1 multiplexing | {N} / 1 "
          f"| native: {N} gateways | native: 1 multiplexing | {N} / 1 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    rows = [("idle", "Rss", "RSS, idle"), ("idle", "Pss", "PSS, idle"), ("idle", "Anonymous", "anonymous, idle"),
            ("after_requests", "Rss", "RSS, after requests"), ("after_requests", "Pss", "PSS, after requests"),
            ("after_requests", "Anonymous", "anonymous, after requests"),
            ("after_requests", "VmHWM", "peak RSS (VmHWM, summed)")]
    for phase, k, label in rows:
        cells = []
        for engine in ("agent", "native"):
            s, m = med[f"{engine} separate"][phase][k], med[f"{engine} multiplexed"][phase][k]
            cells += [mib(s), mib(m), f"**{s / m:.1f}x**" if m else "n/a"]
        print(f"| {label} | " + " | ".join(cells) + " |")
    procs = [int(med[f"{e} {m}"]["after_requests"]["processes"]) for e in ("agent", "native")
             for m in ("separate", "multiplexed")]
    print(f"| processes | {procs[0]} | {procs[1]} | | {procs[2]} | {procs[3]} | |")


if __name__ == "__main__":
    main()
