"""Helpers shared by the gateway benchmark harnesses (`compare.sh`, `latency.sh`).

Process-tree memory and CPU from /proc, the stub upstream (`gateway_bench
--serve-upstream`), the temporary HERMES_HOME both Hermes gateways start from, a peer
started in its own session and stopped on every path, machine facts, and the scrubbing of
machine-specific paths out of a committed JSON file. Not part of the test suite.
"""

import json
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

START_TIMEOUT = 120  # seconds; the Python gateways import a lot on a busy machine
# Where every process group started here is listed, for the calling script's EXIT trap
# (`kill_recorded_groups` in bench/lib.sh) should the harness itself be killed.
GROUPS_FILE = os.environ.get("BENCH_PGIDS")


def spawn(argv, **kwargs):
    """Starts a process in its own session (so it and all it spawns stop together) and
    records its process group."""
    proc = subprocess.Popen(argv, start_new_session=True, **kwargs)
    if GROUPS_FILE:
        with open(GROUPS_FILE, "a") as f:
            f.write(f"{proc.pid}\n")
    return proc


def stop_group(proc, timeout=60):
    """SIGTERM, up to `timeout` seconds to exit, then SIGKILL to whatever is left of its
    session. Returns True when it had to be killed."""
    killed = False
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            killed = True
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    return killed


def run_recorded(argv, timeout):
    """Runs a client to its end like `subprocess.run(capture_output=True, text=True)`, but in
    its own recorded session, so it is stopped with the rest even if the harness is killed.
    Returns (exit status, stdout, stderr); raises subprocess.TimeoutExpired after stopping
    it when it outlives `timeout` seconds."""
    proc = spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            stop_group(proc, timeout=5)
    return proc.returncode, out, err


def dig(d, path):
    """d[path[0]][path[1]]..., or None where a key is missing."""
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


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


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User + system CPU time of the process and its live descendants, in seconds
    (includes what finished children were charged with, as the kernel accounts it)."""
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # utime, stime, cutime, cstime are fields 14-17 of stat(5); index 0 here is field 3.
        total += sum(int(v) for v in fields[11:15])
    return total / CLOCK_TICKS


def machine_busy():
    """(busy, total) jiffies of all CPUs from /proc/stat, for the share busy over a run."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values) - idle, sum(values)


