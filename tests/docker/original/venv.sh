#!/usr/bin/env bash
# The original Python implementation (`hermes-agent` from PyPI) in a cached venv, for the
# original-volume scenario. Prints the path of ITS `hermes` console script (not ours).
#
#   tests/docker/original/venv.sh          (as root; scripts/docker-test.sh runs it before the
#                                           scenarios, so its time is not the scenario's)
#
# The venv lives in $HERMES_DOCKER_CACHE (default /var/cache/hermes-docker-test), keyed by the
# version (HERMES_ORIGINAL_VERSION, default 0.19.0): hermes-agent-<version>-venv. It is reused
# while its interpreter runs and still has that version installed; otherwise it is made again.
# hermes-agent 0.19.0 requires Python >=3.11,<3.14: the first of python3, python3.13,
# python3.12, python3.11 in that range is used (Debian 12 has 3.11, Debian 13 has 3.13);
# Debian's python3-venv is installed when `python3 -m venv` lacks ensurepip.
set -euo pipefail

version=${HERMES_ORIGINAL_VERSION:-0.19.0}
cache=${HERMES_DOCKER_CACHE:-/var/cache/hermes-docker-test}
venv=$cache/hermes-agent-$version-venv

say() { printf 'original-venv: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

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

say "creating $venv with hermes-agent==$version ($("$python" --version 2>&1)); a one-time download of ~100 MB"
mkdir -p "$cache"
rm -rf "$venv"
"$python" -m venv "$venv"
log=$cache/hermes-agent-$version-pip.log
if ! "$venv/bin/pip" install --disable-pip-version-check --no-input "hermes-agent==$version" >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    rm -rf "$venv"
    die "pip install hermes-agent==$version failed (log: $log)"
fi
touch "$venv/.ready"
installed || die "the venv at $venv does not report hermes-agent $version after installing it"
printf '%s\n' "$venv/bin/hermes"
