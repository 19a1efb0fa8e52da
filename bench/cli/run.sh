#!/usr/bin/env bash
# CLI startup benchmark: the Rust `hermes` release binary against the original Python CLI
# (`hermes-agent` from PyPI), side by side in ONE hyperfine run.
#
# What it does (every step is idempotent, so the script can simply be run again):
#   1. installs hyperfine with apt-get when it is missing;
#   2. creates (or reuses) a venv with `hermes-agent==$PY_VERSION` outside the repository;
#   3. builds `cargo build --release -p hermes`;
#   4. makes fresh temporary HOME/HERMES_HOME dirs, one pair per peer, and runs every command
#      once un-timed to record its exit status and first-run output (a command that fails
#      there is left out of the timed run and reported as failed, never given a number);
#   5. runs hyperfine once over all commands, then writes `bench/cli/results.json` (machine
#      facts, first-run outcomes, summary rows and hyperfine's raw export) and prints a
#      markdown table of medians and ratios (python / rust).
#
# Not part of the test suite: CI never runs it. Usage: `bash bench/cli/run.sh`.
# Knobs (environment): PY_VERSION (default 0.19.0), WARMUP (default 3), MIN_RUNS (default 30),
# BENCH_CACHE (where the venv lives, default ${TMPDIR:-/tmp}/hermes-bench-cli).
set -euo pipefail

PY_VERSION="${PY_VERSION:-0.19.0}"
WARMUP="${WARMUP:-3}"
MIN_RUNS="${MIN_RUNS:-30}"
BENCH_CACHE="${BENCH_CACHE:-${TMPDIR:-/tmp}/hermes-bench-cli}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
results="$here/results.json"

. "$here/../lib.sh"

# --- 1. hyperfine -----------------------------------------------------------------------
ensure_commands hyperfine:hyperfine

# --- 2. the Python peer -----------------------------------------------------------------
venv="$BENCH_CACHE/venv-hermes-agent-$PY_VERSION"
py_hermes="$(hermes_agent_venv "$venv" "hermes-agent==$PY_VERSION" "$PY_VERSION")"

# --- 3. the Rust peer -------------------------------------------------------------------
log "building the release binary"
(cd "$repo" && cargo build --release -p hermes --quiet)
target_dir="$(cargo_target_dir "$repo")"
rs_hermes="$target_dir/release/hermes"
[ -x "$rs_hermes" ] || die "no release binary at \`$rs_hermes\`"

# --- 4. fresh homes and un-timed first runs ---------------------------------------------
work="$(mktemp -d "${TMPDIR:-/tmp}/hermes-bench-cli-run.XXXXXX")"
trap 'rm -rf "$work"' EXIT
for peer in rust python; do
    mkdir -p "$work/$peer/home" "$work/$peer/hermes_home"
done

# Both peers go through the same `env` exec so that neither pays for a wrapper the other
# skips; `baseline` times that wrapper alone so readers can see the floor.
peer_cmd() { # peer, binary, args...
    local peer="$1"
    shift
    printf 'env HOME=%s HERMES_HOME=%s %s' "$work/$peer/home" "$work/$peer/hermes_home" "$*"
}

names=() commands=() first_runs="$work/first_runs.tsv"
: >"$first_runs"
add_case() { # name, peer, binary, args...
    local name="$1" peer="$2"
    shift 2
    local cmd
    cmd="$(peer_cmd "$peer" "$@")"
    local out="$work/first-$name.out" err="$work/first-$name.err" rc=0 start end
    start="$(date +%s.%N)"
    # shellcheck disable=SC2086 # the command is a plain word list with no quoting
    $cmd >"$out" 2>"$err" || rc=$?
    end="$(date +%s.%N)"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$rc" "$start" "$end" "$out" "$err" >>"$first_runs"
    if [ "$rc" -eq 0 ]; then
        names+=("$name")
        commands+=("$cmd")
    else
        log "$name failed on its first run (exit $rc); it is reported, not timed"
    fi
}
log "first (un-timed) runs in fresh homes under $work"
add_case "rust --version" rust "$rs_hermes" --version
add_case "python --version" python "$py_hermes" --version
add_case "rust dump" rust "$rs_hermes" dump
add_case "python dump" python "$py_hermes" dump
# What the first runs left behind (the Python CLI seeds its home and caches an update check).
for peer in rust python; do
    (cd "$work/$peer" && find home hermes_home -mindepth 1 -maxdepth 2 | LC_ALL=C sort) >"$work/seeded-$peer.txt"
done
names+=("baseline: env true")
commands+=("$(peer_cmd rust /usr/bin/true)")

# --- 5. one hyperfine run over everything -----------------------------------------------
hf_args=(-N --warmup "$WARMUP" --min-runs "$MIN_RUNS" --style basic --export-json "$work/hyperfine.json")
for i in "${!commands[@]}"; do
    hf_args+=(--command-name "${names[$i]}" "${commands[$i]}")
done
log "hyperfine: warmup $WARMUP, at least $MIN_RUNS runs per command"
hyperfine "${hf_args[@]}" >&2

