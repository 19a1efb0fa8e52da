#!/usr/bin/env bash
# Plugins survive image upgrades (docs/plugins.md, "Install generations"), in real Docker:
#
# * image A (today's image with corepin 1.0 in its core venv) installs a memory provider whose
#   SDK needs a compiled package (markupsafe's C speedups for Python 3.13) through the
#   dashboard's Plugins page: a new install generation, the provider available;
# * a `hermes deps install` SIGKILLed half way leaves that generation active;
# * a root-owned lock planted in the store neither stops an install nor survives a restart;
# * image B (the same plus another core package: a changed core lock) boots on the volume and
#   resolves the packages again before any gateway starts: a new generation, the provider
#   still available, no operator action;
# * image C pins corepin 2.0 in its core, which the SDK cannot run with, and boots with no
#   package index reachable: the gateways start, and the boot, `service status` and `doctor`
#   name the unavailable package and `hermes plugins repair`.
#
# Packages come from an index served on the container's own loopback (the main program); the
# compiled wheel is the agent wheels' markupsafe (downloaded once by the image's own pip when
# that cache is cold).
source "$(dirname "$0")/lib.sh"

cache=${HERMES_DOCKER_CACHE:-/var/cache/hermes-docker-test}
idx=$HDT_TMP/index
mkdir -p "$idx/files"

# The compiled wheel: from the agent wheels' cache, else downloaded for the image's Python.
markupsafe=$(ls "$cache"/agent-wheels/markupsafe-*-cp313-*.whl 2>/dev/null | head -n 1)
if [[ -z $markupsafe ]]; then
    mkdir -p "$cache/plugin-test-wheels"
    markupsafe=$(ls "$cache"/plugin-test-wheels/markupsafe-*-cp313-*.whl 2>/dev/null | head -n 1)
    if [[ -z $markupsafe ]]; then
        ca=${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}} cert=()
        [[ -f $ca ]] && cert=(-v "$ca:/etc/hermes-test-ca.crt:ro" -e PIP_CERT=/etc/hermes-test-ca.crt)
        docker run --rm --network host --entrypoint /opt/hermes/.venv/bin/pip "${cert[@]}" \
            -v "$cache/plugin-test-wheels:/wheels" "$IMAGE" download --disable-pip-version-check \
            --no-input --no-cache-dir --no-deps --only-binary=:all: -d /wheels 'markupsafe==3.0.3' \
            >"$HDT_TMP/pip-download.log" 2>&1 || { fail "downloading markupsafe: $(tail -n 5 "$HDT_TMP/pip-download.log")"; finish; }
        markupsafe=$(ls "$cache"/plugin-test-wheels/markupsafe-*-cp313-*.whl | head -n 1)
    fi
fi
wheels=(python3 "$(dirname "$0")/full/wheel_index.py")
"${wheels[@]}" --link "$idx" "$markupsafe" || { fail "serving markupsafe"; finish; }

# The test's own wheels: the SDK (needs markupsafe's compiled module and corepin 1), corepin 1
# and 2, and an unrelated core package for image B.
"${wheels[@]}" "$idx" tinymem-sdk 0.1.0 "import corepin
assert corepin.API == 1, 'tinymem-sdk needs corepin 1, found API %s' % corepin.API
from markupsafe import _speedups
VERSION = '0.1.0'" 'markupsafe>=2' 'corepin<2' || { fail "building the SDK's wheel"; finish; }
"${wheels[@]}" "$idx" corepin 1.0 'API = 1' || { fail "building corepin 1"; finish; }
"${wheels[@]}" "$idx" corepin 2.0 'API = 2' || { fail "building corepin 2"; finish; }
"${wheels[@]}" "$idx" coreextra 1.0 'X = 1' || { fail "building coreextra"; finish; }
chmod -R a+rX "$idx"

# Images B and C: image A with one more core package, or with another corepin.
derive() { # tag wheel-name...
    local tag=$1 ctx=$HDT_TMP/ctx-$1
    shift
    mkdir -p "$ctx"
    local copies=()
    for w in "$@"; do cp "$idx/files/$w" "$ctx/"; copies+=("/tmp/w/$w"); done
    printf 'FROM %s\nCOPY *.whl /tmp/w/\nRUN /opt/hermes/.venv/bin/python -m pip install -q --no-index --no-deps --disable-pip-version-check %s && rm -rf /tmp/w\n' \
        "$IMAGE" "${copies[*]}" >"$ctx/Dockerfile"
    docker build -q --network none "${LABEL[@]}" -t "$HDT_PREFIX-$tag" "$ctx" >/dev/null \
        || { fail "building image $tag"; finish; }
    HDT_IMAGES+=("$HDT_PREFIX-$tag")
}
HDT_IMAGES=()
trap 'for i in "${HDT_IMAGES[@]}"; do docker rmi -f "$i" >/dev/null 2>&1; done; hdt_cleanup' EXIT
derive a corepin-1.0-py3-none-any.whl
derive b corepin-1.0-py3-none-any.whl coreextra-1.0-py3-none-any.whl
derive c corepin-2.0-py3-none-any.whl

