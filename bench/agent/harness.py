"""The harness behind bench/agent/run.sh: the original agent's gateways supervised by our
`hermes up` and by Debian's s6, side by side; boot time to every gateway healthy and the
memory of the supervision processes. Run through run.sh, which prepares its inputs.

argv: hermes agent_cli bench_bin work out repo counts runs settle timeout
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gateway"))
import common  # noqa: E402  (bench/gateway/common.py: upstream, /proc walking, machine facts)
from common import log  # noqa: E402

(HERMES, AGENT, BENCH_BIN, WORK, OUT, REPO, COUNTS, RUNS, SETTLE, TIMEOUT) = sys.argv[1:]
COUNTS = [int(n) for n in COUNTS.split(",")]
RUNS, SETTLE, TIMEOUT = int(RUNS), float(SETTLE), float(TIMEOUT)
POLL = 0.02  # seconds between two rounds of `GET /health`, as the brief of the benchmark says

# The processes that make up each system's supervision (the gateways are excluded).
S6_NAMES = {"s6-svscan", "s6-supervise"}
S6_LOG_NAMES = S6_NAMES | {"s6-log"}


def profiles(n):
    """The default profile (the home's root) and n - 1 named ones."""
    return ["default"] + [f"p{i}" for i in range(2, n + 1)]


def profile_dir(hh, profile):
    return hh if profile == "default" else os.path.join(hh, "profiles", profile)


def make_home(root, n, base_url):
    """A HOME and HERMES_HOME under `root` with n profiles, each with the agent's API server
    platform on its own port (the settings bench/gateway uses, made by the same function);
    returns (environment, {profile: (port, key)})."""
    ports = {}
    env = None
    for profile in profiles(n):
        port, key = common.free_port(), os.urandom(16).hex()
        scratch = os.path.join(root, f"make-{profile}")
        made = common.hermes_home(scratch, port, key, base_url, "gateway:\n  engine: agent\n")
        if profile == "default":
            shutil.move(os.path.join(scratch, "home"), os.path.join(root, "home"))
            shutil.move(made["HERMES_HOME"], os.path.join(root, "hermes_home"))
            env = dict(made, HOME=os.path.join(root, "home"),
                       HERMES_HOME=os.path.join(root, "hermes_home"))
        else:
            dest = profile_dir(env["HERMES_HOME"], profile)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.move(made["HERMES_HOME"], dest)
        shutil.rmtree(scratch)
        # Our profile list counts a directory under profiles/ as a profile by its SOUL.md
        # (the original's profiles have one too); every profile gets the same.
        with open(os.path.join(profile_dir(env["HERMES_HOME"], profile), "SOUL.md"), "w") as f:
            f.write("You are a terse benchmark assistant.\n")
        ports[profile] = (port, key)
    # The dashboard off, as PID 1 has it by default in the container and as the original
    # image's s6 has it (both behind HERMES_DASHBOARD): `hermes up` would start it, and it
    # is a program, not supervision.
    env.update(HERMES_AGENT_CLI=AGENT, HERMES_GATEWAY_ENGINE="agent", HERMES_DASHBOARD="0",
               HERMES_RUNTIME_DIR=os.path.join(root, "run"))
    return env, ports


def want_running(hh, n):
    """Records every gateway as running, so `hermes up` starts each one (a profile without a
    record is registered down; only a fresh default would start by itself)."""
    for profile in profiles(n):
        with open(os.path.join(profile_dir(hh, profile), "gateway_state.json"), "w") as f:
            json.dump({"gateway_state": "running"}, f)


def agent_argv(profile):
    """What our supervisor ends up running for a profile (docs/gateway.md, "Engines")."""
    return [AGENT, "-p", profile, "gateway", "run", "--replace", "--external-supervisor"]


def s6_scandir(root, env, n, with_log):
    """One service dir per gateway whose `run` execs the agent's gateway with the
    environment our supervisor gives it; with `with_log`, a `log/run` with s6-log writing
    logs/gateways/<profile>/ as the original image does."""
    scan = os.path.join(root, "scan")
    shutil.rmtree(scan, ignore_errors=True)
    for profile in profiles(n):
        svc = os.path.join(scan, f"gateway-{profile}")
        os.makedirs(svc)
        argv = " ".join(agent_argv(profile))
        write_exec(os.path.join(svc, "run"),
                   "export HERMES_S6_SUPERVISED_CHILD=1 PYTHONUNBUFFERED=1\n"
                   f"exec {argv} 2>&1\n")
        if with_log:
            logdir = os.path.join(env["HERMES_HOME"], "logs", "gateways", profile)
            os.makedirs(logdir, exist_ok=True)
            os.makedirs(os.path.join(svc, "log"))
            write_exec(os.path.join(svc, "log", "run"),
                       f"exec s6-log n10 s1000000 T {logdir}\n")
    return scan


def write_exec(path, body):
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)


