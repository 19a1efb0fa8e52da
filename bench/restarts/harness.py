"""The harness behind bench/restarts/run.sh: requests lost while a gateway is restarted and
killed under constant load, our supervisor (`hermes up`, native and agent engine) against the
original agent's gateway under s6-supervise. Run through run.sh, which prepares its inputs.

  harness.py upstream                 the stub provider: prints `PORT <n>`, serves until killed
  harness.py run HERMES AGENT WORK OUT_DIR RESTARTS ROWS REPO COMMAND
                                      the benchmark: results.json and RESULTS.md in OUT_DIR,
                                      the Markdown table on stdout

The stub answers a chat at once, unless its last user message holds SLOW_MARK: then it
streams STREAM_CHUNKS chunks STREAM_GAP seconds apart (or, asked without `stream`, answers
after that long), so a streamed chat through a gateway lasts about two seconds.
"""

import http.client
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.dont_write_bytecode = True  # no __pycache__ left in the checkout by the import below
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gateway"))
import common  # noqa: E402  (bench/gateway/common.py: spawning, /proc, machine facts)
from common import log  # noqa: E402

SLOW_MARK = "slow-stream"
STREAM_CHUNKS = 20
STREAM_GAP = 0.1  # seconds between two chunks of a slow stream
PLAIN_CLIENTS = 4
STREAM_CLIENTS = 2
CONNECT_TIMEOUT = 5.0  # a connect that takes longer counts as refused
READ_TIMEOUT = 60.0  # longer than a stop-then-start of the agent: a queued request waits
RETRY_PAUSE = 0.01  # after a failed request: a client retrying at once, the loop bounded
SPACING = 2.0  # seconds from one event to the next, at least
SETTLE_AFTER_BACK = 1.0  # the new gateway answers this long before the next event, at least
BASELINE = 3.0  # seconds of load before the first event, and after the last
BACK_TIMEOUT = 120.0  # seconds a gateway may take to serve again after an event
MODEL = "bench-model"
KEY = "bench-restarts-key-0123456789abcdef"
MARK_VAR = "HERMES_BENCH_RESTARTS_WORK"  # run.sh exports it; every process of the run has it


# ---- the stub provider -------------------------------------------------------------------

class StubHandler(BaseHTTPRequestHandler):
    # Every answer ends by closing the connection: the simplest framing of an SSE body.
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):
        pass  # tens of thousands of requests: nothing to read there

    def send_json(self, status, doc):
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.rstrip("/").endswith("/models"):
            self.send_json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        else:
            self.send_json(404, {"error": {"message": "not found", "type": "not_found"}})

    def do_POST(self):
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        except ValueError:
            self.send_json(400, {"error": {"message": "bad json", "type": "invalid_request_error"}})
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self.send_json(404, {"error": {"message": "not found", "type": "not_found"}})
            return
        slow = SLOW_MARK in last_user_text(body)
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        created, model = int(time.time()), body.get("model", MODEL)
        if not body.get("stream"):
            if slow:
                time.sleep(STREAM_CHUNKS * STREAM_GAP)
            self.send_json(200, {
                "id": "chatcmpl-stub", "object": "chat.completion", "created": created,
                "model": model, "usage": usage,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "pong"}}]})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()

        def chunk(delta, finish=None, with_usage=False):
            doc = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": created,
                   "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            if with_usage:
                doc["usage"] = usage
            self.wfile.write(b"data: " + json.dumps(doc).encode() + b"\n\n")
            self.wfile.flush()

        try:
            chunk({"role": "assistant", "content": ""})
            for i in range(STREAM_CHUNKS if slow else 1):
                if slow:
                    time.sleep(STREAM_GAP)
                chunk({"content": f"w{i} "})
            chunk({}, "stop", with_usage=True)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except OSError:
            pass  # the gateway went away mid-stream (killed): its loss, counted by the client


def last_user_text(body):
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            return str(content)
    return ""