py_version="$("$venv/bin/python" --version 2>&1)"
rs_version="$("$rs_hermes" --version 2>/dev/null | head -n 1)"
commit="$(cd "$repo" && git rev-parse --short=8 HEAD 2>/dev/null || echo unknown)"

python3 - "$work" "$target_dir" "$venv" "$repo" "$work/hyperfine.json" "$first_runs" "$results" "$PY_VERSION" "$py_version" \
    "$rs_version" "$commit" "$(hyperfine --version)" "$WARMUP" "$MIN_RUNS" <<'PY'
"""Combine hyperfine's export and the first-run outcomes into results.json; print the table."""
import json
import os
import platform
import sys
import time

(work, target_dir, venv, repo, hf_path, first_path, out_path, py_pkg, py_version, rs_version, commit,
 hf_version, warmup, min_runs) = sys.argv[1:]

with open(hf_path) as f:
    hf = json.load(f)
by_name = {r["command"]: r for r in hf["results"]}


def tail(path, limit=4000):
    with open(path, errors="replace") as f:
        text = f.read()
    return text[-limit:]


first_runs = []
with open(first_path) as f:
    for line in f:
        name, rc, start, end, out, err = line.rstrip("\n").split("\t")
        first_runs.append({
            "command": name,
            "exit_code": int(rc),
            "seconds": round(float(end) - float(start), 4),
            "stdout": tail(out),
            "stderr": tail(err),
        })
seeded = {}
for peer in ("rust", "python"):
    with open(os.path.join(work, f"seeded-{peer}.txt")) as f:
        seeded[peer] = [line.strip() for line in f if line.strip()]
failed = {r["command"]: r for r in first_runs if r["exit_code"] != 0}


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


summary = []
for case in ("--version", "dump"):
    rust, py = by_name.get(f"rust {case}"), by_name.get(f"python {case}")
    row = {"case": f"hermes {case}"}
    for peer, r in (("rust", rust), ("python", py)):
        if r is not None:
            row[f"{peer}_median_ms"] = round(r["median"] * 1000, 2)
            row[f"{peer}_mean_ms"] = round(r["mean"] * 1000, 2)
            row[f"{peer}_stddev_ms"] = round((r["stddev"] or 0) * 1000, 2)
            row[f"{peer}_runs"] = len(r["times"])
        else:
            f_run = failed.get(f"{peer} {case}")
            row[f"{peer}_failed"] = (
                f"exit {f_run['exit_code']} on first run" if f_run else "not measured")
    if rust is not None and py is not None and rust["median"] > 0:
        row["ratio_python_over_rust"] = round(py["median"] / rust["median"], 1)
    summary.append(row)
base = by_name.get("baseline: env true")

doc = {
    "benchmark": "cli-startup",
    "command": "bash bench/cli/run.sh",
    "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "machine": {
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model(),
        "kernel": platform.release(),
        "arch": platform.machine(),
        # Other work on the machine shows up here; ratios are what to read, not absolute times.
        "loadavg_after_run": [round(x, 2) for x in os.getloadavg()],
    },
    "peers": {
        "rust": {"binary": "hermes (cargo build --release -p hermes)", "version": rs_version,
                 "commit": commit},
        "python": {"package": f"hermes-agent=={py_pkg}", "interpreter": py_version},
    },
    "hyperfine": {"version": hf_version, "warmup": int(warmup), "min_runs": int(min_runs),
                  "shell": "none (-N)", "wrapper": "env HOME=<tmp> HERMES_HOME=<tmp> <cmd>"},
    "baseline_env_true_median_ms": round(base["median"] * 1000, 2) if base else None,
    "summary": summary,
    "first_runs": first_runs,
    "seeded_after_first_runs": seeded,
    "raw": hf,
}
# The file is committed: name machine-specific directories by role, not by where they were.
text = json.dumps(doc, indent=2) + "\n"
for path, label in sorted(((work, "$WORK"), (target_dir, "$TARGET"), (venv, "$VENV"),
                           (repo, "$REPO")), key=lambda p: -len(p[0])):
    text = text.replace(path, label)
with open(out_path, "w") as f:
    f.write(text)


def ms(row, peer):
    key = f"{peer}_median_ms"
    if key in row:
        return f"{row[key]:.1f} ms (±{row[f'{peer}_stddev_ms']:.1f}, n={row[f'{peer}_runs']})"
    return row.get(f"{peer}_failed", "n/a")


print("| command | rust median | python median | python / rust |")
print("|---|---:|---:|---:|")
for row in summary:
    ratio = row.get("ratio_python_over_rust")
    print(f"| `{row['case']}` | {ms(row, 'rust')} | {ms(row, 'python')} | "
          f"{f'**{ratio:.0f}x**' if ratio is not None else 'n/a'} |")
if base:
    print(f"| `env true` (exec floor, both peers pay it) | {base['median'] * 1000:.1f} ms | | |")
print()
print(f"machine: {os.cpu_count()} CPUs, {cpu_model()}, load {os.getloadavg()[0]:.1f}; rust {rs_version} ({commit}); "
      f"python hermes-agent=={py_pkg} on {py_version}; {hf_version}")
for r in failed.values():
    print(f"\nfailed first run: {r['command']} (exit {r['exit_code']})\n{r['stderr'][-800:]}")
PY
