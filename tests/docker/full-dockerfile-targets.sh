#!/usr/bin/env bash
# The full flavour's targets from source (issue 14, item 4): `--target full` is the full image
# with the binary from the builder stage and the agent of HDT_AGENT_SOURCE (the same
# HERMES_AGENT_SOURCE as the image under test), and the Dockerfile's default target is still the
# slim `runtime` (the last stage), without the agent. A malformed HERMES_AGENT_SOURCE fails the
# build with one line that says why (issue 22, item 1). The Rust image is a stand-in (as in
# dockerfile-source-target) whose cargo hands over the binary built on the host; a marker
# unique to this run keeps its layers from a cache of an earlier run.
source "$(dirname "$0")/lib.sh"
want_version=${HDT_AGENT_VERSION:?HDT_AGENT_VERSION is not set: run full-* scenarios through scripts/docker-test.sh}
want_source=${HDT_AGENT_SOURCE:?HDT_AGENT_SOURCE is not set}

fake=hdt-fake-rust-full:$$
ctx=$HDT_TMP/fake
mkdir -p "$ctx"
cp "$HDT_HOST_BINARY" "$ctx/hermes"
printf '%s\n' "$HDT_PREFIX-$(date +%s%N)" >"$ctx/run-marker"
cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM debian:trixie-slim
COPY hermes run-marker /opt/prebuilt/
RUN printf '#!/bin/sh\n' >/usr/local/bin/rustup \
 && printf '#!/bin/sh\nset -e\nwhile [ "$1" != --target ]; do shift; done\nmkdir -p "target/$2/release"\ncp /opt/prebuilt/hermes "target/$2/release/hermes"\n' >/usr/local/bin/cargo \
 && chmod 0755 /usr/local/bin/rustup /usr/local/bin/cargo
DOCKERFILE
docker build -q -t "$fake" "$ctx" >/dev/null || fail "building the stand-in rust image"
trap 'docker rmi -f "$fake" "$fake-full" "$fake-default" "$fake-bad" >/dev/null 2>&1; hdt_cleanup' EXIT

build() { DOCKER_BUILDKIT=0 docker build --force-rm --network host -f "$HDT_REPO/docker/Dockerfile" --build-arg RUST_IMAGE="$fake" --build-arg HERMES_BINARY="$HDT_CONTEXT_BINARY" --build-arg TARGETARCH=amd64 "$@" "$HDT_REPO"; }

assert_rc 0 "docker build --target full (HERMES_AGENT_SOURCE=$want_source)" -- \
    build --target full --build-arg HERMES_AGENT_SOURCE="$want_source" -t "$fake-full"
assert_rc 0 "the full image from source: hermes version" -- docker run --rm --network none "$fake-full" version
assert_contains "$OUT" "hermes-agent:    $want_version (/opt/hermes-agent/bin/hermes) from $want_source" "it has the agent, from $want_source"
assert_eq "hermes-full" "$(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.title"}}' "$fake-full")" "its title label names the full flavour"

assert_rc 0 "docker build (the default target)" -- build -t "$fake-default"
assert_rc 0 "the default image: hermes version" -- docker run --rm --network none "$fake-default" version
assert_match "$OUT" 'hermes-agent: +not installed' "the default target is the slim image, without the agent"
assert_eq "hermes" "$(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.title"}}' "$fake-default")" "its title label is the slim one"
assert_rc 1 "no /opt/hermes-agent in the default image" -- docker run --rm --network none --entrypoint test "$fake-default" -e /opt/hermes-agent

# Malformed sources: the build stops at the agent's stage with the reason on one line.
for bad in "svn:https://example.org/hermes-agent|unknown kind of source" \
           "git+https://example.org/hermes-agent|names no ref" \
           "context:|names no path" \
           "context:vendor/no-such-tree|no such file or directory in the build context" \
           "context:docs|must be under vendor/ or target/docker/agent-source/" \
           "pypi:0.0.1|docker/agent-requirements.txt pins hermes-agent"; do
    value=${bad%%|*} reason=${bad#*|}
    assert_rc 1 "docker build --target full-prebuilt with HERMES_AGENT_SOURCE=$value" -- \
        build --target full-prebuilt --build-arg HERMES_AGENT_SOURCE="$value" -t "$fake-bad"
    assert_match "$OUT" "agent-install: error: .*$reason" "HERMES_AGENT_SOURCE=$value is refused: $reason"
done
finish
