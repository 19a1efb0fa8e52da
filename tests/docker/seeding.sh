#!/usr/bin/env bash
# First boot seeds the volume once; later boots keep the user's edits.
source "$(dirname "$0")/lib.sh"

v=$(mkvolume data)
boot() { drun -v "$v:/opt/data" "$@"; }
assert_rc 0 "first boot" -- boot -e HERMES_GATEWAY_BOOTSTRAP_STATE=running \
    -e 'HERMES_AUTH_JSON_BOOTSTRAP={"version":1,"providers":{"first":{}}}' -- \
    sh -c 'cd /opt/data && ls -A && stat -c "%n %U %a" .env config.yaml SOUL.md auth.json && cat gateway_state.json && grep -c "^API_SERVER_KEY=" .env'
first=$OUT
for f in .env config.yaml SOUL.md auth.json gateway_state.json; do
    assert_contains "$first" "$f" "first boot created $f"
done
assert_contains "$first" "auth.json hermes 600" "auth.json is hermes's, 0600"
assert_contains "$first" ".env hermes 600" ".env is hermes's, 0600"
assert_contains "$first" '"gateway_state"' "gateway_state.json seeded from HERMES_GATEWAY_BOOTSTRAP_STATE"
# Only the key's line: the supervisor mirrors its services' output to the same stdout.
key1=$(boot -- sh -c 'grep "^API_SERVER_KEY=" /opt/data/.env' 2>/dev/null | grep '^API_SERVER_KEY=')
assert_match "$key1" '^API_SERVER_KEY=[0-9a-f]{64}$' "API_SERVER_KEY is 64 hex characters"

# The user edits files, then the container is re-created.
boot -- sh -c 'echo "# my edit" >>/opt/data/config.yaml; echo "my soul" >/opt/data/SOUL.md; echo "MY_VAR=1" >>/opt/data/.env' >/dev/null 2>&1
assert_rc 0 "second boot, different bootstrap values" -- boot -e HERMES_GATEWAY_BOOTSTRAP_STATE=running \
    -e 'HERMES_AUTH_JSON_BOOTSTRAP={"version":1,"providers":{"second":{}}}' -- \
    sh -c 'tail -n 1 /opt/data/config.yaml; cat /opt/data/SOUL.md; grep MY_VAR /opt/data/.env; cat /opt/data/auth.json; grep "^API_SERVER_KEY=" /opt/data/.env'
second=$OUT
assert_not_contains "$second" "seeded" "nothing seeded again on the second boot"
assert_contains "$second" "# my edit" "config.yaml edit kept"
assert_contains "$second" "my soul" "SOUL.md edit kept"
assert_contains "$second" "MY_VAR=1" ".env edit kept"
assert_contains "$second" '"first"' "auth.json bootstrap is first boot only"
assert_not_contains "$second" '"second"' "auth.json not replaced by a later HERMES_AUTH_JSON_BOOTSTRAP"
assert_contains "$second" "$key1" "API_SERVER_KEY unchanged"
finish
