#!/usr/bin/env bash
# `HERMES_DASHBOARD=1` with basic-auth credentials: the dashboard listens on all addresses in
# the container, as the original image's does (`${HERMES_DASHBOARD_HOST:-0.0.0.0}`), so a
# published port reaches it from the host — with the credentials, and 401 without. Without
# credentials it stays on 127.0.0.1 (the published port reaches nothing), and a public host
# without credentials is still refused (exit 78, `failed`).
source "$(dirname "$0")/lib.sh"

user=admin
pass=hdt-dashboard-pass-$$
# In /proc/net/tcp: 0.0.0.0:9119 and 127.0.0.1:9119 in LISTEN state (0A).
# Read on the host side: the image need not have grep.
listens_on() { docker exec "$1" cat /proc/net/tcp | grep -qiE "^ *[0-9]+: $2:239F 00000000:0000 0A"; }

if [[ ${HDT_BRIDGE:-0} == 1 ]]; then
    net=(-p 127.0.0.1::9119)
else
    # No default bridge on this engine (dockerd --bridge=none): the bind is checked inside.
    net=(--network none)
    printf 'note: no Docker bridge here: ports are not published, the bind address is checked inside\n'
fi

c=$(track creds)
docker run -d --name "$c" "${LABEL[@]}" "${net[@]}" -e HERMES_DASHBOARD=1 \
    -e HERMES_DASHBOARD_BASIC_AUTH_USERNAME="$user" -e HERMES_DASHBOARD_BASIC_AUTH_PASSWORD="$pass" \
    "$IMAGE" sleep 300 >/dev/null
wait_up "$c"
wait_for 30 "the dashboard is up" -- service_is "$c" dashboard up
wait_for 15 "it listens on 0.0.0.0:9119" -- listens_on "$c" 00000000
if [[ ${HDT_BRIDGE:-0} == 1 ]]; then
    port=$(docker port "$c" 9119/tcp | head -n 1 | sed 's/.*://')
    url="http://127.0.0.1:$port/api/status"
    wait_for 15 "the published port answers" -- curl -s -o /dev/null "$url"
    assert_rc 0 "from the host, with the credentials" -- curl -fsS -u "$user:$pass" "$url"
    assert_contains "$OUT" "services" "the status answers"
    assert_eq 401 "$(curl -s -o /dev/null -w '%{http_code}' "$url")" "from the host, without credentials: 401"
    assert_eq 401 "$(curl -s -o /dev/null -w '%{http_code}' -u "$user:wrong" "$url")" "a wrong password: 401"
fi
assert_rc 0 "the dashboard's start line" -- docker logs "$c"
assert_contains "$OUT" "Hermes dashboard on http://0.0.0.0:9119/ (basic authentication as \`$user\`)" "it says where it listens"

c2=$(track nocreds)
docker run -d --name "$c2" "${LABEL[@]}" "${net[@]}" -e HERMES_DASHBOARD=1 "$IMAGE" sleep 300 >/dev/null
wait_up "$c2"
wait_for 30 "without credentials the dashboard is up" -- service_is "$c2" dashboard up
wait_for 15 "on 127.0.0.1:9119 only" -- listens_on "$c2" 0100007F
if listens_on "$c2" 00000000; then fail "without credentials it must not listen on 0.0.0.0"; else ok "not on 0.0.0.0 without credentials"; fi
if [[ ${HDT_BRIDGE:-0} == 1 ]]; then
    port2=$(docker port "$c2" 9119/tcp | head -n 1 | sed 's/.*://')
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port2/api/status")
    assert_eq 000 "$code" "the published port reaches nothing"
fi

c3=$(track public)
docker run -d --name "$c3" "${LABEL[@]}" --network none -e HERMES_DASHBOARD=1 -e HERMES_DASHBOARD_HOST=0.0.0.0 \
    "$IMAGE" sleep 300 >/dev/null
wait_up "$c3"
wait_for 30 "a public host without credentials parks the dashboard failed" -- service_is "$c3" dashboard failed
assert_eq '{"code": 78}' "$(service_field "$c3" dashboard last_exit)" "exit 78, configuration"
finish
