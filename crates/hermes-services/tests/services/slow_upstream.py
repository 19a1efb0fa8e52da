"""A slow OpenAI-compatible provider for the agent hook's drain test (stdlib only).

Usage: slow_upstream.py DELAY_SECONDS RECORD_FILE

Listens on 127.0.0.1 on a free port and prints `PORT <n>` once it is ready. Every
`POST .../chat/completions` appends its path as one line to RECORD_FILE (so the test knows the
request is in flight), waits DELAY_SECONDS, then answers `echo: <last user message>`, as
one JSON `chat.completion` or, with `"stream": true`, as SSE chunks ending with `[DONE]`. The
delay keeps an agent's API request in flight long enough to stop the agent under it. Runs until
it is killed: the test owns it.
"""

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def answer_text(body):
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            return "echo: " + str(content)
    return "echo: (no user message)"


class Handler(BaseHTTPRequestHandler):
    # Every answer ends by closing the connection: the simplest framing for an SSE body.
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):
        sys.stderr.write("slow-upstream: " + (fmt % args) + "\n")

    def send_json(self, status, doc):
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.send_json(200, {"object": "list", "data": []})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self.send_json(404, {"error": {"message": "not found", "type": "not_found"}})
            return
        with open(RECORD, "a", encoding="utf-8") as f:
            f.write(self.path + "\n")
        time.sleep(DELAY)
        text = answer_text(body)
        base = {"id": "chatcmpl-slow", "created": int(time.time()), "model": body.get("model", "")}
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        if not body.get("stream"):
            message = {"role": "assistant", "content": text}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            self.send_json(200, dict(base, object="chat.completion", choices=[choice], usage=usage))
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for delta, finish in (({"role": "assistant", "content": text}, None), ({}, "stop")):
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            doc = dict(base, object="chat.completion.chunk", choices=[choice])
            if finish:
                doc["usage"] = usage
            self.wfile.write(b"data: " + json.dumps(doc).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


if __name__ == "__main__":
    DELAY = float(sys.argv[1])
    RECORD = sys.argv[2]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print("PORT", server.server_address[1], flush=True)
    server.serve_forever()
