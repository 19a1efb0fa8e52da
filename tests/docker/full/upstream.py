"""The stub model provider of the full-* scenarios, inside the container, on a fixed port.

Usage: upstream.py PORT RECORD_FILE CLIENTS_DIR

It serves the fake OpenAI-compatible provider of the gateway client tests
(CLIENTS_DIR/fake_upstream.py, from crates/hermes/tests/cli/clients: `echo: <last user message>`, plain or
streamed, every request appended to RECORD_FILE) on 127.0.0.1:PORT instead of a free port, so
the profile's config.yaml can name it before boot and it stays the same across `docker restart`.
"""

import sys
from http.server import ThreadingHTTPServer

if __name__ == "__main__":
    sys.path.insert(0, sys.argv[3])
    import fake_upstream

    port, fake_upstream.RECORD_FILE = int(sys.argv[1]), sys.argv[2]
    server = ThreadingHTTPServer(("127.0.0.1", port), fake_upstream.Handler)
    server.daemon_threads = True
    print("PORT", port, flush=True)
    server.serve_forever()
