"""Compares a data directory before and after our image used it: what changed, and whether the
docs allow it. Used by tests/docker/original-volume.sh.

    python3 compare.py BEFORE AFTER UID:GID RAN_PROFILE...

BEFORE is a copy (cp -a) of the directory the original wrote, AFTER the directory itself after
our containers ran on it; RAN_PROFILE names the profiles whose gateway ran in our image.
Prints one line per change: `allowed: <path>: <change> (<why, with the doc>)` or
`UNEXPECTED: <path>: <change>; expected: ...; actual: ...`. Exit status 0 either way.

The allowed changes are exactly what the docs say boot and the services write on the volume:

  docs/container.md, "Boot order":
    stage 4  ownership repair: `.env` 0600 and `config.yaml` 0640 at the root (owner = the
             service user, which the original's files already are)
    stage 5  skeleton dirs at the root (the docs say only "skeleton dirs"; the list is
             crates/hermes-home/src/layout.rs SKELETON_DIRS + `profiles` + crates/hermes-init/
             src/boot.rs EXTRA_DIRS, the same as the original image's stage2) and first-boot seeds `.env`, `config.yaml`, `SOUL.md` at the root when missing;
             `API_SERVER_KEY=<64 hex>` appended to the root `.env` when it has no non-empty one
    stage 6  a root `.install_method` whose content is `docker` removed
    stage 7  stale `gateway.pid` / `processes.json` removed; `logs/container-boot.log` (and
             `.1`); gateway logs under `logs/gateways/<profile>/`, service logs under `logs/`
  docs/container.md, "What root writes on the volume", and docs/configuration.md,
  "gateway_state.json": a gateway that ran merges its record into its profile's
    `gateway_state.json` (every other key kept, `desired_state` untouched unless an operator
    started/stopped it, which this scenario does not do)
  docs/gateway.md: a gateway that ran holds `<home>/gateway.lock` and writes its JSON record
    into it ("Lifecycle", as the original's gateway does), and keeps its sessions in
    `<home>/state.db` ("Sessions": the original's own `sessions`/`messages` schema; a new one
    0600, with its -wal/-shm/-journal files; an existing one keeps its mode, and the
    original's tables and rows in it must stay as they were — a gateway that served no chat
    adds nothing)
  docs/gateway.md, "Lifecycle ledger": a gateway that ran claims `<home>/state/` and
    `<home>/state/gateway.lifecycle.json` (phase `running`, then `exited`), as the original's
  docs/configuration.md, "Concurrent writers": empty lock files next to the files written
    (`.env.lock`, `config.yaml.lock`, `auth.lock`, `gateway_state.json.lock`,
    `active_profile.lock`)
  docs/docker.md, "Upgrading from the original image": the same list, from the operator's side.
Anything else — a file rewritten, removed, added, re-moded or re-owned — is UNEXPECTED.
"""

import json
import os
import re
import shutil
import sqlite3
import stat
import sys
import tempfile

before_root, after_root, owner = sys.argv[1:4]
ran = set(sys.argv[4:])
uid, gid = (int(x) for x in owner.split(":"))

SKELETON = {"logs", "sessions", "memories", "skills", "cron", "plans", "workspace", "home", "profiles",
            "backups", "hooks", "skins", "pairing", "platforms", "platforms/pairing", "lazy-packages"}
STATE_DB = ("state.db", "state.db-wal", "state.db-shm", "state.db-journal")
SEEDS = {".env", "config.yaml", "SOUL.md"}
LOCKS = {".env.lock", "config.yaml.lock", "auth.lock", "gateway_state.json.lock", "active_profile.lock"}
ROOT_MODES = {".env": 0o600, "config.yaml": 0o640}
API_KEY_LINE = re.compile(rb"API_SERVER_KEY=[0-9a-f]{64}\n")


def tree(root):
    """relative path -> (kind, mode, uid, gid, bytes or None)"""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode):
                kind, data = "dir", None
            elif stat.S_ISREG(st.st_mode):
                kind = "file"
                with open(path, "rb") as f:
                    data = f.read()
            else:
                kind, data = "other", os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
            out[rel] = (kind, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, data)
    return out