def serve_upstream():
    server = ThreadingHTTPServer(("127.0.0.1", 0), StubHandler)
    server.daemon_threads = True
    server.request_queue_size = 128
    print("PORT", server.server_address[1], flush=True)
    server.serve_forever()


# ---- the load ------------------------------------------------------------------------------

class Load:
    """PLAIN_CLIENTS clients sending plain chats and STREAM_CLIENTS reading slow streamed
    chats, each request on a new connection, back to back; every request is recorded as
    (kind, started, ended, outcome, detail), outcome one of ok, refused (the connect failed),
    failed (no complete answer), broken (a stream that began and did not reach [DONE])."""

    def __init__(self, port):
        self.port = port
        self.records = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.client, args=("plain", i), daemon=True)
                        for i in range(PLAIN_CLIENTS)]
        self.threads += [threading.Thread(target=self.client, args=("stream", i), daemon=True)
                         for i in range(STREAM_CLIENTS)]

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(READ_TIMEOUT + CONNECT_TIMEOUT + 5)

    def first_answer_sent_after(self, t, deadline):
        """When the first plain request sent after `t` was answered, waiting for one until
        `deadline`; None if none was."""
        seen = 0
        while time.monotonic() < deadline:
            records = self.records[seen:]  # appended by the clients meanwhile: a copy
            seen += len(records)
            ends = [r[2] for r in records if r[0] == "plain" and r[1] > t and r[3] == "ok"]
            if ends:
                return min(ends)
            time.sleep(0.02)
        return None

    def client(self, kind, index):
        n = 0
        while not self.stop.is_set():
            n += 1
            started = time.monotonic()
            outcome, detail = one_request(self.port, kind, f"{kind}-{index}-{n}")
            self.records.append((kind, started, time.monotonic(), outcome, detail))
            if outcome != "ok":
                self.stop.wait(RETRY_PAUSE)


def one_request(port, kind, tag):
    stream = kind == "stream"
    text = f"{SLOW_MARK} {tag}" if stream else f"ping {tag}"
    body = json.dumps({"model": MODEL, "stream": stream,
                       "messages": [{"role": "user", "content": text}]})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=CONNECT_TIMEOUT)
    try:
        conn.connect()
    except OSError as e:
        conn.close()
        return "refused", f"{type(e).__name__}: {e}"
    started_stream = False
    try:
        conn.sock.settimeout(READ_TIMEOUT)
        conn.request("POST", "/v1/chat/completions", body, {
            "Authorization": f"Bearer {KEY}", "Content-Type": "application/json",
            "Connection": "close"})
        resp = conn.getresponse()
        if resp.status != 200:
            return "failed", f"HTTP {resp.status}: {resp.read(300)!r}"
        if not stream:
            doc = json.loads(resp.read())
            if not doc["choices"][0]["message"]["content"]:
                return "failed", "an answer without content"
            return "ok", None
        started_stream = True
        chunks = 0
        while True:
            line = resp.readline()
            if not line:
                return "broken", f"the stream ended after {chunks} chunks without [DONE]"
            if line.strip() == b"data: [DONE]":
                return "ok", None
            if line.startswith(b"data: "):
                chunks += 1
    except (OSError, http.client.HTTPException, ValueError, KeyError, IndexError, TypeError) as e:
        return ("broken" if started_stream else "failed"), f"{type(e).__name__}: {e}"
    finally:
        conn.close()


def healthy(port, timeout=2.0):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", "/health", headers={"Connection": "close"})
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


# ---- the setups ----------------------------------------------------------------------------

