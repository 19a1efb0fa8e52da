"""The dashboard side by side with the original's (`hermes dashboard` of hermes-agent), in one
run (bench/dashboard/run.sh drives it; not part of the test suite):

1. first screen: headless Chromium opens each dashboard's first page, signed in, waits until
   the network is quiet and sums `transferSize` of the document and every resource it loaded
   (Resource Timing), split into static files and API answers; resources from another origin
   are counted and named (there must be none);
2. `GET /api/status` under load: CLIENTS threads, each on its own keep-alive connection,
   request it back to back for SECONDS; p50/p99/max latency and requests per second. Ours runs
   under `hermes up` with SERVICES declared services (`sleep`) plus the default gateway, so
   every answer asks the supervisor about them over the control socket; the original's answer
   is its own status (its gateway state, from files) — it has no supervisor to ask;
3. memory of the dashboard process: RSS and PSS (smaps_rollup) idle after the first screen,
   and the peak RSS (VmHWM) after the load.
"""

import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gateway"))
import common  # noqa: E402

TOKEN = "bench-dashboard-token-0123456789abcdef"


def pss_kib(pid):
    """PSS and RSS of one process from smaps_rollup, in KiB."""
    out = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("Rss", "Pss"):
                    out[key.lower() + "_kib"] = int(value.split()[0])
    except OSError:
        pass
    return out


def process_memory(pid):
    st = common.status(pid) or {}
    return {
        **pss_kib(pid),
        "hwm_kib": common.kib(st, "VmHWM"),
        "threads": int(st.get("Threads", "0") or 0),
    }


