#!/usr/bin/env bash
# Installs the full image's agent (hermes-agent) into its venv, from the source the build names
# (docker/Dockerfile's HERMES_AGENT_SOURCE; docs/docker.md, "Which agent"):
#
#   agent-install.sh SOURCE EXTRAS      (in the agent-venv build stage, as root)
#
#   SOURCE  pypi:VERSION    the release on PyPI that docker/agent-requirements.txt pins (wheels,
#                           every hash checked, --no-deps: the lock file is the complete set)
#           git+URL@REF     a tag, branch or commit of a repository, cloned here (needs network)
#           context:PATH    a source tree, or a .tar.gz of one, at PATH in the build context
#                           (under vendor/ or target/docker/agent-source/, which .dockerignore
#                           lets in)
#   EXTRAS  comma-separated extras for a source tree (the pypi form's are in its lock file); an
#           extra the tree does not declare is skipped with a note.
#
# A source tree is installed the way upstream installs itself, with nothing resolved here: its
# dependencies from its own uv.lock (`uv export --frozen`, every hash checked, wheels only), then
# the tree itself editable (`pip install -e --no-deps --no-build-isolation`; its setuptools from
# docker/agent-build-requirements.txt when its lock brings none). The tree stays in the image at
# $VENV/src, read-only for the service user, with the original image's `.install_method` stamp
# (`docker`) and, from git, the commit in `.hermes_build_sha` (what its `hermes dump` shows).
#
# Wheels found in $AGENT_DIR (the build context's target/docker/agent-wheels) are all that is
# installed (--no-index); without them pip fetches the same files from PyPI. What was installed
# is written to $VENV/.hermes-agent-source (one line: SOURCE as given), which `hermes version`
# and `hermes dump` show.
#
# With HERMES_AGENT_EXPORT_ONLY=FILE, a source tree's exported requirements are written to FILE
# and nothing is installed (scripts/docker-test.sh downloads those wheels once, for builds
# without an index).
#
# Every refusal is one line on stderr starting with `agent-install: error:`, with what to do.
set -euo pipefail

VENV=${HERMES_AGENT_VENV:-/opt/hermes-agent}
AGENT_DIR=${HERMES_AGENT_BUILD_DIR:-/tmp/agent}
CONTEXT_DIR=${HERMES_AGENT_CONTEXT_DIR:-/tmp/agent-context}
TREE=$VENV/src
STAMP=$VENV/.hermes-agent-source
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

die() { printf 'agent-install: error: %s\n' "$*" >&2; exit 1; }
note() { printf 'agent-install: %s\n' "$*"; }

