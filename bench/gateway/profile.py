"""The harness of `profile.sh`: where our gateway's added latency goes.

Starts the paced stub, our gateway as users run it (`hermes gateway run --no-supervise`:
"cli", with its configuration checks and access log) and two copies of the library's
gateway alone (`gateway_bench --serve-gateway`: "multi" on the multi-thread runtime the
CLI uses, "current" on a current-thread runtime), and drives direct / cli / multi /
current in turn (interleaved, REPEATS times) at each concurrency with `gateway_bench
--timed`. For each gateway run it reads, per
answer, the CPU (user and system), the time its threads waited on the run queue and their
time slices (`/proc/<pid>/task/*/schedstat`), and their voluntary and involuntary context
switches; with STRACE=1 it also counts the system calls of one more run of the CLI's
(`strace -c -f`, which slows the process: only the counts mean anything). Writes
`profile.json` and prints the tables. The settings come from `profile.sh`'s environment.
"""

import json
import os
import re
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time

# No __pycache__ left in the checkout by importing the shared helpers.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import log  # noqa: E402

ENV = os.environ
WORK, BENCH_BIN = ENV["BENCH_WORK"], ENV["BENCH_BIN"]
KEY = "bench-key"  # what `--serve-gateway` requires
GATEWAYS = ("cli", "multi", "current")
COUNTERS = ("cpu_ms", "runqueue_wait_ms", "timeslices", "voluntary_cs", "involuntary_cs",
            "user_ms", "system_ms")


def counters(pid):
    """Per-process totals over every thread: schedstat, context switches, user and system."""
    cpu = wait = slices = vol = invol = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                on_cpu, waited, ran = (int(v) for v in f.read().split()[:3])
            with open(f"/proc/{pid}/task/{task}/status") as f:
                st = f.read()
        except OSError:
            continue  # a thread that ended meanwhile
        cpu, wait, slices = cpu + on_cpu, wait + waited, slices + ran
        vol += int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", st, re.M).group(1))
        invol += int(re.search(r"^nonvoluntary_ctxt_switches:\s+(\d+)", st, re.M).group(1))
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick_ms = 1000 / common.CLOCK_TICKS
    return [cpu / 1e6, wait / 1e6, slices, vol, invol, int(fields[11]) * tick_ms,
            int(fields[12]) * tick_ms]


def start_cli(base_url):
    """`hermes gateway run --no-supervise` from a fresh home, as latency.sh runs it."""
    root = tempfile.mkdtemp(dir=WORK)
    port, key = common.free_port(), secrets.token_hex(16)
    env = common.hermes_home(root, port, key, base_url)
    peer = common.Peer("cli", [ENV["RUST_HERMES"], "gateway", "run", "--no-supervise"], env,
                       root, port)
    if peer.wait_healthy() is None:
        peer.stop()
        sys.exit(f"error: `hermes gateway run` did not serve:\n{common.tail(peer.log_path)}")
    return peer.proc, f"http://127.0.0.1:{port}/v1/chat/completions", key


def start_gateway(runtime, base_url):
    if runtime == "cli":
        return start_cli(base_url)
    home = tempfile.mkdtemp(dir=WORK)
    out = open(os.path.join(WORK, f"{runtime}.out"), "w+")
    proc = common.spawn([BENCH_BIN, "--serve-gateway", home, base_url], stdout=out,
                        stderr=subprocess.STDOUT, env=dict(ENV, GATEWAY_BENCH_RUNTIME=runtime))
    for _ in range(200):
        out.seek(0)
        found = re.search(r"^LISTENING (\S+)", out.read(), re.M)
        if found:
            return proc, f"http://{found.group(1)}/v1/chat/completions", KEY
        time.sleep(0.05)
    common.stop_group(proc)
    sys.exit(f"error: the {runtime} gateway did not start")


def timed(url, key, concurrency):
    argv = [BENCH_BIN, "--timed", url, key, "stream", str(concurrency), ENV["WARMUP"],
            ENV["SECONDS_PER_RUN"], "30", "1000000000"]
    _, out, err = common.run_recorded(argv, 300)
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        sys.exit(f"error: the client failed: {err[-500:]}")