def profile_of(rel):
    """(profile, path inside the profile home) for a path in the data directory."""
    parts = rel.split("/")
    if parts[0] == "profiles" and len(parts) >= 3:
        return parts[1], "/".join(parts[2:])
    return "default", rel


def short(data):
    text = data.decode("utf-8", "replace")
    text = "".join(ch if ch.isprintable() else "." for ch in text)
    return text if len(text) <= 300 else text[:300] + "…"


def rows(db_dir):
    """table -> sorted rows of a state.db (read from a copy, so nothing is written beside it)"""
    with tempfile.TemporaryDirectory() as tmp:
        for name in STATE_DB[:2]:
            if os.path.exists(os.path.join(db_dir, name)):
                shutil.copy(os.path.join(db_dir, name), tmp)
        con = sqlite3.connect(os.path.join(tmp, "state.db"))
        try:
            tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            return {t: sorted(map(repr, con.execute(f'SELECT * FROM "{t}"'))) for t in tables}
        finally:
            con.close()


before, after = tree(before_root), tree(after_root)
lines = []


def allowed(rel, change, why):
    lines.append(f"allowed: {rel}: {change} ({why})")


def unexpected(rel, change, expected, actual):
    lines.append(f"UNEXPECTED: {rel}: {change}; expected: {expected}; actual: {actual}")