[[ $# -eq 2 ]] || die "usage: agent-install.sh SOURCE EXTRAS (got $# arguments)"
source_spec=$1
extras=$2

# pip, quiet and from the wheels in the context when there are any.
pip_flags=(--disable-pip-version-check --no-input --no-cache-dir)
find_links=(--find-links "$AGENT_DIR")
if compgen -G "$AGENT_DIR/*.whl" >/dev/null; then find_links+=(--no-index); fi
hashed_install() { # PIP REQUIREMENTS
    "$1" install "${pip_flags[@]}" --require-hashes --no-deps --only-binary=:all: "${find_links[@]}" -r "$2"
}
# One package's entry (its `name==version \` line and the hash lines under it) of a lock file.
lock_entry() { # LOCK NAME
    awk -v name="$2" '/^[A-Za-z0-9]/ { on = (index($0, name "==") == 1) } on && !/^ *#/' "$1"
}

install_pypi() { # VERSION
    local lock=$AGENT_DIR/agent-requirements.txt pinned
    pinned=$(sed -n 's/^hermes-agent==\([^ ]*\).*/\1/p' "$lock")
    [[ $1 == "$pinned" ]] || die "HERMES_AGENT_SOURCE=pypi:$1, but docker/agent-requirements.txt pins hermes-agent $pinned; change docker/agent-requirements.in and run docker/lock-agent.sh, or build with pypi:$pinned"
    python3 -m venv "$VENV"
    hashed_install "$VENV/bin/pip" "$lock"
}

fetch_git() { # URL REF
    local url=$1 ref=$2
    if ! command -v git >/dev/null; then
        note "installing git for the clone (build stage only)"
        apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends git >/dev/null \
            || die "cannot install git to clone $url (no Debian mirror reachable?); use HERMES_AGENT_SOURCE=context:PATH with a checkout instead"
    fi
    git init -q "$TREE"
    git -C "$TREE" remote add origin "$url"
    # A shallow fetch of the one ref (tag, branch or commit); a server that cannot do shallow
    # fetches (dumb HTTP) gets a full one.
    if ! git -C "$TREE" fetch -q --depth 1 origin "$ref" 2>"$WORK/fetch.err"; then
        git -C "$TREE" fetch -q --tags origin "+refs/heads/*:refs/remotes/origin/*" 2>>"$WORK/fetch.err" \
            || die "git fetch of $ref from $url failed: $(tail -n 1 "$WORK/fetch.err")"
        local resolved
        resolved=$(git -C "$TREE" rev-parse -q --verify "$ref^{commit}" 2>/dev/null \
            || git -C "$TREE" rev-parse -q --verify "origin/$ref^{commit}" 2>/dev/null) \
            || die "$url has no tag, branch or commit \`$ref\`"
        git -C "$TREE" checkout -q "$resolved"
    else
        git -C "$TREE" checkout -q FETCH_HEAD
    fi
    git -C "$TREE" rev-parse HEAD >"$TREE/.hermes_build_sha"
    note "cloned $url at $ref ($(cat "$TREE/.hermes_build_sha"))"
    rm -rf "$TREE/.git"
}

unpack_context() { # PATH
    local path=$1 src
    [[ -n $path ]] || die "HERMES_AGENT_SOURCE=context: names no path; give a tree or .tar.gz in the build context, e.g. context:vendor/hermes-agent"
    [[ $path != /* && /$path/ != */../* ]] || die "HERMES_AGENT_SOURCE=context:$path: the path must be relative to the build context, without \`..\`"
    path=${path%/}
    src=$CONTEXT_DIR/$path
    case $path in vendor/* | target/docker/agent-source/*) ;; *)
        die "HERMES_AGENT_SOURCE=context:$path: the tree must be under vendor/ or target/docker/agent-source/ (the only places .dockerignore lets into the build context)" ;;
    esac
    [[ -e $src ]] || die "HERMES_AGENT_SOURCE=context:$path: no such file or directory in the build context"
    if [[ -d $src ]]; then
        mkdir -p "$TREE"
        # Not the checkout's git data or a build's node_modules: the image needs neither.
        tar -C "$src" --exclude=./.git --exclude=./node_modules -cf - . | tar -C "$TREE" -xf -
    elif [[ $path == *.tar.gz || $path == *.tgz ]]; then
        mkdir -p "$WORK/unpacked"
        tar -C "$WORK/unpacked" -xzf "$src" || die "HERMES_AGENT_SOURCE=context:$path: not a readable .tar.gz"
        local root=$WORK/unpacked entries
        # A tarball of one directory (hermes-agent-0.20.1/...) or of a tree's contents.
        if [[ ! -f $root/pyproject.toml ]]; then
            entries=("$root"/*)
            [[ ${#entries[@]} -eq 1 && -d ${entries[0]} ]] && root=${entries[0]}
        fi
        rm -rf "$root/.git"
        mkdir -p "$(dirname "$TREE")"
        mv "$root" "$TREE"
    else
        die "HERMES_AGENT_SOURCE=context:$path: neither a directory nor a .tar.gz"
    fi
}

install_tree() { # EXTRAS
    [[ -f $TREE/pyproject.toml ]] || die "$source_spec is not a hermes-agent source tree: it has no pyproject.toml at its top"
    [[ -f $TREE/uv.lock ]] || die "$source_spec has no uv.lock: the image installs a source tree's dependencies only from its own lock file"
    # The project's name and the extras it declares, from its pyproject.toml.
    local meta name declared wanted=() e
    meta=$(python3 -c '
import sys, tomllib
p = tomllib.load(open(sys.argv[1], "rb")).get("project", {})
print(p.get("name", ""))
print(" ".join(p.get("optional-dependencies", {})))' "$TREE/pyproject.toml") \
        || die "$source_spec: its pyproject.toml does not parse"
    name=$(sed -n 1p <<<"$meta")
    declared=" $(sed -n 2p <<<"$meta") "
    [[ $name == hermes-agent ]] || die "$source_spec is the project \`$name\`, not hermes-agent"
    IFS=, read -r -a asked <<<"$extras"
    for e in "${asked[@]}"; do
        e=${e// /}
        [[ -n $e ]] || continue
        if [[ $declared == *" $e "* ]]; then wanted+=(--extra "$e"); else note "the tree declares no extra \`$e\`; skipped"; fi
    done

    # uv, in a venv of the build stage only.
    python3 -m venv "$WORK/uv"
    lock_entry "$AGENT_DIR/agent-build-requirements.txt" uv >"$WORK/uv.txt"
    hashed_install "$WORK/uv/bin/pip" "$WORK/uv.txt" >/dev/null
    (cd "$TREE" && "$WORK/uv/bin/uv" export --frozen --no-dev --no-emit-project --no-header \
        --no-annotate --format requirements-txt "${wanted[@]}" -o "$WORK/tree-requirements.txt" --quiet) \
        || die "$source_spec: \`uv export --frozen\` cannot read its uv.lock (is it in step with pyproject.toml?)"
    note "$(grep -c '^[A-Za-z0-9]' "$WORK/tree-requirements.txt") distributions from the tree's uv.lock (extras: ${wanted[*]:-none})"
    if [[ -n ${HERMES_AGENT_EXPORT_ONLY:-} ]]; then
        cp "$WORK/tree-requirements.txt" "$HERMES_AGENT_EXPORT_ONLY"
        exit 0
    fi

    python3 -m venv "$VENV"
    hashed_install "$VENV/bin/pip" "$WORK/tree-requirements.txt"
    # (Not `import setuptools`: an interpreter's venv may come with an old one of its own.)
    if ! grep -q '^setuptools==' "$WORK/tree-requirements.txt"; then
        lock_entry "$AGENT_DIR/agent-build-requirements.txt" setuptools >"$WORK/setuptools.txt"
        hashed_install "$VENV/bin/pip" "$WORK/setuptools.txt"
    fi
    "$VENV/bin/pip" install "${pip_flags[@]}" --no-deps --no-build-isolation --no-index -e "$TREE" >"$WORK/editable.log" 2>&1 \
        || { tail -n 15 "$WORK/editable.log" >&2; die "$source_spec: the editable install of the tree failed (its build backend's output is above)"; }
    printf 'docker\n' >"$TREE/.install_method"
    # The bytecode of the tree, which the service user cannot write at run time (the tree is
    # read-only and the image sets PYTHONDONTWRITEBYTECODE); its tests are never imported.
    "$VENV/bin/python" -m compileall -q -j 0 -x '/tests/' "$TREE" >/dev/null || true
    if [[ -f $TREE/ui-tui/dist/entry.js ]]; then
        note "the tree has a built TUI bundle (ui-tui/dist/entry.js): build with --build-arg HERMES_AGENT_TUI=yes to set HERMES_TUI_DIR to it"
    fi
}

case $source_spec in
pypi:*)
    version=${source_spec#pypi:}
    [[ -n $version ]] || die "HERMES_AGENT_SOURCE=pypi: names no version; e.g. pypi:0.19.0"
    install_pypi "$version"
    ;;
git+*)
    spec=${source_spec#git+}
    url=${spec%@*}
    ref=${spec##*@}
    # The ref follows the last `@`; an ssh URL's `git@host:` is no ref (it has a `:`).
    if [[ $spec != *@* || -z $ref || -z $url || $ref == *:* ]]; then
        die "HERMES_AGENT_SOURCE=$source_spec names no ref; write git+URL@REF, e.g. git+https://github.com/NousResearch/hermes-agent@v0.20.1"
    fi
    fetch_git "$url" "$ref"
    install_tree "$extras"
    ;;
context:*)
    unpack_context "${source_spec#context:}"
    install_tree "$extras"
    ;;
*)
    die "HERMES_AGENT_SOURCE=$source_spec: unknown kind of source; use pypi:VERSION, git+URL@REF or context:PATH"
    ;;
esac

printf '%s\n' "$source_spec" >"$STAMP"
sh "$AGENT_DIR/agent-site.sh" "$VENV" >/dev/null
"$VENV/bin/hermes" --version
# Root-owned (the build runs as root) and read-only for everyone else, the tree included.
chmod -R a+rX,go-w "$VENV"
