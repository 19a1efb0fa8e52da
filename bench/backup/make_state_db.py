"""Writes a state.db of about SIZE_MB megabytes the way the original (hermes-agent 0.19) lays
it out: the database and its schema are made by the original's own SessionDB (hermes_state.py:
sessions, messages, the two FTS5 indexes of messages and their triggers, WAL mode), then filled
with conversations through plain INSERTs into its tables (its triggers index every message, as
they do for the rows its CLI and gateway write). Run with the ORIGINAL package's interpreter:

    <venv>/bin/python make_state_db.py PATH SIZE_MB

The text is made of words drawn from a fixed vocabulary with Zipf-like frequencies (seeded, so
every run writes the same rows): it compresses about as well as chat transcripts do, where
random bytes would not compress at all. Each session holds 20 turns (a user message of a few
sentences, an assistant answer of a few paragraphs, now and then a code block).
"""

import itertools
import os
import random
import sqlite3
import sys
import time
from pathlib import Path

path, size_mb = sys.argv[1], int(sys.argv[2])
target = size_mb * 1024 * 1024
os.environ.setdefault("HERMES_HOME", str(Path(path).parent))
from hermes_state import SessionDB  # noqa: E402

rng = random.Random(20260801)
letters = "etaoinshrdlcumwfgypbvkjxqz"
weights_l = [12.7, 9.1, 8.2, 7.5, 7.0, 6.7, 6.3, 6.1, 6.0, 4.3, 4.0, 2.8, 2.8, 2.4, 2.4, 2.2, 2.0,
             2.0, 1.9, 1.5, 1.0, 0.8, 0.2, 0.2, 0.1, 0.1]
vocab = sorted({"".join(rng.choices(letters, weights_l, k=rng.randint(2, 9))) for _ in range(6000)})
rng.shuffle(vocab)
cum = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(vocab))))


def sentence(words):
    w = rng.choices(vocab, cum_weights=cum, k=words)
    return w[0].capitalize() + " " + " ".join(w[1:]) + rng.choice(".....?!")


def paragraph(sentences):
    return " ".join(sentence(rng.randint(6, 18)) for _ in range(sentences))


def code_block():
    lines = [f"    {rng.choice(vocab)}_{rng.choice(vocab)} = {rng.choice(vocab)}({rng.randint(0, 999)})"
             for _ in range(rng.randint(4, 16))]
    return "```python\ndef " + rng.choice(vocab) + "():\n" + "\n".join(lines) + "\n```"


db = SessionDB(Path(path))
db.close()
con = sqlite3.connect(path)
con.execute("PRAGMA synchronous = OFF")
models = ["gpt-4.1-mini", "openai/gpt-4o-mini", "claude-sonnet-4", "stub-model"]
sources = ["cli", "api_server", "telegram", "discord"]
t0 = time.time()
now = time.time() - 400 * 86400
sessions = messages = 0
while True:
    con.execute("BEGIN")
    for _ in range(50):
        sid = f"{time.strftime('%Y%m%d_%H%M%S', time.gmtime(now))}_{rng.getrandbits(24):06x}"
        con.execute(
            "INSERT INTO sessions (id, source, model, started_at, ended_at, message_count, "
            "input_tokens, output_tokens, title) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)",
            (sid, rng.choice(sources), rng.choice(models), now, now + 600, 40,
             rng.randint(1000, 90000), rng.randint(500, 30000)),
        )
        rows = []
        for turn in range(20):
            ts = now + turn * 30
            user = paragraph(rng.randint(1, 4))
            answer = "\n\n".join(paragraph(rng.randint(2, 6)) for _ in range(rng.randint(1, 4)))
            if rng.random() < 0.25:
                answer += "\n\n" + code_block()
            rows.append((sid, "user", user, ts, len(user) // 4, None))
            rows.append((sid, "assistant", answer, ts + 5, len(answer) // 4, "stop"))
        con.executemany(
            "INSERT INTO messages (session_id, role, content, timestamp, token_count, finish_reason) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        sessions += 1
        messages += len(rows)
        now += 1800
    con.execute("COMMIT")
    if os.path.getsize(path) + os.path.getsize(path + "-wal") >= target:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if os.path.getsize(path) >= target:
            break
con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
con.close()
print(f"{path}: {os.path.getsize(path)} bytes, {sessions} sessions, {messages} messages, "
      f"built in {time.time() - t0:.0f} s")
