# Shared by the benchmark scripts (source it): logging, installing the Debian packages a
# benchmark needs, the original Python CLI in a cached venv, and the Rust release build.
# Not part of the test suite.

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# ensure_commands CMD:PACKAGE ...  — installs PACKAGE (apt-get) for every CMD not on PATH.
ensure_commands() {
    local pair cmd pkg missing=()
    for pair in "$@"; do
        cmd="${pair%%:*}" pkg="${pair#*:}"
        command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and \`apt-get\` is not available: install them"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    log "installing ${missing[*]}"
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# hermes_agent_venv DIR REQUIREMENT VERSION [IMPORT]  — a venv at DIR with REQUIREMENT
# (e.g. `hermes-agent[sms]==0.19.0`) installed, reused while it still has hermes-agent
# VERSION (and can import IMPORT); prints the path of its `hermes` entry point.
hermes_agent_venv() {
    local venv="$1" requirement="$2" version="$3" import="${4:-sys}" installed
    command -v python3 >/dev/null 2>&1 || die "\`python3\` is required for the Python peer"
    installed="$("$venv/bin/python" -c "import $import, importlib.metadata as m; print(m.version('hermes-agent'))" 2>/dev/null || true)"
    if [ "$installed" != "$version" ]; then
        log "creating a venv with $requirement in $venv"
        rm -rf "$venv"
        mkdir -p "$(dirname "$venv")"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet "$requirement"
    fi
    [ -x "$venv/bin/hermes" ] || die "the venv has no \`hermes\` entry point: remove \`$venv\` and run again"
    printf '%s\n' "$venv/bin/hermes"
}

# cargo_target_dir REPO  — where cargo puts build output (honours CARGO_TARGET_DIR).
cargo_target_dir() {
    (cd "$1" && cargo metadata --format-version 1 --no-deps |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
}

# pip_venv DIR REQUIREMENT DIST VERSION ENTRY  — a venv at DIR with REQUIREMENT (e.g.
# `litellm[proxy]==1.106.12`) installed, reused while distribution DIST is still at VERSION;
# prints the path of its ENTRY point (a script in the venv's bin/).
pip_venv() {
    local venv="$1" requirement="$2" dist="$3" version="$4" entry="$5" installed
    command -v python3 >/dev/null 2>&1 || die "\`python3\` is required for a Python peer"
    installed="$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('$dist'))" 2>/dev/null || true)"
    if [ "$installed" != "$version" ] || [ ! -x "$venv/bin/$entry" ]; then
        log "creating a venv with $requirement in $venv"
        rm -rf "$venv"
        mkdir -p "$(dirname "$venv")"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet "$requirement"
    fi
    [ -x "$venv/bin/$entry" ] || die "the venv has no \`$entry\` entry point: remove \`$venv\` and run again"
    printf '%s\n' "$venv/bin/$entry"
}

# kill_recorded_groups FILE  — SIGKILL every process group whose id is a line of FILE (a
# harness lists there each process it starts in its own session), for an EXIT trap.
kill_recorded_groups() {
    local pgid
    [ -f "$1" ] || return 0
    while read -r pgid; do
        kill -KILL -- "-$pgid" 2>/dev/null || true
    done <"$1"
}