v=$(mkvolume data)
# The provider's manifest on the volume, as an operator puts it there.
# The first boot marks the default profile's gateway running, so every boot below starts it.
plant_memory_plugin "$v" tinymem tinymem-sdk==0.1.0 -e HERMES_GATEWAY_BOOTSTRAP_STATE=running

token=hdt-plugin-token-$$
index=(-e PIP_INDEX_URL=http://127.0.0.1:8000/simple -e PIP_DISABLE_PIP_VERSION_CHECK=1)
serve=(python3 -m http.server 8000 --bind 127.0.0.1 --directory /index)
# start IMAGE-TAG NAME [docker options]: the image on the volume, the index as main program.
start() {
    local tag=$1 name=$2
    shift 2
    IMAGE=$HDT_PREFIX-$tag dstart "$name" -v "$v:/opt/data" -v "$idx:/index:ro" "$@" -- "${serve[@]}"
}
imports='import sys; sys.path.append("/opt/data/lazy-packages"); import tinymem_sdk, markupsafe._speedups as s; print(tinymem_sdk.VERSION, s.__file__.endswith(".so"))'

# --- image A: the dashboard installs the provider -----------------------------------------
a=$(start a a -e HERMES_DASHBOARD=1 -e HERMES_DASHBOARD_SESSION_TOKEN="$token" "${index[@]}")
wait_up "$a"
wait_for 20 "the index answers" -- docker exec "$a" curl -fsS http://127.0.0.1:8000/simple/tinymem-sdk/
wait_for 30 "the dashboard is up" -- service_is "$a" dashboard up
assert_rc 0 "the dashboard's Plugins page installs tinymem" -- docker exec "$a" curl -fsS -m 300 -X POST \
    -H "X-Hermes-Session-Token: $token" http://127.0.0.1:9119/api/plugins/tinymem/install
assert_contains "$OUT" '"ok":true' "the install succeeded"
assert_rc 0 "hermes plugins generations" -- docker exec "$a" hermes plugins generations
assert_contains "$OUT" "generation 1 (active, installed)" "the install is generation 1"
assert_contains "$OUT" "tinymem-sdk==0.1.0 (asked by the dashboard)" "recorded as the dashboard's request"
assert_rc 0 "the provider's SDK and its compiled module import, as hermes" -- \
    docker exec -u hermes "$a" /opt/hermes/.venv/bin/python -c "$imports"
assert_eq "0.1.0 True" "$OUT" "tinymem_sdk with markupsafe's C speedups"
assert_rc 0 "memory status" -- docker exec "$a" hermes memory status
assert_contains "$OUT" "tinymem (available)" "tinymem is available"

# A `hermes deps install` SIGKILLed while its installer writes: generation 1 stays active.
docker exec "$a" sh -c 'mkdir -p /tmp/slow && printf "%s\n" "#!/bin/sh" \
    "while [ \$# -gt 0 ]; do [ \"\$1\" = --target ] && t=\$2; shift; done" \
    "mkdir -p \"\$t/partial\" && echo x > \"\$t/partial/__init__.py\"" "exec sleep 120" >/tmp/slow/uv && chmod 755 /tmp/slow/uv'
docker exec -d -e PATH=/tmp/slow:/usr/local/bin:/usr/bin:/bin "$a" hermes deps install tinymem-sdk==0.1.0 corepin==1.0
wait_for 30 "the killed install's half-written generation" -- \
    docker exec "$a" test -e /opt/data/lazy-packages.generations/0002/partial/__init__.py
docker exec "$a" pkill -KILL -f 'hermes deps install'
docker exec "$a" pkill -KILL -x sleep
assert_rc 0 "readlink lazy-packages" -- docker exec "$a" readlink /opt/data/lazy-packages
assert_eq "lazy-packages.generations/0001" "$OUT" "the killed install left generation 1 active"
assert_rc 0 "generations after the kill" -- docker exec "$a" hermes plugins generations
assert_contains "$OUT" "unfinished (removed by the next install)" "the half-written one is listed as unfinished"

# A lock file root created and kept to itself (mode 0600) does not stop the service user.
docker exec -u root "$a" sh -c 'rm -f /opt/data/lazy-packages.generations/.lock; touch /opt/data/lazy-packages.generations/.lock; chmod 600 /opt/data/lazy-packages.generations/.lock'
assert_rc 0 "an install past a root-owned lock, as hermes" -- \
    docker exec "${index[@]}" "$a" hermes deps install corepin==1.0
assert_rc 0 "generations after it" -- docker exec "$a" hermes plugins generations
assert_contains "$OUT" "generation 2 (active, installed)" "the install went through (the unfinished one removed)"
assert_not_contains "$OUT" "unfinished" "no unfinished generation is left"
docker exec -u root "$a" sh -c 'chown root:root /opt/data/lazy-packages.generations/.lock; chmod 600 /opt/data/lazy-packages.generations/.lock'
docker restart -t 20 "$a" >/dev/null
wait_up "$a"
assert_rc 0 "stat the lock after a restart" -- docker exec "$a" stat -c '%U %a' /opt/data/lazy-packages.generations/.lock
assert_contains "$OUT" "hermes" "the boot's ownership repair gave the lock back to hermes"
docker rm -f "$a" >/dev/null

# --- image B: another core package; the boot resolves the packages again -------------------
# The index must answer during the boot, before any main program: a container of its own whose
# loopback image B's container shares (as a package mirror outside the container would).
ix=$(IMAGE=$HDT_PREFIX-a dstart index -v "$idx:/index:ro" -- "${serve[@]}")
wait_up "$ix"
wait_for 20 "the index container answers" -- docker exec "$ix" curl -fsS http://127.0.0.1:8000/simple/tinymem-sdk/
b=$(track b)
docker run -d --name "$b" "${LABEL[@]}" --network "container:$ix" -v "$v:/opt/data" "${index[@]}" \
    "$HDT_PREFIX-b" sleep 600 >/dev/null || fail "starting image B"
wait_up "$b" 120
assert_rc 0 "image B's boot" -- docker logs "$b"
assert_contains "$OUT" "[init] plugins: plugin packages resolved again for this image (the core packages changed): generation 2 → 3" \
    "the boot resolved the packages again before the gateways"
assert_not_contains "$OUT" "refusing" "the ownership repair re-owns the target's link without a warning"
assert_rc 0 "the provider still imports with image B" -- \
    docker exec -u hermes "$b" /opt/hermes/.venv/bin/python -c "$imports"
assert_eq "0.1.0 True" "$OUT" "tinymem_sdk and its compiled module, from generation 3"
assert_rc 0 "memory status on image B" -- docker exec "$b" hermes memory status
assert_contains "$OUT" "tinymem (available)" "no operator action needed"
assert_rc 0 "container-boot.log" -- docker exec "$b" cat /opt/data/logs/container-boot.log
assert_contains "$OUT" "plugins: building generation 3" "the boot log shows the progress"
docker rm -f "$b" >/dev/null

# --- image C: a core pin the SDK cannot run with, and no package index --------------------
c=$(IMAGE=$HDT_PREFIX-c dstart c -v "$v:/opt/data" -- sleep 600)
wait_up "$c" 120
assert_rc 0 "image C's boot" -- docker logs "$c"
assert_contains "$OUT" "[init] plugins: plugin packages unavailable with this image" "the boot says the packages are unavailable"
assert_contains "$OUT" "tinymem-sdk==0.1.0 (import tinymem_sdk: AssertionError: tinymem-sdk needs corepin 1" "it names the package and why"
assert_contains "$OUT" "run \`hermes plugins repair\`" "and the command that fixes it"
wait_for 60 "the default profile's gateway starts all the same" -- service_is "$c" gateway-default up
assert_rc 0 "service status" -- docker exec "$c" hermes service status
assert_contains "$OUT" "plugins: plugin packages unavailable with this image" "service status says it"
assert_rc 1 "doctor fails" -- docker exec "$c" hermes doctor
assert_contains "$OUT" "plugin packages:" "doctor has the row"
assert_contains "$OUT" "hermes plugins repair" "with the fix"
assert_rc 0 "readlink lazy-packages on image C" -- docker exec "$c" readlink /opt/data/lazy-packages
assert_eq "lazy-packages.generations/0004" "$OUT" "an empty generation that keeps the request is active"
assert_rc 1 "nothing built for image B's core is imported" -- \
    docker exec -u hermes "$c" /opt/hermes/.venv/bin/python -c "$imports"
finish