def strace_counts(pid, url, key, concurrency):
    """`strace -c -f` attached to the gateway for one run; its table, per answer."""
    table = os.path.join(WORK, "strace.txt")
    tracer = common.spawn(["strace", "-c", "-f", "-qq", "-o", table, "-p", str(pid)])
    time.sleep(0.5)
    out = timed(url, key, concurrency)
    tracer.send_signal(signal.SIGINT)
    tracer.wait(timeout=30)
    answers = out["ok"] + out["warmup"]["ok"]
    calls = {}
    with open(table) as f:
        for line in f:
            parts = line.split()
            # "% time seconds usecs/call calls [errors] syscall": the last column is the name.
            if len(parts) >= 5 and parts[3].isdigit() and parts[-1] != "total":
                errors = int(parts[4]) if len(parts) == 6 else 0
                calls[parts[-1]] = {"per_answer": round(int(parts[3]) / answers, 2),
                                    "failed_per_answer": round(errors / answers, 2)}
    return {"answers": answers, "calls": calls}


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    concurrencies = [int(c) for c in ENV["CONCURRENCIES"].split()]
    up = common.Upstream(BENCH_BIN, WORK, (ENV["FIRST_MS"], ENV["GAP_MS"]))
    gateways, runs, traced = {}, [], None
    try:
        for runtime in GATEWAYS:
            gateways[runtime] = start_gateway(runtime, up.base_url)
        for rep in range(int(ENV["REPEATS"])):
            for c in concurrencies:
                for path in ("direct", *GATEWAYS):
                    log(f"repeat {rep + 1}: {path} at {c} streams")
                    pid, url, key = (None, f"{up.base_url}/chat/completions", "none") \
                        if path == "direct" else (gateways[path][0].pid, *gateways[path][1:])
                    before = counters(pid) if pid else None
                    out = timed(url, key, c)
                    run = {"path": path, "concurrency": c, "repeat": rep + 1,
                           "p50_ms": out["latency"]["p50_ms"], "p99_ms": out["latency"]["p99_ms"],
                           "answers": out["ok"] + out["warmup"]["ok"], "errors": out["errors"],
                           "loadavg_1m": round(os.getloadavg()[0], 2)}
                    if pid:
                        after = counters(pid)
                        run["per_answer"] = {k: round((b - a) / run["answers"], 4)
                                             for k, a, b in zip(COUNTERS, before, after)}
                    runs.append(run)
        if ENV.get("STRACE") == "1":
            log(f"strace -c of `hermes gateway run` at {concurrencies[-1]} streams")
            proc, url, key = gateways["cli"]
            traced = strace_counts(proc.pid, url, key, concurrencies[-1])
    finally:
        for proc, _, _ in gateways.values():
            common.stop_group(proc)
        up.stop()
    summary = []
    for c in concurrencies:
        direct = {r["repeat"]: r for r in runs if r["path"] == "direct" and r["concurrency"] == c}
        for path in GATEWAYS:
            mine = [r for r in runs if r["path"] == path and r["concurrency"] == c]
            row = {"gateway": path, "concurrency": c,
                   "added_p50_ms": statistics.median(r["p50_ms"] - direct[r["repeat"]]["p50_ms"] for r in mine),
                   "added_p99_ms": statistics.median(r["p99_ms"] - direct[r["repeat"]]["p99_ms"] for r in mine),
                   "errors": sum(r["errors"] for r in mine)}
            for k in COUNTERS:
                row[k] = statistics.median(r["per_answer"][k] for r in mine)
            summary.append(row)
    doc = {"benchmark": "gateway-profile", "command": "bash bench/gateway/profile.sh",
           "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "machine": common.machine(),
           "settings": {k: ENV[k] for k in ("FIRST_MS", "GAP_MS", "CONCURRENCIES", "REPEATS",
                                            "SECONDS_PER_RUN", "WARMUP")},
           "summary": summary, "runs": runs, "strace_cli": traced}
    common.write_scrubbed(doc, ENV["OUT"], {WORK: "$WORK", ENV["BENCH_TARGET"]: "$TARGET"})
    print("| runtime | streams | added p50 | added p99 | CPU | user | system | run-queue wait "
          "| time slices | voluntary cs | involuntary cs |  (per answer, medians)")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in summary:
        print(f"| {r['gateway']} | {r['concurrency']} | {r['added_p50_ms']:.2f} ms | "
              f"{r['added_p99_ms']:.2f} ms | {r['cpu_ms']:.3f} ms | {r['user_ms']:.3f} ms | "
              f"{r['system_ms']:.3f} ms | {r['runqueue_wait_ms']:.3f} ms | {r['timeslices']:.1f} | "
              f"{r['voluntary_cs']:.1f} | {r['involuntary_cs']:.1f} |")
    if traced:
        print(f"\nsystem calls per answer, `hermes gateway run` ({traced['answers']} answers):")
        for name, v in sorted(traced["calls"].items(), key=lambda kv: -kv[1]["per_answer"]):
            if v["per_answer"] >= 0.05:
                print(f"  {name}: {v['per_answer']} ({v['failed_per_answer']} failed)")


main()