def ready(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
            return r.status == 200
    except Exception:
        return False


def wait_all_ready(proc, ports, started):
    """Seconds from `started` until every port answered /health 200 (polled every 20 ms),
    or None if the supervisor died or TIMEOUT passed; and when each port first answered."""
    pending, first = set(ports), {}
    while pending:
        if proc.poll() is not None or time.monotonic() - started > TIMEOUT:
            return None, first
        for p in [p for p in pending if ready(p)]:
            first[p] = round(time.monotonic() - started, 3)
            pending.discard(p)
        if pending:
            time.sleep(POLL)
    return time.monotonic() - started, first


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def start_ticks(pid):
    """When the process started, in clock ticks since boot (stat(5) field 22)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def gateway_timeline(sup_pid, ports, first_ready):
    """Per gateway: when its process started after the supervisor (10 ms resolution, the
    pid of the agent is the one the supervisor spawned, since ours execs it) and when its
    port first answered, so a slow boot can be told apart: late spawn or slow gateway."""
    t0 = start_ticks(sup_pid)
    by_profile = {}
    for pid in common.tree(sup_pid):
        line = cmdline(pid).split()
        if "gateway" in line and "-p" in line and not ours(pid) and comm(pid) not in S6_LOG_NAMES:
            st = start_ticks(pid)
            by_profile[line[line.index("-p") + 1]] = (
                None if st is None or t0 is None else round((st - t0) / CLOCK_TICKS, 2))
    return {profile: {"spawned_after_s": by_profile.get(profile),
                      "healthy_after_s": first_ready.get(port)}
            for profile, (port, _) in ports.items()}


def smaps(pid):
    """(Rss, Pss, Anonymous) in KiB from smaps_rollup, or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return tuple(int(fields[k].split()[0]) for k in ("Rss", "Pss", "Anonymous"))
    except (OSError, KeyError, ValueError):
        return None


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def exe(pid):
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def supervision_memory(root_pid, is_supervision):
    """Rss, Pss and anonymous memory (heap, stacks: what is not a mapped file) summed over
    the processes of the tree that `is_supervision` picks, plus the whole tree's RSS for
    context."""
    picked, rss, pss, anon, pss_ok, names, total = [], 0, 0, 0, True, {}, 0
    for pid in common.tree(root_pid):
        st = common.status(pid)
        if st is None:
            continue
        total += common.kib(st, "VmRSS")
        if not is_supervision(pid):
            continue
        picked.append(pid)
        name = comm(pid) or "?"
        names[name] = names.get(name, 0) + 1
        m = smaps(pid)
        if m is None:
            pss_ok = False
            rss += common.kib(st, "VmRSS")
        else:
            rss, pss, anon = rss + m[0], pss + m[1], anon + m[2]
    return {"processes": len(picked), "by_name": names, "rss_kib": rss,
            "pss_kib": pss if pss_ok else None, "anon_kib": anon if pss_ok else None,
            "tree_rss_kib": total}


def ours(pid):
    """Our binary, whatever it stays resident as (the supervisor, any helper it keeps)."""
    return exe(pid) == HERMES


def of_this_run(pid):
    """Whether the process carries this run's mark (run.sh exports it; all inherit it)."""
    mark = f"HERMES_BENCH_AGENT_WORK={os.environ.get('HERMES_BENCH_AGENT_WORK', '')}".encode()
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return mark in f.read().split(b"\0")
    except OSError:
        return False


def stop(proc, how):
    """Stops a supervisor and everything under it; SIGKILL for what is left after 60 s."""
    pids = common.tree(proc.pid)
    if proc.poll() is None:
        how()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
    # The gateways run in sessions of their own: reach them by pid, not by group (and only
    # while the pid is still one of this run's, should it have been reused meanwhile).
    for p in pids:
        if of_this_run(p):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def leftovers(spared):
    """Processes of this run still alive after a boot was stopped (none expected): their
    command lines, after SIGKILL; a process of an earlier boot must never answer for a later
    one, nor compete with it for the CPU."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in spared and of_this_run(int(name)):
            found.append(cmdline(int(name)).strip() or name)
            try:
                os.kill(int(name), signal.SIGKILL)
            except ProcessLookupError:
                pass
    return found


def port_busy(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def boot(system, root, env, ports, n, measure_memory):
    """One boot: start the supervisor, time all gateways healthy, read memory, stop."""
    logf = open(os.path.join(root, f"{system}.log"), "ab")
    if system == "hermes":
        want_running(env["HERMES_HOME"], n)
        argv = [HERMES, "up"]
        is_sup = ours
    else:
        argv = ["s6-svscan", s6_scandir(root, env, n, system == "s6+log")]
        names = S6_LOG_NAMES if system == "s6+log" else S6_NAMES
        is_sup = lambda pid: comm(pid) in names  # noqa: E731
    busy = [p for p, _ in ports.values() if port_busy(p)]
    if busy:
        return {"error": f"ports {busy} already in use before the boot"}
    started = time.monotonic()
    proc = common.spawn(argv, env=env, cwd=root, stdout=logf, stderr=subprocess.STDOUT)
    res = {}
    try:
        secs, first = wait_all_ready(proc, [p for p, _ in ports.values()], started)
        res["per_gateway"] = gateway_timeline(proc.pid, ports, first)
        res["seconds_to_all_healthy"] = None if secs is None else round(secs, 3)
        if secs is None:
            res["error"] = (f"not every gateway answered /health within {TIMEOUT:.0f} s"
                            if proc.poll() is None else f"supervisor exited {proc.returncode}")
            res["healthy"] = sorted(pr for pr, (p, _) in ports.items() if ready(p))
        elif measure_memory:
            time.sleep(SETTLE)
            res["memory"] = supervision_memory(proc.pid, is_sup)
            res["gateways"] = sum(1 for pid in common.tree(proc.pid) if "gateway" in cmdline(pid)
                                  and comm(pid) not in S6_LOG_NAMES and not ours(pid))
            if res["gateways"] != n:
                res["error"] = (f"{res['gateways']} of {n} gateways run under the supervisor: "
                                "a port answered for a process it does not supervise")
    finally:
        stop(proc, (lambda: proc.send_signal(signal.SIGTERM)) if system == "hermes"
             else (lambda: subprocess.run(["s6-svscanctl", "-t", argv[1]], check=False)))
        logf.close()
    left = leftovers(SPARED)
    if left:
        res["left_after_stop"] = left
    if "error" in res:
        res["log_tail"] = common.tail(logf.name, 2000)
    return res


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def median(values):
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


SYSTEMS = ("hermes", "s6", "s6+log")
SPARED = set()


def main():
    upstream = common.Upstream(BENCH_BIN, WORK)
    # Processes of the run that outlive every boot: this harness, run.sh, the upstream.
    SPARED.update({os.getpid(), os.getppid(), upstream.proc.pid})
    log(f"upstream at {upstream.base_url}")
    results = {}
    try:
        for n in COUNTS:
            homes = {}
            for system in SYSTEMS:
                root = os.path.join(WORK, f"{system}-{n}")
                os.makedirs(root)
                homes[system] = (root, *make_home(root, n, upstream.base_url))
            runs = {s: [] for s in SYSTEMS}
            for r in range(RUNS):
                # Rotate the order, so no system always boots first on a cooled machine.
                order = SYSTEMS[r % len(SYSTEMS):] + SYSTEMS[:r % len(SYSTEMS)]
                for system in order:
                    root, env, ports = homes[system]
                    log(f"N={n} run {r + 1}/{RUNS}: {system}")
                    res = boot(system, root, env, ports, n, measure_memory=True)
                    log(f"  -> {res.get('seconds_to_all_healthy')} s, "
                        f"{(res.get('memory') or {}).get('pss_kib')} KiB PSS {res.get('error', '')}")
                    runs[system].append(res)
            results[str(n)] = summarise(runs)
    finally:
        upstream.stop()
    write(results)


def summarise(runs):
    out = {}
    for system, rs in runs.items():
        ok = [r for r in rs if "error" not in r]
        out[system] = {
            "runs": rs,
            "failed_runs": len(rs) - len(ok),
            "median_seconds_to_all_healthy": median([r["seconds_to_all_healthy"] for r in ok]),
            "median_supervision_rss_kib": median([r["memory"]["rss_kib"] for r in ok]),
            "median_supervision_pss_kib": median([r["memory"]["pss_kib"] for r in ok]),
            "median_supervision_anon_kib": median([r["memory"]["anon_kib"] for r in ok]),
            "supervision_processes": median([r["memory"]["processes"] for r in ok]),
            # The latest spawn of a gateway after the supervisor started (10 ms ticks): the
            # supervisor's own share of the boot; the rest is the gateways starting.
            "median_last_spawn_s": median([last_spawn(r) for r in ok]),
        }
    return out


def last_spawn(run):
    spawns = [g["spawned_after_s"] for g in run.get("per_gateway", {}).values()]
    return None if not spawns or None in spawns else max(spawns)


def write(results):
    agent_version = subprocess.run(
        [os.path.join(os.path.dirname(AGENT), "python"), "-c",
         "import importlib.metadata as m; print(m.version('hermes-agent'))"],
        capture_output=True, text=True).stdout.strip()
    doc = {
        "benchmark": "agent-gateways-supervision-hermes-vs-s6",
        "command": "bash bench/agent/run.sh",
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": common.machine(),
        "settings": {"gateway_counts": COUNTS, "runs": RUNS, "settle_seconds": SETTLE,
                     "poll_seconds": POLL, "timeout_seconds": TIMEOUT},
        "peers": {
            "hermes": {"command": "hermes up", "binary": "a private copy of the release build",
                       "version": common.first_line([HERMES, "--version"]),
                       "commit": common.git_commit(REPO),
                       "supervision": "processes whose executable is our hermes binary"},
            "s6": {"command": "s6-svscan <scandir>", "version": dpkg_version("s6"),
                   "supervision": "s6-svscan + one s6-supervise per gateway"},
            "s6+log": {"command": "s6-svscan <scandir> (each service with log/run: s6-log)",
                       "supervision": "s6-svscan + two s6-supervise and one s6-log per gateway"},
            "agent": {"package": f"hermes-agent[sms]=={agent_version}",
                      "gateway_command": " ".join(agent_argv("<profile>"))},
        },
        "results": results,
    }
    common.write_scrubbed(doc, OUT, {WORK: "$WORK", os.path.dirname(os.path.dirname(AGENT)): "$VENV",
                                     REPO: "$REPO"})
    print_tables(results)


def dpkg_version(pkg):
    return subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True,
                          text=True).stdout.strip() or "unknown"


def show(v, scale=1.0, fmt="{:.1f}"):
    return "n/a" if v is None else fmt.format(v * scale)


def ratio(value, base):
    """value / base as a plain factor (0.47x reads better than 1/2 for ratios near one)."""
    return f"{value / base:.2f}x" if base and value is not None else "n/a"


def print_tables(results):
    print("## Supervision memory with N agent gateways (gateways excluded), median of runs\n")
    print("| N | system | processes | RSS MiB | PSS MiB | anon MiB | RSS / hermes | PSS / hermes |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for n, by in results.items():
        h = by["hermes"]
        for system, s in by.items():
            rss, pss = s["median_supervision_rss_kib"], s["median_supervision_pss_kib"]
            print(f"| {n} | {system} | {show(s['supervision_processes'], fmt='{:.0f}')} | "
                  f"{show(rss, 1 / 1024)} | {show(pss, 1 / 1024, '{:.2f}')} | "
                  f"{show(s['median_supervision_anon_kib'], 1 / 1024, '{:.2f}')} | "
                  f"{ratio(rss, h['median_supervision_rss_kib'])} | "
                  f"{ratio(pss, h['median_supervision_pss_kib'])} |")
    print("\n## Boot: supervisor start -> every gateway answers GET /health (s), median\n")
    print("| N | hermes | s6 | s6+log | s6 / hermes | last gateway spawned (hermes / s6 / s6+log) |")
    print("|---:|---:|---:|---:|---:|---|")
    for n, by in results.items():
        h, s = (by[k]["median_seconds_to_all_healthy"] for k in ("hermes", "s6"))
        cells = " | ".join(show(by[k]["median_seconds_to_all_healthy"], fmt="{:.2f}") for k in SYSTEMS)
        spawns = " / ".join(show(by[k]["median_last_spawn_s"], fmt="{:.2f}") for k in SYSTEMS)
        print(f"| {n} | {cells} | {ratio(s, h)} | {spawns} |")
    for n, by in results.items():
        for system, s in by.items():
            for i, r in enumerate(s["runs"]):
                if "error" in r:
                    print(f"\nN={n} {system} run {i + 1} failed: {r['error']}\n{r.get('log_tail', '')[-800:]}")


if __name__ == "__main__":
    main()
