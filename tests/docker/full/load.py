"""Constant load on a gateway's port for the restart scenarios: CLIENTS threads each sending
`GET PATH` on a new connection back to back until the file STOP exists, then one JSON line on
stdout: {"ok": N, "refused": N, "failed": N, "errors": [...first ten...]}.

    python3 load.py PORT PATH STOP [CLIENTS]

A refused connection is what a client meets when nobody holds the port; a request that waits in
the backlog while the next gateway starts is answered, however long it waits (60 s timeout).
"""

import http.client
import json
import os
import sys
import threading
import time

port, path, stop = int(sys.argv[1]), sys.argv[2], sys.argv[3]
clients = int(sys.argv[4]) if len(sys.argv) > 4 else 4
counts = {"ok": 0, "refused": 0, "failed": 0, "errors": []}
lock = threading.Lock()


def note(kind, error=None):
    with lock:
        counts[kind] += 1
        if error and len(counts["errors"]) < 10:
            counts["errors"].append("%s: %s" % (kind, error))


def client():
    while not os.path.exists(stop):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            conn.request("GET", path, headers={"Connection": "close"})
            status = conn.getresponse().status
            note("ok" if status == 200 else "failed", None if status == 200 else "HTTP %d" % status)
        except ConnectionRefusedError as e:
            note("refused", e)
        except Exception as e:  # a reset or a closed connection: in flight when it died
            note("failed", "%s: %s" % (type(e).__name__, e))
        finally:
            conn.close()
        time.sleep(0.01)


threads = [threading.Thread(target=client) for _ in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(counts))
