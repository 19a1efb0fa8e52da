#!/usr/bin/env bash
# The from-source way in (the Dockerfile's default target), without the Rust image: a stand-in
# `rust` image whose rustup/cargo only record how they were called and hand over the binary
# built on the host (the classic builder also builds the runtime-prebuilt stage on the way,
# which takes the same binary from the context). Checks the TARGETARCH -> Rust target mapping, the clear error for other
# architectures, HERMES_GIT_SHA reaching cargo, and that `runtime` is the same runtime stage.
source "$(dirname "$0")/lib.sh"

fake=hdt-fake-rust:$$
ctx=$HDT_TMP/fake
mkdir -p "$ctx"
cp "$HDT_HOST_BINARY" "$ctx/hermes"
# The stand-in carries a nonce so it is a new image every run: the classic builder prints a RUN
# step's output only when the step runs, and an identical stand-in would let every builder step
# come from the cache of an earlier run (same commit, same arguments), printing nothing to check.
nonce="$(date +%s.%N)-$$"
cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM debian:trixie-slim
LABEL hermes-docker-test-standin=1
COPY hermes /opt/prebuilt/hermes
RUN echo "$nonce" >/etc/hdt-nonce
DOCKERFILE
cat >>"$ctx/Dockerfile" <<'DOCKERFILE'
RUN printf '#!/bin/sh\necho "rustup $*"\n' >/usr/local/bin/rustup \
 && printf '#!/bin/sh\nset -e\necho "cargo $* HERMES_GIT_SHA=$HERMES_GIT_SHA"\nwhile [ "$1" != --target ]; do shift; done\nmkdir -p "target/$2/release"\ncp /opt/prebuilt/hermes "target/$2/release/hermes"\n' >/usr/local/bin/cargo \
 && chmod 0755 /usr/local/bin/rustup /usr/local/bin/cargo
DOCKERFILE
docker build -q -t "$fake" "$ctx" >/dev/null || fail "building the stand-in rust image"
# At the end: the stand-in, the image built, and the builder stage's untagged images (they carry
# the stand-in's label), so the per-run stand-ins do not pile up in the suite's Docker data.
trap 'docker rmi -f "$fake" "$fake-out" >/dev/null 2>&1; docker image prune -f --filter label=hermes-docker-test-standin=1 >/dev/null 2>&1; hdt_cleanup' EXIT

build() { DOCKER_BUILDKIT=0 docker build --force-rm --network host -f "$HDT_REPO/docker/Dockerfile" --build-arg RUST_IMAGE="$fake" --build-arg HERMES_BINARY="$HDT_CONTEXT_BINARY" "$@" "$HDT_REPO"; }

assert_rc 0 "default target with TARGETARCH=amd64" -- build --build-arg TARGETARCH=amd64 --build-arg HERMES_GIT_SHA="$HDT_GIT_SHA" -t "$fake-out"
assert_contains "$OUT" "rustup target add x86_64-unknown-linux-gnu" "amd64 maps to x86_64-unknown-linux-gnu"
assert_contains "$OUT" "cargo build --release --locked -p hermes --target x86_64-unknown-linux-gnu HERMES_GIT_SHA=$HDT_GIT_SHA" "cargo builds the locked release with HERMES_GIT_SHA"
assert_contains "$OUT" "hermes $HDT_VERSION" "the runtime stage ran the built binary"
assert_rc 0 "the runtime image from source" -- docker run --rm --network none "$fake-out" version
assert_contains "$OUT" "install method:  docker" "same runtime stage: docker install stamp"
assert_rc 0 "same runtime stage: image marker and sealed venv" -- \
    docker run --rm --network none --entrypoint sh "$fake-out" -c 'test -f /opt/hermes/.container-image && test -x /opt/hermes/.venv/bin/python && readlink /usr/bin/tini'
assert_eq "/opt/hermes/bin/hermes" "$OUT" "tini name present"

assert_rc 0 "arm64 maps to aarch64 (the builder stage alone)" -- build --target builder --build-arg TARGETARCH=arm64
assert_contains "$OUT" "rustup target add aarch64-unknown-linux-gnu" "arm64 maps to aarch64-unknown-linux-gnu"
assert_rc 1 "any other TARGETARCH stops the build" -- build --target builder --build-arg TARGETARCH=s390x
# The classic builder passes the full image's stages on its way to the builder: whichever stage
# meets the architecture first refuses it in the same words.
assert_contains "$OUT" "TARGETARCH=s390x: the image supports amd64 and arm64 only" "with a clear message"
finish
