#!/usr/bin/env bash
# Crash-consistency torture run in real Docker, long: the `torture` scenario of the Docker suite
# (tests/docker/torture.sh) with many events — `docker kill`, a kill a moment into the start,
# `docker stop -t 2` and with Docker's default timeout, gateway restarts and SIGKILLs, backups —
# under four writing clients. Builds the image as scripts/docker-test.sh does (as root; starts
# dockerd when none runs).
#
# Prints the scenario's `torture-docker: {...}` line and appends it to
# bench/torture/results.jsonl with the commit. Knobs: EVENTS (default 500), SEED (default the
# scenario's), and scripts/docker-test.sh's own (HERMES_DOCKER_ROOT, HERMES_DOCKER_BINARY, ...).
# Usage: `bash bench/torture/docker.sh` (about 20 min for 500 events).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
EVENTS="${EVENTS:-500}"
logs="${HERMES_DOCKER_ROOT:-/var/lib/hermes-docker-test}/logs"

cd "$repo"
# `env`: a variable assignment that comes from an expansion is not one to the shell.
env HDT_TORTURE_EVENTS="$EVENTS" ${SEED:+HDT_TORTURE_SEED="$SEED"} \
    HERMES_DOCKER_SCENARIO_TIMEOUT="$((EVENTS * 10 + 300))" scripts/docker-test.sh torture \
    || { echo "the Docker torture run failed (log: $logs/torture.log)" >&2; }
line="$(grep -o '^torture-docker: {.*}' "$logs/torture.log" | tail -n1 | cut -d' ' -f2-)"
[ -n "$line" ] || { tail -n 40 "$logs/torture.log"; echo "no tally in the scenario's output" >&2; exit 1; }
commit="$(git rev-parse --short=8 HEAD 2>/dev/null || echo unknown)"
printf '{"commit":"%s","generated_at":"%s","target":"docker-native","result":%s}\n' \
    "$commit" "$(date -u +%FT%TZ)" "$line" | tee -a "$here/results.jsonl"
