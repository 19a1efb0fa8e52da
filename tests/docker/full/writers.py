"""Clients writing sessions through a gateway for the torture scenario, until the file STOP
exists or the container dies under them: CLIENTS threads, each its own session
(`torture-<k>`), every turn with unique words (`<RUN>-c<k>-t<n>`, one in three streamed). Each
turn the client saw acknowledged — a plain 200 with an answer, or a stream that ended with
`[DONE]` and no error event — is appended to ACKED at once (a line, flushed), so a container
killed a moment later keeps the record of what its clients were told.

    python3 writers.py PORT KEY ACKED STOP RUN [CLIENTS]
"""

import http.client
import json
import os
import sys
import threading
import time

port, key, acked_path, stop, run = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
clients = int(sys.argv[6]) if len(sys.argv) > 6 else 4
lock = threading.Lock()
acked = open(acked_path, "a", buffering=1)


def turn(session, words, stream):
    body = json.dumps({"model": "stub", "stream": stream, "messages": [{"role": "user", "content": words}]})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", "/v1/chat/completions", body=body, headers={
            "Authorization": "Bearer " + key, "X-Hermes-Session-Id": session,
            "Content-Type": "application/json", "Connection": "close"})
        response = conn.getresponse()
        text = response.read().decode("utf-8", "replace")
    finally:
        conn.close()
    if response.status != 200 or '"error"' in text:
        return False
    return "data: [DONE]" in text if stream else '"choices"' in text


def client(k):
    n = 0
    while not os.path.exists(stop):
        n += 1
        words = "%s-c%d-t%d" % (run, k, n)
        try:
            ok = turn("torture-%d" % k, words, n % 3 == 0)
        except Exception:  # refused, reset, cut: never acknowledged
            ok = False
        if ok:
            with lock:
                acked.write(words + "\n")
        else:
            time.sleep(0.05)


threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