for rel in sorted(set(before) | set(after)):
    b, a = before.get(rel), after.get(rel)
    profile, inner = profile_of(rel)
    top = "/" not in rel
    if a is None:
        if inner in ("gateway.pid", "processes.json"):
            allowed(rel, "removed", "stale runtime file, docs/container.md stage 7")
        elif rel == ".install_method" and b[4] is not None and b[4].strip() == b"docker":
            allowed(rel, "removed", "stale install stamp, docs/container.md stage 6")
        else:
            unexpected(rel, "removed", "left in place", "gone")
        continue
    if b is None:
        kind = a[0]
        if a[2:4] != (uid, gid):
            unexpected(rel, f"new {kind}", f"owned by {uid}:{gid}", f"owned by {a[2]}:{a[3]}")
        elif rel == "logs" or rel.startswith("logs/"):
            allowed(rel, f"new {kind}", "container-boot.log and service/gateway logs, docs/container.md stage 7")
        elif kind == "dir" and rel in SKELETON:
            allowed(rel, "new dir", "skeleton, docs/container.md stage 5")
        elif kind == "file" and top and rel in SEEDS:
            allowed(rel, "seeded (it was missing)", "first-boot seed, docs/container.md stage 5")
        elif kind == "file" and os.path.basename(rel) in LOCKS and a[4] == b"":
            allowed(rel, "new empty lock file", "docs/configuration.md, Concurrent writers")
        elif kind == "file" and inner == "gateway_state.json" and profile in ran:
            allowed(rel, "new", f"the record of gateway-{profile}, which ran")
        elif kind == "dir" and inner == "state" and profile in ran:
            allowed(rel, "new dir", f"gateway-{profile}'s lifecycle ledger, docs/gateway.md")
        elif kind == "file" and inner == "state/gateway.lifecycle.json" and profile in ran:
            try:
                phase = json.loads(a[4]).get("phase")
            except ValueError:
                phase = None
            if phase in ("running", "exited"):
                allowed(rel, f"new, phase {phase}", f"gateway-{profile}'s lifecycle ledger, docs/gateway.md")
            else:
                unexpected(rel, "new lifecycle ledger", '{"phase": "running"|"exited", ...}', short(a[4]))
        elif kind == "file" and inner in STATE_DB and profile in ran:
            # A new state.db is 0600; its -wal/-shm/-journal files get the database's mode.
            db = after.get(os.path.join(os.path.dirname(rel), "state.db"))
            want = 0o600 if inner == "state.db" or db is None else db[1]
            if a[1] == want:
                allowed(rel, f"new, mode {a[1]:o}", f"gateway-{profile}'s session store, docs/gateway.md")
            else:
                unexpected(rel, "new session store file", f"mode {want:o} (docs/gateway.md, docs/security.md)",
                           f"{a[1]:o}")
        else:
            unexpected(rel, f"new {kind}", "nothing new here", short(a[4]) if a[4] else kind)
        continue
    # Present on both sides.
    if b[0] != a[0]:
        unexpected(rel, "changed kind", b[0], a[0])
        continue
    if b[2:4] != a[2:4]:
        unexpected(rel, "re-owned", f"{b[2]}:{b[3]}", f"{a[2]}:{a[3]}")
    if b[1] != a[1]:
        if top and rel in ROOT_MODES and a[1] == ROOT_MODES[rel]:
            allowed(rel, f"mode {b[1]:o} -> {a[1]:o}", "ownership repair, docs/container.md stage 4")
        else:
            unexpected(rel, "mode changed", f"{b[1]:o}", f"{a[1]:o}")
    if b[4] == a[4]:
        continue
    old, new = b[4], a[4]
    if rel == ".env":
        has_key = re.search(rb"^\s*(export\s+)?API_SERVER_KEY\s*=\s*\S", old, re.M)
        base = old if old.endswith(b"\n") or not old else old + b"\n"
        if not has_key and new.startswith(base) and API_KEY_LINE.fullmatch(new[len(base):]):
            allowed(rel, "API_SERVER_KEY appended, the rest byte for byte as before",
                    "docs/container.md stage 5")
        else:
            unexpected(rel, "rewritten", "unchanged, or only `API_SERVER_KEY=<64 hex>` appended when it had none",
                       short(new))
        continue
    if inner == "gateway_state.json" and profile in ran:
        try:
            o, n = json.loads(old), json.loads(new)
        except ValueError as e:
            unexpected(rel, "rewritten", "JSON", f"{e}: {short(new)}")
            continue
        lost = sorted(set(o) - set(n))
        if lost:
            unexpected(rel, "keys dropped", f"every key of the original's record kept ({sorted(o)})",
                       f"missing {lost}")
        elif o.get("desired_state") != n.get("desired_state"):
            unexpected(rel, "desired_state changed", repr(o.get("desired_state")), repr(n.get("desired_state")))
        else:
            allowed(rel, f"merged by gateway-{profile} (gateway_state {o.get('gateway_state')!r} -> "
                    f"{n.get('gateway_state')!r}, desired_state {n.get('desired_state')!r} kept, every key kept)",
                    "docs/configuration.md, gateway_state.json")
        continue
    if inner == "gateway.lock" and profile in ran:
        try:
            record = json.loads(new)
            good = record.get("kind") == "hermes-gateway" and isinstance(record.get("pid"), int)
        except ValueError:
            good = False
        if good:
            allowed(rel, "the lock record of gateway-" + profile + ", which ran", "docs/gateway.md, Lifecycle")
        else:
            unexpected(rel, "rewritten", '{"pid": N, "kind": "hermes-gateway", ...} (docs/gateway.md)', short(new))
        continue
    if inner == "state.db" and profile in ran:
        old_rows = rows(os.path.join(before_root, os.path.dirname(rel)))
        new_rows = rows(os.path.join(after_root, os.path.dirname(rel)))
        changed = sorted(t for t in old_rows if new_rows.get(t) != old_rows[t])
        if changed:
            unexpected(rel, "the original's tables changed", "every table and row the original stored kept",
                       f"differs in {changed}")
        else:
            added = sorted(set(new_rows) - set(old_rows))
            allowed(rel, f"tables added {added}, the original's {len(old_rows)} tables and their rows unchanged",
                    f"gateway-{profile}'s sessions, docs/gateway.md")
        continue
    unexpected(rel, "rewritten", f"byte for byte as the original wrote it: {short(old)}", short(new))

print("\n".join(lines))
