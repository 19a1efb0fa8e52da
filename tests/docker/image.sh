#!/usr/bin/env bash
# The image itself: size, labels, user, files, environment, entrypoint, healthcheck, tools.
source "$(dirname "$0")/lib.sh"

# The size budget judges what we add to the base (tests/docker/image-budget.txt), not the base:
# it prints the base, each of our layers, the binary, the whole image and both package lists.
base=${HDT_BASE_IMAGE:-debian:trixie-slim}
budget=$(python3 "$(dirname "$0")/image_budget.py" check --image "$IMAGE" --base "$base" \
    ${HDT_HOST_BINARY:+--binary "$HDT_HOST_BINARY"} 2>&1)
rc=$?
printf '%s\n' "$budget"
assert_eq 0 "$rc" "our layers are within their budgets (tests/docker/image-budget.txt)"
assert_match "$budget" $'\nimage: [0-9.]+ MB = base [0-9.]+ MB \\+ ours [0-9.]+ MB' "the whole image's size is printed beside the base's"

# The base's packages are recorded in the image, as the base had them.
recorded=$(drun --entrypoint cat -- /opt/hermes/base-packages.txt)
actual=$(docker run --rm --network none "${LABEL[@]}" --entrypoint dpkg-query "$base" \
    -W -f '${Package} ${Version} ${Installed-Size}\n')
assert_eq "$actual" "$recorded" "/opt/hermes/base-packages.txt lists the base's packages, versions and sizes"

label() { docker image inspect -f "{{index .Config.Labels \"org.opencontainers.image.$1\"}}" "$IMAGE"; }
assert_eq "${HDT_GIT_SHA:-}" "$(label revision)" "label org.opencontainers.image.revision is the commit"
assert_eq "${HDT_VERSION:-}" "$(label version)" "label org.opencontainers.image.version is the package version"
assert_match "$(label source)" '^https://' "label org.opencontainers.image.source is a URL"
assert_match "$(label created)" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T' "label org.opencontainers.image.created is a date"
assert_eq "MIT" "$(label licenses)" "label org.opencontainers.image.licenses"

cfg() { docker image inspect -f "$1" "$IMAGE"; }
assert_eq '[/usr/local/bin/hermes init --]' "$(cfg '{{.Config.Entrypoint}}')" "entrypoint is hermes init --"
assert_eq 'SIGTERM' "$(cfg '{{.Config.StopSignal}}')" "stop signal"
assert_eq 'map[/opt/data:{}]' "$(cfg '{{.Config.Volumes}}')" "volume /opt/data"
assert_eq '' "$(cfg '{{.Config.User}}')" "PID 1 starts as root (it drops to hermes itself)"
assert_eq '[CMD /usr/local/bin/hermes health]' "$(cfg '{{.Config.Healthcheck.Test}}')" "healthcheck asks hermes health"
env=$(cfg '{{join .Config.Env "\n"}}')
for kv in HERMES_HOME=/opt/data HERMES_VENV=/opt/hermes/.venv HERMES_DISABLE_LAZY_INSTALLS=1 \
          HERMES_LAZY_INSTALL_TARGET=/opt/data/lazy-packages; do
    assert_contains "$env" "$kv" "ENV $kv"
done

assert_rc 0 "user hermes is 10000:10000 with home /opt/data" -- \
    drun --entrypoint getent -- passwd hermes
assert_match "$OUT" '^hermes:x:10000:10000:[^:]*:/opt/data:' "passwd entry of hermes"
assert_rc 0 "group hermes is 10000" -- drun --entrypoint getent -- group hermes
assert_match "$OUT" '^hermes:x:10000:' "group entry of hermes"

files=$(drun --entrypoint sh -- -c '
    test -f /opt/hermes/.container-image && echo marker
    cat /opt/hermes/bin/.install_method
    cat /opt/hermes/bin/.hermes_build_sha 2>/dev/null || echo no-baked-sha
    readlink -f /usr/bin/tini
    readlink -f /usr/local/bin/hermes
    head -n 3 /opt/hermes/LICENSE | tail -n 1
    stat -c "%U:%G %a" /opt/data
    stat -L -c "%U %A" /opt/hermes/.venv/bin/python3
    /opt/hermes/.venv/bin/python -m pip --version | cut -d" " -f1
    python --version | cut -d" " -f1
    python3 -c "import venv, ssl, sqlite3; print(\"stdlib\")"
    curl --version | head -n 1 | cut -d" " -f1
    ps --version >/dev/null && echo procps
    test -f /usr/share/zoneinfo/Europe/Paris && echo tzdata
    test -s /etc/ssl/certs/ca-certificates.crt && echo ca-certificates
    su -s /bin/sh hermes -c "touch /opt/hermes/.venv/x" 2>/dev/null && echo venv-writable || echo venv-sealed
')
expected="marker
docker
${HDT_GIT_SHA:-no-baked-sha}
/opt/hermes/bin/hermes
/opt/hermes/bin/hermes
Copyright (c) 2026 The Hermes developers
hermes:hermes 750
root -rwxr-xr-x
pip
Python
stdlib
curl
procps
tzdata
ca-certificates
venv-sealed"
assert_eq "$expected" "$files" "image files: marker, install stamp, baked SHA, tini and hermes names, license, data dir, sealed venv with pip, python, curl, procps, tzdata, CA bundle"
finish