def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def make_home(root, port, upstream_port, engine):
    """HOME and HERMES_HOME under `root`: the API server on 127.0.0.1:`port` with KEY, the
    model a custom provider at the stub, nothing fetched from the network (tirith off), and
    `gateway.engine` when `engine` is given (`original`: none, the agent's own gateway)."""
    hh = os.path.join(root, "hermes_home")
    write(os.path.join(hh, ".env"),
          f"API_SERVER_ENABLED=true\nAPI_SERVER_HOST=127.0.0.1\nAPI_SERVER_PORT={port}\n"
          f"API_SERVER_KEY={KEY}\n")
    gateway = "" if engine == "original" else f"  engine: {engine}\n"
    if engine != "native":
        # The agent's own respawn-storm breaker off (`max_starts: 0`): with it, the 6th start
        # within 120 s sleeps 10 s first, whoever supervises; this measures the restarts.
        gateway += "  respawn_storm:\n    max_starts: 0\n"
    write(os.path.join(hh, "config.yaml"),
          "gateway:\n" + gateway
          + f"model:\n  default: {MODEL}\n  provider: custom\n"
          f"  base_url: http://127.0.0.1:{upstream_port}/v1\n  api_key: upstream-key\n"
          # Without it the agent asks openrouter.ai for the context window.
          "  context_length: 131072\n"
          # Without it the agent downloads the `tirith` scanner at start.
          "security:\n  tirith_enabled: false\n")
    write(os.path.join(hh, "SOUL.md"), "You are a terse benchmark assistant.\n")
    os.makedirs(os.path.join(root, "home"), exist_ok=True)
    return dict(os.environ, HOME=os.path.join(root, "home"), HERMES_HOME=hh)