class Driver:
    """Just enough WebDriver for one page: a session on Debian's chromedriver."""

    def __init__(self, workdir):
        self.port = common.free_port()
        self.proc = common.spawn(["chromedriver", f"--port={self.port}"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                self.call("GET", "/status")
                break
            except OSError:
                time.sleep(0.1)
        args = ["--headless=new", f"--user-data-dir={workdir}/chromium", "--no-first-run",
                "--disable-dev-shm-usage", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-extensions",
                "--window-size=1280,800"]
        if os.geteuid() == 0:
            args.append("--no-sandbox")
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome",
                                                 "goog:chromeOptions": {"args": args}}}}
        self.session = self.call("POST", "/session", caps)["sessionId"]

    def call(self, method, path, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        answer = json.loads(conn.getresponse().read() or b"{}")
        conn.close()
        return answer.get("value", answer)

    def page_weight(self, url, origin):
        """Opens `url`, waits for 1.5 s without a new resource, and returns the weights."""
        self.call("POST", f"/session/{self.session}/url", {"url": url})
        script = ("return performance.getEntriesByType('navigation')"
                  ".concat(performance.getEntriesByType('resource'))"
                  ".map(e => [e.name, e.transferSize, e.initiatorType]);")
        entries, last_change, count = [], time.time(), -1
        while time.time() - last_change < 1.5 and time.time() - last_change < 30:
            entries = self.call("POST", f"/session/{self.session}/execute/sync",
                                {"script": script, "args": []})
            if len(entries) != count:
                count, last_change = len(entries), time.time()
            time.sleep(0.2)
        static = api = 0
        foreign = []
        for name, size, _kind in entries:
            if not name.startswith(origin):
                foreign.append(name)
            if "/api/" in name:
                api += size
            else:
                static += size
        return {"static_bytes": static, "api_bytes": api, "resources": len(entries),
                "foreign": foreign, "names": sorted(n[len(origin):] for n, _, _ in entries)}

    def close(self):
        try:
            self.call("DELETE", f"/session/{self.session}")
        finally:
            common.stop_group(self.proc, timeout=10)


def load(port, path, headers, clients, seconds):
    """`clients` keep-alive connections requesting `path` back to back for `seconds`."""
    latencies, errors, lock = [], [], threading.Lock()
    stop = time.time() + seconds

    def worker():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine = []
        while time.time() < stop:
            t0 = time.perf_counter()
            try:
                conn.request("GET", path, headers=headers)
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    raise RuntimeError(f"status {r.status}")
            except Exception as e:  # noqa: BLE001 - every failure is counted, not fatal
                with lock:
                    errors.append(str(e))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                continue
            mine.append(time.perf_counter() - t0)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    latencies.sort()
    q = lambda p: latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000  # noqa: E731
    return {"requests": len(latencies), "errors": len(errors),
            "first_errors": errors[:3], "rps": round(len(latencies) / seconds, 1),
            "p50_ms": round(q(0.50), 2), "p99_ms": round(q(0.99), 2),
            "max_ms": round(latencies[-1] * 1000, 2)} if latencies else {"errors": len(errors), "first_errors": errors[:3]}


def wait_http(port, path, headers, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", path, headers=headers)
            if conn.getresponse().status == 200:
                return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def ours(args, work, driver):
    home = os.path.join(work, "ours")
    os.makedirs(home)
    services = "".join(f"  svc{i:02d}:\n    command: [sleep, '100000']\n"
                       for i in range(1, args.services + 1))
    with open(os.path.join(home, "config.yaml"), "w") as f:
        f.write("services:\n" + services)
    port = common.free_port()
    env = {"PATH": os.environ["PATH"], "HOME": work, "HERMES_HOME": home,
           "HERMES_AGENT_CLI": "", "HERMES_DASHBOARD": "1",
           "HERMES_DASHBOARD_PORT": str(port), "HERMES_DASHBOARD_SESSION_TOKEN": TOKEN,
           "HERMES_RUNTIME_DIR": os.path.join(work, "run")}
    if "MALLOC_ARENA_MAX" in os.environ:  # an allocator experiment, passed on when asked
        env["MALLOC_ARENA_MAX"] = os.environ["MALLOC_ARENA_MAX"]
    up = common.spawn([args.hermes, "up"], env=env, stdout=subprocess.DEVNULL,
                      stderr=open(os.path.join(work, "up.log"), "w"))
    try:
        headers = {"X-Hermes-Session-Token": TOKEN}
        if not wait_http(port, "/api/status", headers):
            raise SystemExit("our dashboard did not answer: " + common.tail(os.path.join(work, "up.log")))
        # Wait until every declared service is up, so the status has all rows.
        deadline = time.time() + 60
        while time.time() < deadline:
            rows = json.loads(urllib.request.urlopen(urllib.request.Request(
                f"http://127.0.0.1:{port}/api/status", headers=headers)).read())["services"]
            if sum(r["state"] == "up" for r in rows) >= args.services + 1:
                break
            time.sleep(0.5)
        out = subprocess.run([args.hermes, "service", "status", "dashboard", "--json"], env=env,
                             capture_output=True, text=True)
        pid = json.loads(out.stdout)[0]["pid"]
        origin = f"http://127.0.0.1:{port}"
        weight = driver.page_weight(f"{origin}/?token={TOKEN}", origin)
        time.sleep(1)
        idle = process_memory(pid)
        result = load(port, "/api/status", headers, args.clients, args.seconds)
        after = process_memory(pid)
        return {"rows": len(rows), "first_screen": weight, "idle": idle, "status_load": result,
                "after_load": after}
    finally:
        common.stop_group(up)


def original(args, work, driver):
    home = os.path.join(work, "original")
    os.makedirs(home)
    port = common.free_port()
    env = {"PATH": os.environ["PATH"], "HOME": work, "HERMES_HOME": home,
           "HERMES_DASHBOARD_SESSION_TOKEN": TOKEN}
    proc = common.spawn([args.agent, "dashboard", "--port", str(port), "--no-open",
                         "--skip-build", "--isolated"], env=env, stdout=subprocess.DEVNULL,
                        stderr=open(os.path.join(work, "original.log"), "w"))
    try:
        headers = {"X-Hermes-Session-Token": TOKEN}
        if not wait_http(port, "/api/status", headers, timeout=180):
            raise SystemExit("the original dashboard did not answer: " + common.tail(os.path.join(work, "original.log")))
        origin = f"http://127.0.0.1:{port}"
        weight = driver.page_weight(f"{origin}/", origin)
        time.sleep(1)
        # The server is the Python process listening on the port (the launcher may exec).
        pid = proc.pid
        idle = process_memory(pid)
        result = load(port, "/api/status", headers, args.clients, args.seconds)
        after = process_memory(pid)
        return {"first_screen": weight, "idle": idle, "status_load": result,
                "after_load": after, "processes": common.memory(pid)["names"]}
    finally:
        common.stop_group(proc)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--hermes", required=True)
    p.add_argument("--agent", help="the original's `hermes` (skipped when not given)")
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--services", type=int, default=20)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="hermes-bench-dashboard-")
    driver = Driver(work)
    try:
        doc = {"machine": common.machine(), "clients": args.clients,
               "services": args.services, "seconds": args.seconds,
               "ours": ours(args, work, driver)}
        if args.agent:
            doc["original"] = original(args, work, driver)
    finally:
        driver.close()
        shutil.rmtree(work, ignore_errors=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
