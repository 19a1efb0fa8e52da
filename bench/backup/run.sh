#!/usr/bin/env bash
# Backup benchmark: time and peak memory of `hermes backup create` (the release build; by
# default, and with `--compress`) on a
# volume whose state.db is SIZE_MB megabytes, against `sqlite3 state.db ".backup x.db"`
# (Debian's sqlite3: the online backup alone, no archive) and the original's `hermes backup`
# (hermes-agent 0.19.0: the same online backup, then a deflated zip, as ours), on the same
# file, in one run.
#
# What it does (every step is idempotent, so the script can simply be run again):
#   1. installs sqlite3 and GNU time (/usr/bin/time) with apt-get when missing;
#   2. makes or reuses the original's venv (tests/docker/original/venv.sh, the one the tests
#      use): its SessionDB makes the database's schema, and its `hermes backup` is a peer;
#   3. builds `cargo build --release -p hermes`;
#   4. makes or reuses the volume, $BENCH_CACHE/volume-<SIZE_MB>mb/: a config.yaml and a
#      state.db written by bench/backup/make_state_db.py (the original's schema, FTS indexes
#      included, filled with text conversations; minutes for 1 GB, reused while the script and
#      the size are the same);
#   5. RUNS rounds; each round runs every peer once, in an order that rotates from round to
#      round, each under `/usr/bin/time -v` (wall clock, CPU, maximum resident set size), after
#      a `sync` (not timed) so no peer pays for the previous one's write-back; each output is
#      measured and removed;
#   6. the archive's compression alone, RUNS times: bench/backup/deflate (the zip crate as
#      hermes-backup uses it, same version and zlib-rs backend) streams the database into a zip
#      at deflate levels 6 (what ours uses), 2 and 1, and stored, to say what each would cost;
#   7. writes bench/backup/results.json and prints a markdown table of medians and ratios.
#
# The database is read from the page cache by every peer (it is read once before the rounds):
# what is compared is the work each does, not the disk.
#
# Not part of the test suite: CI never runs it. Usage: `bash bench/backup/run.sh`.
# Knobs (environment): SIZE_MB (default 1024), RUNS (default 3), BENCH_CACHE (where the
# volume and the runs' outputs live, default /var/tmp/hermes-bench-backup: it needs about
# 4 x SIZE_MB free), OUT (default bench/backup/results.json).
set -euo pipefail

SIZE_MB="${SIZE_MB:-1024}"
RUNS="${RUNS:-3}"
BENCH_CACHE="${BENCH_CACHE:-/var/tmp/hermes-bench-backup}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
OUT="${OUT:-$here/results.json}"

. "$here/../lib.sh"

# --- 1. tools ---------------------------------------------------------------------------
ensure_commands sqlite3:sqlite3
[ -x /usr/bin/time ] || ensure_commands /usr/bin/time:time
[ -x /usr/bin/time ] || die "GNU time is not at /usr/bin/time"

# --- 2. the original --------------------------------------------------------------------
orig="$(bash "$repo/tests/docker/original/venv.sh")" || die "cannot make the original's venv"
orig_py="$(dirname "$orig")/python"

# --- 3. ours ----------------------------------------------------------------------------
log "building the release binary"
(cd "$repo" && cargo build --release -p hermes --quiet)
rs="$(cargo_target_dir "$repo")/release/hermes"
[ -x "$rs" ] || die "no release binary at \`$rs\`"

# --- 4. the volume ----------------------------------------------------------------------
vol="$BENCH_CACHE/volume-${SIZE_MB}mb"
stamp="$(sha256sum <"$here/make_state_db.py" | cut -c1-16) $SIZE_MB"
if [ "$(cat "$vol/.stamp" 2>/dev/null)" != "$stamp" ]; then
    log "writing a ${SIZE_MB} MB state.db with the original's schema into $vol (minutes)"
    rm -rf "$vol" "$vol.partial"
    mkdir -p "$vol.partial"
    HERMES_HOME="$vol.partial" "$orig_py" "$here/make_state_db.py" "$vol.partial/state.db" "$SIZE_MB" >&2
    printf 'model:\n  default: stub-model\n' >"$vol.partial/config.yaml"
    mv "$vol.partial" "$vol"
    printf '%s\n' "$stamp" >"$vol/.stamp"
