#!/usr/bin/env bash
# The original Python implementation (`hermes-agent`) in a cached venv, for the original-volume
# scenario and the test suites that write volumes with it. Prints the path of ITS `hermes`
# console script (not ours).
#
#   tests/docker/original/venv.sh          (as root; scripts/docker-test.sh runs it before the
#                                           scenarios, so its time is not the scenario's)
#
# Two sources:
# * PyPI (the default): HERMES_ORIGINAL_VERSION (default 0.19.0), the last release published
#   there; the venv is hermes-agent-<version>-venv.
# * a source tree: HERMES_ORIGINAL_SOURCE names a `.tar.gz` of one (the fixture
#   ../shared/fixtures/hermes-agent-0.20.1-src.tar.gz). Since 0.20 the original ships only as
#   source and refuses to build wheels, so it is unpacked into the cache (the tarball is only
#   read) and installed editable, as upstream installs itself; its pinned dependencies come from
#   PyPI. The tree and the venv are keyed by the tarball's sha256: hermes-agent-src-<sum>{,-venv}.
#
# Both live in $HERMES_DOCKER_CACHE (default /var/cache/hermes-docker-test). A venv is reused
# while its interpreter runs and still has the expected version installed; otherwise it is made
# again.
# hermes-agent 0.19.0 requires Python >=3.11,<3.14: the first of python3, python3.13,
# python3.12, python3.11 in that range is used (Debian 12 has 3.11, Debian 13 has 3.13);
# Debian's python3-venv is installed when `python3 -m venv` lacks ensurepip.
set -euo pipefail

cache=${HERMES_DOCKER_CACHE:-/var/cache/hermes-docker-test}
source_tarball=${HERMES_ORIGINAL_SOURCE:-}

say() { printf 'original-venv: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

if [[ -n $source_tarball ]]; then
    [[ -f $source_tarball ]] || die "HERMES_ORIGINAL_SOURCE=$source_tarball is not a file"
    sum=$(sha256sum "$source_tarball" | cut -c1-16)
    tree=$cache/hermes-agent-src-$sum
    venv=$cache/hermes-agent-src-$sum-venv
    # The version the tree declares (`version = "X"` in its pyproject.toml), read from the
    # tarball so a stale unpacked copy cannot answer for it.
    version=$(tar -xzOf "$source_tarball" --wildcards '*/pyproject.toml' 2>/dev/null \
        | sed -n 's/^version = "\(.*\)"$/\1/p' | head -n1)
    [[ -n $version ]] || die "$source_tarball holds no pyproject.toml with a version"
    what="hermes-agent $version from $source_tarball (editable)"
else
    version=${HERMES_ORIGINAL_VERSION:-0.19.0}
    venv=$cache/hermes-agent-$version-venv
    what="hermes-agent==$version"
fi

installed() {
    [[ -f $venv/.ready && -x $venv/bin/hermes ]] || return 1
    [[ $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("hermes-agent"))' 2>/dev/null) == "$version" ]]
}
if installed; then
    printf '%s\n' "$venv/bin/hermes"
    exit 0
fi

in_range() { "$1" -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] < (3, 14)))' 2>/dev/null; }
python=
for candidate in python3 python3.13 python3.12 python3.11; do
    if command -v "$candidate" >/dev/null && in_range "$candidate"; then
        python=$candidate
        break
    fi
done
if [[ -z $python ]]; then
    die "hermes-agent $version needs Python >=3.11,<3.14 and none of python3, python3.13, python3.12, python3.11 is one (python3 is $(python3 --version 2>&1 || echo missing))"
fi
if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
    if [[ $python == python3 ]] && command -v apt-get >/dev/null && ((EUID == 0)); then
        say "installing python3-venv (\`$python -m venv\` needs it)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null \
            || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null; }
    else
        die "\`$python -m venv\` cannot make a venv with pip: install the venv package of $python"
    fi
fi

say "creating $venv with $what ($("$python" --version 2>&1)); a one-time download of 100-300 MB"
mkdir -p "$cache"
rm -rf "$venv"
"$python" -m venv "$venv"
log=$venv.pip.log
if [[ -n $source_tarball ]]; then
    rm -rf "$tree" "$tree.partial"
    mkdir -p "$tree.partial"
    tar -xzf "$source_tarball" -C "$tree.partial" --strip-components=1 \
        || die "cannot unpack $source_tarball"
    mv "$tree.partial" "$tree"
    target=(-e "$tree")
else
    target=("hermes-agent==$version")
fi
if ! "$venv/bin/pip" install --disable-pip-version-check --no-input "${target[@]}" >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    rm -rf "$venv"
    die "pip install $what failed (log: $log)"
fi
touch "$venv/.ready"
installed || die "the venv at $venv does not report hermes-agent $version after installing it"
printf '%s\n' "$venv/bin/hermes"
