"""The torture scenario's checks, on the host, of a data directory the containers used.

    python3 integrity.py check DATA            every SQLite file (by its header, archives aside)
                                               through `PRAGMA integrity_check`; prints the bad
                                               ones, a line each, and exits 1 if any
    python3 integrity.py lost DATA ACKED...    the acknowledged turns (the ACKED files' lines)
                                               not in DATA/state.db; prints them and a count line
"""

import os
import sqlite3
import sys


def databases(root):
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "backups"]
        for name in files:
            path = os.path.join(directory, name)
            try:
                with open(path, "rb") as f:
                    if f.read(16) == b"SQLite format 3\0":
                        yield path
            except OSError:
                pass


def check(root):
    bad = 0
    for db in databases(root):
        try:
            conn = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=10)
            said = conn.execute("PRAGMA integrity_check").fetchone()[0]
            conn.close()
        except sqlite3.Error as e:
            said = str(e)
        if said != "ok":
            bad += 1
            print("%s: %s" % (db, said))
    return 1 if bad else 0


def lost(root, acked_files):
    conn = sqlite3.connect("file:%s?mode=ro" % os.path.join(root, "state.db"), uri=True, timeout=10)
    stored = {row[0] for row in conn.execute("SELECT content FROM messages WHERE role = 'user'")}
    acked = set()
    for path in acked_files:
        with open(path) as f:
            acked.update(line.strip() for line in f if line.strip())
    missing = sorted(acked - stored)
    for words in missing:
        print("lost: %s" % words)
    print("acknowledged %d lost %d" % (len(acked), len(missing)))
    return 1 if missing else 0


if __name__ == "__main__":
    what, root = sys.argv[1], sys.argv[2]
    sys.exit(check(root) if what == "check" else lost(root, sys.argv[3:]))