fi
db="$vol/state.db"
db_bytes="$(stat -c %s "$db")"
rows="$(sqlite3 -readonly "$db" "SELECT (SELECT count(*) FROM sessions) || ' ' || (SELECT count(*) FROM messages) || ' ' || (SELECT coalesce(sum(length(content)), 0) FROM messages)")"
log "state.db: $db_bytes bytes; sessions, messages, bytes of text: $rows"

work="$BENCH_CACHE/run"
rm -rf "$work"
mkdir -p "$work/home" "$work/out"
cat "$db" >/dev/null # into the page cache

# --- 5. the rounds ----------------------------------------------------------------------
clean_env=(env -i PATH=/usr/bin:/bin LANG=C.UTF-8 HOME="$work/home" NO_COLOR=1)
peers=(ours ours_compress sqlite3 original)
run_peer() { # peer round
    local peer=$1 round=$2 out
    case $peer in
        ours) out="$work/out/ours.zip"
            set -- "${clean_env[@]}" HERMES_HOME="$vol" HERMES_AGENT_CLI= "$rs" backup create -o "$out" ;;
        ours_compress) out="$work/out/ours-compress.zip"
            set -- "${clean_env[@]}" HERMES_HOME="$vol" HERMES_AGENT_CLI= "$rs" backup create --compress -o "$out" ;;
        sqlite3) out="$work/out/copy.db"
            set -- sqlite3 "$db" ".backup $out" ;;
        original) out="$work/out/original.zip"
            set -- "${clean_env[@]}" HERMES_HOME="$vol" "$orig" backup -o "$out" ;;
    esac
    sync
    log "round $round: $peer"
    /usr/bin/time -v -o "$work/time-$peer-$round.txt" "$@" >"$work/log-$peer-$round.txt" 2>&1 \
        || die "$peer failed in round $round (see $work/log-$peer-$round.txt)"
    stat -c %s "$out" >"$work/size-$peer-$round.txt"
    rm -f "$out"
}
t_start=$(date +%s)
for round in $(seq 1 "$RUNS"); do
    for i in "${!peers[@]}"; do
        run_peer "${peers[$(( (i + round - 1) % ${#peers[@]} ))]}" "$round"
    done
done
t_rounds=$(( $(date +%s) - t_start ))

# --- 6. compression alone ---------------------------------------------------------------
# bench/backup/deflate: the zip crate as hermes-backup uses it (same version, zlib-rs), the
# database streamed into a zip to /dev/null with SHA-256 of every byte, as `create` writes an
# entry: level 6 (what ours uses), 2 and 1, and stored.
log "building bench/backup/deflate (offline: the workspace's crates are in cargo's cache)"
deflate_target="$BENCH_CACHE/deflate-target"
(cd "$here/deflate" && { CARGO_TARGET_DIR="$deflate_target" cargo build --release --offline --quiet \
    || CARGO_TARGET_DIR="$deflate_target" cargo build --release --quiet; })
: >"$work/deflate.jsonl"
for round in $(seq 1 "$RUNS"); do
    log "round $round: compression alone (levels 6, 2, 1, stored)"
    "$deflate_target/release/bench-backup-deflate" "$db" 6 2 1 stored >>"$work/deflate.jsonl"
done

# --- 7. results -------------------------------------------------------------------------
commit="$(cd "$repo" && git rev-parse --short=8 HEAD 2>/dev/null || echo unknown)"
python3 - "$work" "$OUT" "$RUNS" "$SIZE_MB" "$db_bytes" "$rows" "$commit" "$("$rs" --version | head -n1)" \
    "$("$orig_py" -c 'import importlib.metadata as m; print("hermes-agent", m.version("hermes-agent"))')" \
    "$(sqlite3 --version | cut -d' ' -f1)" "$t_rounds" <<'PY'
import json, os, platform, re, statistics, sys, time
(work, out_path, runs, size_mb, db_bytes, rows, commit, rs_version, orig_version, sqlite_version,
 t_rounds) = sys.argv[1:]
runs = int(runs)