class Sampler(threading.Thread):
    """The largest summed RSS of the tree seen while it runs (100 ms period)."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.max_kib, self.stop = pid, 0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            self.max_kib = max(self.max_kib, memory(self.pid)["rss_kib"])
            self.stop.wait(0.1)


def healthy(port, path="/health"):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return r.status == 200
    except Exception:
        return False


def tail(path, limit=3000):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-limit:]
    except OSError:
        return ""


def head(path, limit=3000):
    try:
        with open(path, errors="replace") as f:
            return f.read(limit)
    except OSError:
        return ""


class Upstream:
    """The stub provider (`gateway_bench --serve-upstream [first_ms gap_ms]`)."""

    def __init__(self, bench_bin, work, pace=()):
        self.out = open(os.path.join(work, "upstream.out"), "w+")
        self.proc = spawn([bench_bin, "--serve-upstream", *map(str, pace)], stdout=self.out,
                          stderr=subprocess.STDOUT)
        self.base_url = None
        for _ in range(200):
            for line in self.lines():
                if line.startswith("LISTENING "):
                    self.base_url = line.split()[1]
            if self.base_url:
                return
            time.sleep(0.05)
        self.stop()
        sys.exit("error: the upstream did not start:\n" + tail(self.out.name))

    def lines(self):
        self.out.seek(0)
        return self.out.read().splitlines()

    def seen(self):
        """What the upstream has been sent so far (SIGUSR1 -> a `SEEN` line)."""
        before = sum(1 for l in self.lines() if l.startswith("SEEN "))
        self.proc.send_signal(signal.SIGUSR1)
        for _ in range(100):
            lines = [l for l in self.lines() if l.startswith("SEEN ")]
            if len(lines) > before:
                _, chats, size, other = lines[-1].split(" ", 3)
                return {"chat_requests": int(chats), "chat_body_bytes": int(size),
                        "other": json.loads(other)}
            time.sleep(0.05)
        return {"chat_requests": 0, "chat_body_bytes": 0, "other": {}}

    def stop(self):
        stop_group(self.proc, timeout=30)


def seen_delta(a, b):
    other = {k: v - a["other"].get(k, 0) for k, v in b["other"].items() if v - a["other"].get(k, 0)}
    return {"chat_requests": b["chat_requests"] - a["chat_requests"],
            "chat_body_bytes": b["chat_body_bytes"] - a["chat_body_bytes"], "other": other}


def hermes_home(root, port, key, base_url, extra_yaml=""):
    """A fresh HOME and HERMES_HOME under `root` with the `.env` and `config.yaml` both
    Hermes gateways read (each reads what it knows), `extra_yaml` appended to the config;
    returns the environment to run in."""
    home, hh = os.path.join(root, "home"), os.path.join(root, "hermes_home")
    os.makedirs(home)
    os.makedirs(hh)
    with open(os.path.join(hh, ".env"), "w") as f:
        f.write(f"API_SERVER_ENABLED=true\nAPI_SERVER_PORT={port}\nAPI_SERVER_KEY={key}\n")
    with open(os.path.join(hh, "config.yaml"), "w") as f:
        f.write("model:\n"
                "  default: bench-model\n"
                "  provider: custom\n"
                f"  base_url: {base_url}\n"
                "  api_key: upstream-key\n"
                # Without it the Python agent asks openrouter.ai for the context window.
                "  context_length: 131072\n"
                "security:\n"
                # Without it the Python gateway downloads the `tirith` scanner at start.
                "  tirith_enabled: false\n" + extra_yaml)
    return dict(os.environ, HOME=home, HERMES_HOME=hh)


class Peer:
    """A gateway process started in its own session, so it and everything it spawns can be
    stopped together; `stop()` is safe to call more than once and on every path."""

    def __init__(self, name, cmd, env, cwd, port, health_path="/health"):
        self.name, self.cmd, self.port, self.health_path = name, cmd, port, health_path
        self.log_path = os.path.join(cwd, "gateway.log")
        with open(self.log_path, "w") as log_f:
            self.proc = spawn(cmd, env=env, cwd=cwd, stdout=log_f, stderr=subprocess.STDOUT)
        self.exit_code = None
        self.killed = False

    def alive(self):
        return self.proc.poll() is None

    def wait_healthy(self):
        """Seconds until the health endpoint answered 200, or None if it never did."""
        started = time.monotonic()
        while time.monotonic() - started < START_TIMEOUT and self.alive():
            if healthy(self.port, self.health_path):
                return round(time.monotonic() - started, 2)
            time.sleep(0.1)
        return None

    def stop(self):
        if self.exit_code is None:
            self.killed = stop_group(self.proc)
            self.exit_code = self.proc.returncode


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine():
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model(),
        "kernel": platform.release(),
        "arch": platform.machine(),
        "loadavg_after_run": [round(x, 2) for x in os.getloadavg()],
    }


def git_commit(repo):
    return subprocess.run(["git", "-C", repo, "rev-parse", "--short=8", "HEAD"],
                          capture_output=True, text=True).stdout.strip() or "unknown"


def first_line(argv):
    out = subprocess.run(argv, capture_output=True, text=True).stdout.strip().splitlines()
    return out[0] if out else "unknown"


def write_scrubbed(doc, out_path, roles):
    """Writes `doc` as JSON with machine-specific directories named by role (`roles` maps a
    path to its label); longest first, since log lines may quote a path cut short."""
    text = json.dumps(doc, indent=2) + "\n"
    for path, label in sorted(roles.items(), key=lambda p: -len(p[0])):
        if path:
            text = text.replace(path, label)
    with open(out_path, "w") as f:
        f.write(text)


def times(r):
    """A ratio as people read it: 9.53x, 16.1x, 2361x, or 1/1977 when below one."""
    if r is None:
        return "n/a"
    if r < 1:
        return f"1/{1 / r:.0f}" if r > 0 else "0"
    return f"{r:.2f}x" if r < 10 else f"{r:.1f}x" if r < 100 else f"{r:.0f}x"