def run_quiet(argv, env, timeout):
    """(exit status, output) of a short command; (None, why) when it could not finish."""
    try:
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
        return p.returncode, (p.stdout + p.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{type(e).__name__}: {e}"


class HermesUp:
    """`hermes up` with the default profile's gateway of `engine`; restarts with `hermes
    gateway restart`, the gateway's pid from `hermes service status --json`."""

    def __init__(self, name, engine, root, port, upstream_port):
        self.name, self.engine, self.root, self.port = name, engine, root, port
        self.env = make_home(root, port, upstream_port, engine)
        # The dashboard off, as in the container by default: a program, not supervision.
        self.env.update(HERMES_DASHBOARD="0", HERMES_RUNTIME_DIR=os.path.join(root, "run"))
        if engine == "agent":
            self.env["HERMES_AGENT_CLI"] = AGENT
        else:
            self.env.pop("HERMES_AGENT_CLI", None)
        self.log_path = os.path.join(root, "up.log")
        self.proc = None

    def start(self):
        with open(self.log_path, "ab") as out:
            self.proc = common.spawn([HERMES, "up"], env=self.env, cwd=self.root, stdout=out,
                                     stderr=subprocess.STDOUT)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def pid(self):
        rc, out = run_quiet([HERMES, "service", "status", "gateway-default", "--json"],
                            self.env, 10)
        try:
            row = json.loads(out)[0] if rc == 0 else {}
        except (ValueError, IndexError, KeyError):
            return None
        return row.get("pid") if row.get("state") == "up" else None

    def restart(self):
        return run_quiet([HERMES, "gateway", "restart"], self.env, BACK_TIMEOUT)

    def stop(self):
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass

    def hook_serving(self):
        """Whether the agent served the supervisor's socket (the hook says so in its log)."""
        if self.engine != "agent":
            return None
        return "serving the supervisor's socket" in common.tail(self.log_path, 10**7)


class S6Original:
    """hermes-agent's own `hermes gateway run --replace` under `s6-supervise`, with the run
    script the original image writes (hermes_cli/service_manager.py: HERMES_S6_SUPERVISED_CHILD,
    --replace); restarts with `s6-svc -t` as its `hermes gateway restart` does."""

    def __init__(self, name, root, port, upstream_port):
        self.name, self.engine, self.root, self.port = name, "original", root, port
        self.env = make_home(root, port, upstream_port, "original")
        self.svc = os.path.join(root, "svc", "gateway-default")
        write(os.path.join(self.svc, "run"),
              "#!/bin/sh\nexport HERMES_S6_SUPERVISED_CHILD=1 PYTHONUNBUFFERED=1\n"
              f"cd {self.env['HOME']}\nexec {AGENT} gateway run --replace 2>&1\n", 0o755)
        self.log_path = os.path.join(root, "s6.log")
        self.proc = None

    def start(self):
        with open(self.log_path, "ab") as out:
            self.proc = common.spawn(["s6-supervise", self.svc], env=self.env, cwd=self.root,
                                     stdout=out, stderr=subprocess.STDOUT)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def pid(self):
        rc, out = run_quiet(["s6-svstat", "-o", "up,pid", self.svc], self.env, 10)
        parts = out.split() if rc == 0 else []
        if len(parts) == 2 and parts[0] == "true" and parts[1].isdigit():
            return int(parts[1])
        return None

    def restart(self):
        return run_quiet(["s6-svc", "-t", self.svc], self.env, 10)

    def stop(self):
        if self.alive():
            run_quiet(["s6-svc", "-dx", self.svc], self.env, 10)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass

    def hook_serving(self):
        return None


# ---- one row -------------------------------------------------------------------------------

def wait_serving(setup, old_pid, deadline):
    """The gateway's pid once a process other than `old_pid` is up and /health answers."""
    while time.monotonic() < deadline and setup.alive():
        pid = setup.pid()
        if pid and pid != old_pid and healthy(setup.port):
            return pid
        time.sleep(0.05)
    return None


def socket_passed(pid):
    """Whether the process was started with sockets passed (LISTEN_FDS in the environment it
    was started with: /proc keeps that block even after the variable is unset)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return any(v.startswith(b"LISTEN_FDS=") for v in f.read().split(b"\0"))
    except OSError:
        return None


def run_row(setup, restarts):
    log(f"{setup.name}: starting")
    setup.start()
    res = {"engine": setup.engine}
    load = None
    try:
        t0 = time.monotonic()
        pid = wait_serving(setup, None, t0 + BACK_TIMEOUT)
        if pid is None:
            res["error"] = f"the gateway did not serve within {BACK_TIMEOUT:.0f} s"
            return res
        res["seconds_to_first_serving"] = round(time.monotonic() - t0, 2)
        # One chat first, so the baseline is the steady state: the agent's first answer
        # takes seconds (imports, caches) where the next ones take a fraction of one.
        t1 = time.monotonic()
        res["warmup"] = dict(zip(("outcome", "detail"), one_request(setup.port, "plain", "warmup")),
                             seconds=round(time.monotonic() - t1, 2))
        load = Load(setup.port)
        load.start()
        load_start = time.monotonic()
        time.sleep(BASELINE)
        events, last = [], None
        for kind in ["restart"] * restarts + ["kill"] * restarts:
            if last is not None:
                time.sleep(max(0.0, last["at"] + SPACING - time.monotonic(),
                               last["answering_at"] + SETTLE_AFTER_BACK - time.monotonic()))
            pid = wait_serving(setup, None, time.monotonic() + BACK_TIMEOUT)
            if pid is None:
                res["error"] = f"the gateway was not serving before {kind} {len(events) + 1}"
                break
            at = time.monotonic()
            ev = {"kind": kind, "at": at, "pid": pid, "socket_passed": socket_passed(pid)}
            if kind == "restart":
                rc, out = setup.restart()
                ev["command_seconds"] = round(time.monotonic() - at, 3)
                if rc != 0:
                    ev["command_error"] = f"exit {rc}: {out[-500:]}"
            else:
                os.kill(pid, signal.SIGKILL)
            new = wait_serving(setup, pid, at + BACK_TIMEOUT)
            ev["new_pid"] = new
            back = time.monotonic()
            ev["back_seconds"] = round(back - at, 3) if new else None
            # The next event hits a gateway that answers chats again, not one still warming
            # up (the agent's first answers after a start take seconds): a chat sent once the
            # new process serves, so the old one (which may answer during its stop) does not
            # count.
            answered = load.first_answer_sent_after(back, at + BACK_TIMEOUT) if new else None
            ev["answering_at"] = answered or time.monotonic()
            ev["answering_seconds"] = round(answered - at, 3) if answered else None
            events.append(ev)
            log(f"  {kind} {sum(e['kind'] == kind for e in events)}: serving after "
                f"{ev['back_seconds']} s, answering after {ev['answering_seconds']} s"
                f"{' ' + ev['command_error'] if 'command_error' in ev else ''}")
            if ev["answering_seconds"] is None:
                res["error"] = (f"the gateway did not answer a chat again within "
                                f"{BACK_TIMEOUT:.0f} s after a {kind}")
                break
            last = ev
        time.sleep(BASELINE)
        load_end = time.monotonic()  # no new request from here: the window's end
        load.finish()
        res.update(account(load.records, load_start, load_end, events))
    finally:
        if load is not None:
            load.stop.set()
        setup.stop()
        hook = setup.hook_serving()
        if hook is not None:
            res["hook_served_the_socket"] = hook
        if "error" in res:
            res["log_tail"] = common.tail(setup.log_path, 3000)
    return res


def account(records, load_start, load_end, events):
    """Each request goes to the window its end falls in: before the first event (baseline),
    or from one event to the next (the last until the load ends)."""
    bounds = [e["at"] for e in events] + [load_end]
    windows = [{"from": load_start, "to": bounds[0]}] + [
        {"from": e["at"], "to": bounds[i + 1]} for i, e in enumerate(events)]
    for w in windows:
        w.update(sent=0, ok=0, refused=0, failed=0, broken=0, plain_ok_ends=[], slowest=0.0)
    samples = {}
    for kind, started, ended, outcome, detail in records:
        w = next((w for w in reversed(windows) if ended >= w["from"]), windows[0])
        w["sent"] += 1
        w[outcome] += 1
        if outcome == "ok" and kind == "plain":
            w["plain_ok_ends"].append(ended)
            w["slowest"] = max(w["slowest"], ended - started)
        if outcome != "ok" and len(samples.setdefault(outcome, [])) < 5:
            samples[outcome].append(f"{kind} {ended - load_start:.2f}s: {detail}")
    # The longest time without a plain answer (by end time) touching each window, the one
    # across its start included: the pause clients saw.
    ends = sorted(t for w in windows for t in w["plain_ok_ends"])
    for w in windows:
        pause, began, prev, closed = 0.0, w["from"], load_start, False
        for t in ends:
            if t <= w["from"]:
                prev = t
                continue
            if prev >= w["to"]:
                closed = True
                break
            if t - prev > pause:
                pause, began = t - prev, prev
            prev = t
        if not closed and w["to"] - prev > pause:  # no answer after the last one
            pause, began = w["to"] - prev, prev
        w["longest_pause"], w["pause_began"] = pause, began - w["from"]
    out_events = []
    for e, w in zip(events, windows[1:]):
        out_events.append({
            "kind": e["kind"], "at_s": round(e["at"] - load_start, 3),
            "socket_passed": e["socket_passed"],
            "command_seconds": e.get("command_seconds"), "command_error": e.get("command_error"),
            "back_seconds": e["back_seconds"], "answering_seconds": e["answering_seconds"],
            "sent": w["sent"], "ok": w["ok"],
            "refused": w["refused"], "failed": w["failed"], "broken": w["broken"],
            "longest_pause_s": round(w["longest_pause"], 3),
            "pause_began_s": round(w["pause_began"], 3),
            "slowest_answer_s": round(w["slowest"], 3)})
    b = windows[0]
    baseline = {"seconds": round(b["to"] - b["from"], 2), "sent": b["sent"], "ok": b["ok"],
                "refused": b["refused"], "failed": b["failed"], "broken": b["broken"],
                "longest_pause_s": round(b["longest_pause"], 3),
                "slowest_answer_s": round(b["slowest"], 3)}
    summary = {kind: summarise([e for e in out_events if e["kind"] == kind])
               for kind in ("restart", "kill")}
    passed = {e["socket_passed"] for e in out_events}
    return {"socket_passed": passed.pop() if len(passed) == 1 else "some",
            "baseline": baseline, "events": out_events, "summary": summary,
            "load_seconds": round(load_end - load_start, 2), "error_samples": samples}


FIELDS = ("sent", "refused", "failed", "broken", "longest_pause_s", "slowest_answer_s",
          "answering_seconds")


def summarise(events):
    if not events:
        return {"events": 0}
    out = {"events": len(events)}
    for f in FIELDS + ("back_seconds",):
        values = [e[f] for e in events if e[f] is not None]
        out[f"median_{f}"] = median(values)
        if f in ("sent", "refused", "failed", "broken"):
            out[f"total_{f}"] = sum(values)
    out["total_lost"] = sum(e["refused"] + e["failed"] + e["broken"] for e in events)
    return out


def median(values):
    v = sorted(values)
    if not v:
        return None
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


# ---- the run -------------------------------------------------------------------------------

ROW_LABELS = {
    "native": "ours, native engine (`hermes up`)",
    "agent": "ours, agent engine (`hermes up`, hermes-agent + socket hook)",
    "original": "the original under s6 (`s6-supervise`, hermes-agent)",
}


def sweep(spared):
    """SIGKILL every process of this run but `spared` (the gateways run in sessions of their
    own, so no process group reaches them); returns the command lines of those it found."""
    mark = f"{MARK_VAR}={os.environ.get(MARK_VAR, '')}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in spared:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if mark not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/cmdline", "rb") as f:
                found.append(f.read().replace(b"\0", b" ").decode(errors="replace").strip())
            os.kill(int(name), signal.SIGKILL)
        except OSError:
            continue
    return found


def start_upstream():
    proc = common.spawn([sys.executable, os.path.abspath(__file__), "upstream"],
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        common.stop_group(proc, timeout=5)
        sys.exit(f"error: the stub upstream said {line!r}")
    return proc, int(line.split()[1])


def main(argv):
    global HERMES, AGENT
    HERMES, AGENT, work, out_dir, restarts, rows, repo, command = argv
    restarts, rows = int(restarts), [r for r in rows.split(",") if r]
    unknown = [r for r in rows if r not in ROW_LABELS]
    if unknown:
        sys.exit(f"error: unknown rows {unknown}; hint: ROWS takes {','.join(ROW_LABELS)}")
    started = time.monotonic()
    upstream, upstream_port = start_upstream()
    spared = {os.getpid(), os.getppid(), upstream.pid}
    results = {}
    try:
        for name in rows:
            root = os.path.join(work, name)
            os.makedirs(root)
            port = common.free_port()
            setup = (S6Original(name, root, port, upstream_port) if name == "original"
                     else HermesUp(name, name, root, port, upstream_port))
            results[name] = run_row(setup, restarts)
            left = sweep(spared)
            if left:
                results[name]["left_after_stop"] = left
            if "error" in results[name]:
                log(f"{name}: {results[name]['error']}")
    finally:
        common.stop_group(upstream, timeout=5)
    doc = {
        "benchmark": "requests-lost-per-gateway-restart",
        "command": command,
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "run_seconds": round(time.monotonic() - started),
        "machine": common.machine(),
        "versions": versions(repo),
        "settings": {"restarts": restarts, "kills": restarts, "plain_clients": PLAIN_CLIENTS,
                     "stream_clients": STREAM_CLIENTS, "stream_chunks": STREAM_CHUNKS,
                     "stream_gap_s": STREAM_GAP, "spacing_s": SPACING,
                     "settle_after_back_s": SETTLE_AFTER_BACK, "baseline_s": BASELINE,
                     "retry_pause_s": RETRY_PAUSE, "connect_timeout_s": CONNECT_TIMEOUT,
                     "read_timeout_s": READ_TIMEOUT},
        "rows": {name: dict(label=ROW_LABELS[name], **res) for name, res in results.items()},
    }
    roles = {work: "$WORK", os.path.dirname(os.path.dirname(AGENT)): "$VENV", repo: "$REPO"}
    common.write_scrubbed(doc, os.path.join(out_dir, "results.json"), roles)
    table = markdown_table(doc["rows"])
    print(table)
    with open(os.path.join(out_dir, "RESULTS.md"), "w") as f:
        f.write(results_md(doc, table))


def versions(repo):
    def dpkg(pkg):
        return run_quiet(["dpkg-query", "-W", "-f=${Version}", pkg], None, 10)[1] or "unknown"

    agent_python = os.path.join(os.path.dirname(AGENT), "python")
    return {
        "hermes": common.first_line([HERMES, "--version"]),
        "commit": common.git_commit(repo),
        "hermes_agent": run_quiet([agent_python, "-c", "import importlib.metadata as m; "
                                   "print(m.version('hermes-agent'))"], None, 30)[1],
        "agent_python": run_quiet([agent_python, "--version"], None, 10)[1],
        "s6": dpkg("s6"),
    }


def cell(s, field):
    """`median (total)` of a count over the events of one kind; the median alone otherwise."""
    m = s.get(f"median_{field}")
    if m is None:
        return "n/a"
    m = f"{m:g}" if field in ("sent", "refused", "failed", "broken") else f"{m:.2f}"
    total = s.get(f"total_{field}")
    return m if total is None else f"{m} ({total})"


def markdown_table(rows):
    lines = [
        "| setup | event | n | requests sent | refused | failed | streams broken | longest pause, s | slowest answer, s | answering again after, s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        if "summary" not in r:
            lines.append(f"| {r['label']} | - | 0 | {r.get('error', 'no result')} | | | | | | |")
            continue
        b = r["baseline"]
        lines.append(f"| {r['label']} | none ({b['seconds']:.0f} s before the first) | - | "
                     f"{b['sent']} | {b['refused']} | {b['failed']} | {b['broken']} | "
                     f"{b['longest_pause_s']:.2f} | {b['slowest_answer_s']:.2f} | - |")
        for kind in ("restart", "kill"):
            s = r["summary"][kind]
            if not s.get("events"):
                continue
            lines.append(f"| {r['label']} | {kind} | {s['events']} | " + " | ".join(
                cell(s, f) for f in FIELDS) + " |")
        if "error" in r:
            lines.append(f"| {r['label']} | error | | {r['error']} | | | | | | |")
    lines.append("")
    lines.append(wrap("Per event: median over the events of that kind, the total over them "
                      "in parentheses. A request counts in the window (event to next event) "
                      "its end falls in; `none` is the same load before the first event."))
    return "\n".join(lines)


def results_md(doc, table):
    m, v, s = doc["machine"], doc["versions"], doc["settings"]
    ms = lambda seconds: f"{seconds * 1000:.0f} ms"  # noqa: E731
    took = f" in {doc['run_seconds'] / 60:.1f} minutes" if "run_seconds" in doc else ""
    paragraphs = [
        f"Run on: {m['cpus']} CPUs ({m['cpu_model']}), Linux {m['kernel']} {m['arch']}, shared "
        f"with other work (load average after the run "
        f"{', '.join(map(str, m['loadavg_after_run']))}); generated {doc['generated_at']} by "
        f"bench/restarts/run.sh{took}. Hermes: `{v['hermes']}` (commit `{v['commit']}`, release "
        f"build). Agent: hermes-agent {v['hermes_agent']} on {v['agent_python']}. "
        f"s6 {v['s6']} (Debian).",
        "Reproduce (installs s6 and the venv when missing, builds the release binary, rewrites "
        "this file and [`results.json`](results.json)):",
        f"```sh\n{doc['command']}\n```",
        "## What is measured",
        "One run, side by side, everything on loopback. Each setup serves the default "
        "profile's API server on its own port, the model a stub provider (`harness.py "
        f"upstream`) that answers a chat at once, or streams {s['stream_chunks']} chunks "
        f"{ms(s['stream_gap_s'])} apart to a chat marked slow. Under constant load "
        f"({s['plain_clients']} clients sending plain chat completions, {s['stream_clients']} "
        f"reading slow streamed chats of about {s['stream_chunks'] * s['stream_gap_s']:.0f} s, "
        "every request on a new connection, back to back; after a failed request a client "
        f"tries again {ms(s['retry_pause_s'])} later, so a refusing port is counted about every "
        f"{ms(s['retry_pause_s'])} per client) the gateway is restarted {s['restarts']} times, "
        f"then killed (SIGKILL) {s['kills']} times. Each event comes once the gateway answers "
        "chats again (a new pid up, `GET /health` 200, then a chat sent after that answered), "
        f"at least {s['spacing_s']:.0f} s after the previous event and "
        f"{s['settle_after_back_s']:.0f} s after that answer. The agent's own respawn-storm "
        "breaker is off in both agent setups (`gateway.respawn_storm.max_starts: 0`; by "
        "default its 6th start within 120 s first sleeps 10 s, whoever supervises it).",
        "* **ours, native engine**: `hermes up`, the default profile's native gateway; restart: "
        "`hermes gateway restart` (meant to be a hand-over on the API socket the supervisor "
        "holds: the new gateway ready, then the old one drains); kill: `kill -9` of the pid "
        "from `hermes service status gateway-default --json`.",
        "* **ours, agent engine**: the same with `gateway.engine: agent` and "
        "`HERMES_AGENT_CLI` at the venv's `hermes`, the socket hook installed in the venv by "
        "docker/agent-site.sh (the agent serves the supervisor's socket; a restart is "
        "stop-then-start while connections wait in the socket's backlog).",
        "* **the original under s6**: hermes-agent's own `hermes gateway run --replace` under "
        "`s6-supervise`, with the run script the original image writes "
        "(`HERMES_S6_SUPERVISED_CHILD=1`); restart: `s6-svc -t` (what its `hermes gateway "
        "restart` sends under s6); kill: `kill -9` of the pid from `s6-svstat`.",
        "Counted per request: **refused** (the connect failed or took over "
        f"{s['connect_timeout_s']:.0f} s), **failed** (connected, but no complete answer: an "
        f"error status, a reset, a timeout of {s['read_timeout_s']:.0f} s), **streams broken** "
        "(a stream that began and ended before `data: [DONE]`). **Longest pause**: the longest "
        "time without a plain answer arriving (by end time) that touches the window: what a "
        "client saw of the outage. **Slowest answer**: the longest plain request that "
        "succeeded in the window (one that waited in the backlog through a restart). "
        "**Answering again after**: from the event until the first plain request sent after "
        "the new process served (`GET /health` 200 from a new pid; that moment is "
        "`back_seconds` in results.json) was answered.",
        "## Results",
        table,
    ]
    for name, r in doc["rows"].items():
        if "socket_passed" in r and r["engine"] != "original":
            said = {True: "was", False: "was NOT", "some": "was for some events"}
            line = (f"`{name}`: the gateway {said.get(r['socket_passed'], 'was ?')} started "
                    "with the supervisor's sockets (LISTEN_FDS in its environment)")
            if r.get("hook_served_the_socket") is not None:
                line += (", and the agent's hook "
                         f"{'served' if r['hook_served_the_socket'] else 'did NOT serve'} it "
                         "(its log line)")
            paragraphs.append("* " + line + ".")
        if "error" in r:
            paragraphs.append(f"* `{name}` stopped early: {r['error']}.")
    text = "# Requests lost per gateway restart and per crash"
    for i, p in enumerate(paragraphs):
        # A bullet right after a bullet continues its list; anything else is a new block.
        bullet_run = p.startswith("* ") and i and paragraphs[i - 1].startswith("* ")
        text += ("\n" if bullet_run else "\n\n") + (
            p if p.startswith(("```", "|", "#")) or "\n|" in p else wrap(p))
    return text + "\n"


def wrap(paragraph):
    bullet = paragraph.startswith("* ")
    return textwrap.fill(paragraph, width=96, subsequent_indent="  " if bullet else "",
                         break_on_hyphens=False, break_long_words=False)


if __name__ == "__main__":
    if sys.argv[1:2] == ["upstream"]:
        serve_upstream()
    elif sys.argv[1:2] == ["run"] and len(sys.argv) == 10:
        main(sys.argv[2:])
    else:
        sys.exit(__doc__)