def parse(path):
    text = open(path).read()
    def field(label):
        m = re.search(rf"^\s*{re.escape(label)}: (.+)$", text, re.M)
        return m.group(1).strip() if m else None
    wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss)")
    parts = [float(p) for p in wall.split(":")]
    seconds = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    return {"seconds": round(seconds, 2),
            "cpu_seconds": round(float(field("User time (seconds)")) + float(field("System time (seconds)")), 2),
            "max_rss_kb": int(field("Maximum resident set size (kbytes)"))}

peers = {"ours": "hermes backup create -o ours.zip (release; databases stored)",
         "ours_compress": "hermes backup create --compress -o ours.zip (release; databases deflated)",
         "sqlite3": 'sqlite3 state.db ".backup copy.db"',
         "original": "hermes backup -o original.zip (hermes-agent 0.19.0)"}
measured = {}
for peer in peers:
    samples = []
    for r in range(1, runs + 1):
        s = parse(os.path.join(work, f"time-{peer}-{r}.txt"))
        s["output_bytes"] = int(open(os.path.join(work, f"size-{peer}-{r}.txt")).read())
        samples.append(s)
    med = lambda k: statistics.median(s[k] for s in samples)
    measured[peer] = {"command": peers[peer], "runs": samples,
                      "median_seconds": med("seconds"), "median_cpu_seconds": med("cpu_seconds"),
                      "median_max_rss_mb": round(med("max_rss_kb") / 1024, 1),
                      "output_bytes": samples[-1]["output_bytes"]}
by_method = {}
for line in open(os.path.join(work, "deflate.jsonl")):
    d = json.loads(line)
    by_method.setdefault(d["method"], []).append(d)
deflate = {}
for method, samples in by_method.items():
    name = "stored" if method == "stored" else f"deflate level {method}"
    deflate[name] = {"runs": samples,
                     "median_seconds": statistics.median(d["seconds"] for d in samples),
                     "median_cpu_seconds": statistics.median(d["cpu_seconds"] for d in samples),
                     "output_bytes": samples[-1]["output_bytes"]}
base = measured["sqlite3"]["median_seconds"]
for peer, m in measured.items():
    m["seconds_over_sqlite3"] = round(m["median_seconds"] / base, 2) if base else None
sessions, messages, text_bytes = (int(x) for x in rows.split())

doc = {
    "benchmark": "backup-create",
    "command": "bash bench/backup/run.sh",
    "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "machine": {"cpus": os.cpu_count(), "kernel": platform.release(), "arch": platform.machine(),
                "loadavg_after_run": [round(x, 2) for x in os.getloadavg()]},
    "versions": {"ours": rs_version, "commit": commit, "original": orig_version, "sqlite3": sqlite_version},
    "database": {"size_mb_asked": int(size_mb), "bytes": int(db_bytes), "sessions": sessions,
                 "messages": messages, "text_bytes": text_bytes,
                 "made_by": "bench/backup/make_state_db.py (the original's SessionDB schema, FTS5 indexes included)"},
    "rounds": runs, "rounds_seconds": int(t_rounds),
    "peers": measured,
    "deflate_alone": deflate,
}
with open(out_path, "w") as f:
    f.write(json.dumps(doc, indent=2) + "\n")

mb = lambda b: f"{b / 1e6:.0f} MB"
print(f"state.db: {mb(int(db_bytes))}, {sessions} sessions, {messages} messages ({mb(text_bytes)} of text); "
      f"{runs} rounds, medians")
print()
print("| command | wall | CPU | max RSS | output | wall / sqlite3 |")
print("|---|---:|---:|---:|---:|---:|")
for peer, m in measured.items():
    print(f"| `{m['command']}` | {m['median_seconds']:.1f} s | {m['median_cpu_seconds']:.1f} s | "
          f"{m['median_max_rss_mb']:.1f} MB | {mb(m['output_bytes'])} | {m['seconds_over_sqlite3']:.2f}x |")
print()
print("| the archive's compression alone (zip crate, zlib-rs, with SHA-256) | wall | CPU | output |")
print("|---|---:|---:|---:|")
for name, d in deflate.items():
    print(f"| {name} | {d['median_seconds']:.1f} s | {d['median_cpu_seconds']:.1f} s | {mb(d['output_bytes'])} |")
print(f"\nload average after the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
PY
