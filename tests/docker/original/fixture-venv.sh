#!/usr/bin/env bash
# The original agent from the source-tree fixture (`../shared/fixtures/hermes-agent-*-src.tar.gz`,
# a release distributed only as source) installed the way upstream installs itself: an
# editable install of the unpacked tree into a cached venv. Prints the path of ITS `hermes`
# console script (not ours).
#
#   tests/docker/original/fixture-venv.sh [TARBALL]
#
# TARBALL defaults to HERMES_AGENT_FIXTURE, else ../shared/fixtures/hermes-agent-0.20.1-src.tar.gz
# beside this repository. The fixture is only read: it is unpacked into
# $HERMES_DOCKER_CACHE/<name>-tree (default cache /var/cache/hermes-docker-test) and installed
# into <name>-venv, both reused while the venv's interpreter runs and the tarball's sha256 is
# the one they were made from. The dependencies come from PyPI (the tree's exact pins).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
tarball=${1:-${HERMES_AGENT_FIXTURE:-$here/../../../../shared/fixtures/hermes-agent-0.20.1-src.tar.gz}}
cache=${HERMES_DOCKER_CACHE:-/var/cache/hermes-docker-test}

say() { printf 'fixture-venv: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[[ -f $tarball ]] || die "no agent source fixture at \`$tarball\` (set HERMES_AGENT_FIXTURE)"
name=$(basename "$tarball" .tar.gz)
tree=$cache/$name-tree
venv=$cache/$name-venv
sum=$(sha256sum "$tarball" | cut -d' ' -f1)

if [[ -f $venv/.ready && $(cat "$venv/.ready") == "$sum" && -x $venv/bin/hermes ]] \
    && "$venv/bin/python" -c 'import hermes_cli' 2>/dev/null; then
    printf '%s\n' "$venv/bin/hermes"
    exit 0
fi

python=
for candidate in python3 python3.13 python3.12 python3.11; do
    if command -v "$candidate" >/dev/null \
        && "$candidate" -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] < (3, 14)))' 2>/dev/null; then
        python=$candidate
        break
    fi
done
[[ -n $python ]] || die "the agent needs Python >=3.11,<3.14; none of python3, python3.13, python3.12, python3.11 is one"

say "installing $name (editable) into $venv; a one-time download of ~250 MB from PyPI"
mkdir -p "$cache"
rm -rf "$tree" "$venv"
mkdir -p "$tree"
tar -xzf "$tarball" -C "$tree" --strip-components=1
"$python" -m venv "$venv"
log=$cache/$name-pip.log
if ! "$venv/bin/pip" install --disable-pip-version-check --no-input -e "$tree" >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    rm -rf "$venv"
    die "pip install -e $tree failed (log: $log)"
fi
printf '%s' "$sum" >"$venv/.ready"
printf '%s\n' "$venv/bin/hermes"
