#!/usr/bin/env bash
# The Helm chart's tests: deploy/helm/hermes rendered by Helm's own engine, validated against the
# Kubernetes API schemas and checkov's policies, and asserted by tests/helm/check.py.
#
#   scripts/helm-test.sh                       every check (scripts/test.sh runs this); the last
#                                              line is `helm: N passed, N failed`
#   scripts/helm-test.sh pod CASE PROFILE      the rendered pod of PROFILE in CASE (`default` or
#                                              `three-profiles`) as JSON, for tests/docker/helm-pod.sh
#
# The tools (tests/helm/requirements.txt, from PyPI) live in a venv made once and reused while
# the requirements file is unchanged: $HERMES_HELM_VENV, else helm-venv in
# $HERMES_DOCKER_CACHE (/var/cache/hermes-docker-test) when that is writable, else in
# ~/.cache/hermes. Rendered manifests go to target/helm/<case>/manifest.yaml.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'helm-test: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

req=tests/helm/requirements.txt
cache=${HERMES_DOCKER_CACHE:-/var/cache/hermes-docker-test}
if [[ -n ${HERMES_HELM_VENV:-} ]]; then
    venv=$HERMES_HELM_VENV
elif mkdir -p "$cache" 2>/dev/null && [[ -w $cache ]]; then
    venv=$cache/helm-venv
else
    venv=${XDG_CACHE_HOME:-$HOME/.cache}/hermes/helm-venv
fi
want=$( (sha256sum <"$req"; python3 --version 2>&1) | sha256sum | cut -d' ' -f1)
# One installer at a time: the chart checks (scripts/test.sh) and the pod scenarios
# (scripts/docker-test.sh) share this venv, and a second run must not remove it under the first.
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if [[ ! -x $venv/bin/python || $(cat "$venv/.ready" 2>/dev/null) != "$want" ]]; then
    say "installing $(grep -Ev '^(#|$)' "$req" | tr '\n' ' ')into $venv (once)"
    rm -rf "$venv"
    python3 -m venv "$venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    log=$venv/pip.log
    if ! "$venv/bin/pip" install --disable-pip-version-check --no-input -q -r "$req" >"$log" 2>&1; then
        tail -n 20 "$log" >&2
        die "pip install -r $req failed (log: $log)"
    fi
    printf '%s\n' "$want" >"$venv/.ready"
fi

exec 9>&-

out=target/helm
case ${1:-} in
    pod) shift; exec "$venv/bin/python" tests/helm/check.py pod "$out" "$@" ;;
    "") exec "$venv/bin/python" tests/helm/check.py check "$out" ;;
    *) die "unknown argument \`$1\` (none, or: pod CASE PROFILE)" ;;
esac
