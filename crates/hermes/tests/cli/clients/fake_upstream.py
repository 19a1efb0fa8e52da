"""A fake OpenAI-compatible provider for the gateway client tests (stdlib only).

Usage: fake_upstream.py RECORD_FILE

Listens on 127.0.0.1 on a free port and prints `PORT <n>` on stdout once it is ready.
`POST /v1/chat/completions` answers `echo: <text of the last user message>`, either as one
JSON `chat.completion` or, with `"stream": true`, as SSE `chat.completion.chunk` events (a
role chunk, one chunk per word, a `finish_reason: "stop"` chunk) ending with
`data: [DONE]`.

Token usage is reported as providers do (see `usage_of` for the counts): in a plain answer's
`usage`; in a stream, when the request asks (`stream_options.include_usage`), as OpenAI does
(`"usage": null` on every chunk, then a last chunk with `"choices": []` and the usage), and
otherwise on the finish chunk anyway, as some providers do unasked. Every request is appended to RECORD_FILE as one JSON line
(`{"path", "authorization", "body"}`) before it is answered, so the test can check what the
gateway sent upstream (SOUL.md first, the configured model, the provider key, history).

The process runs until it is killed: the test owns it.
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RECORD_LOCK = threading.Lock()


def answer_text(body):
    """`echo: ` plus the content of the last user message, so tests can tell turns apart."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                content = " ".join(
                    part.get("text", "") for part in content if isinstance(part, dict)
                )
            return "echo: " + str(content)
    return "echo: (no user message)"


def usage_of(body, text):
    """Predictable counts: one prompt token per message, one completion token per word."""
    prompt = len(body.get("messages") or [])
    completion = len(text.split(" "))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


class Handler(BaseHTTPRequestHandler):
    # HTTP/1.0 semantics: every answer ends by closing the connection, which is the simplest
    # correct framing for an SSE body of unknown length.
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):
        sys.stderr.write("fake-upstream: " + (fmt % args) + "\n")

    def record(self, body):
        entry = {
            "path": self.path,
            "authorization": self.headers.get("Authorization"),
            "body": body,
        }
        with RECORD_LOCK, open(RECORD_FILE, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()

    def send_json(self, status, doc):
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.rstrip("/") == "/v1/models":
            self.send_json(200, {"object": "list", "data": []})
        else:
            self.send_json(404, {"error": {"message": "not found", "type": "not_found"}})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            self.send_json(400, {"error": {"message": "bad json", "type": "invalid_request_error"}})
            return
        self.record(body)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self.send_json(404, {"error": {"message": "not found", "type": "not_found"}})
            return
        text = answer_text(body)
        model = body.get("model", "")
        created = int(time.time())
        if not body.get("stream"):
            self.send_json(
                200,
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage_of(body, text),
                },
            )
            return

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()

        usage = usage_of(body, text)
        asked = (body.get("stream_options") or {}).get("include_usage") is True

        def send(doc):
            self.wfile.write(b"data: " + json.dumps(doc).encode() + b"\n\n")
            self.wfile.flush()

        def chunk(delta, finish_reason=None, chunk_usage=None):
            doc = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }
            if asked or chunk_usage is not None:
                doc["usage"] = chunk_usage
            send(doc)

        chunk({"role": "assistant", "content": ""})
        words = text.split(" ")
        for i, word in enumerate(words):
            chunk({"content": word if i == 0 else " " + word})
        if asked:
            chunk({}, "stop")
            send(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": usage,
                }
            )
        else:
            chunk({}, "stop", usage)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


if __name__ == "__main__":
    RECORD_FILE = sys.argv[1]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print("PORT", server.server_address[1], flush=True)
    server.serve_forever()
