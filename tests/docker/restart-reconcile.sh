#!/usr/bin/env bash
# profile create -> gateway start -> docker restart: the started gateway comes back, a stopped
# one stays stopped, a never-started one stays down; container-boot.log says what boot did.
source "$(dirname "$0")/lib.sh"

v=$(mkvolume data)
c=$(dstart rc -v "$v:/opt/data" -- sleep 300)
wait_up "$c"
for p in work paused idle; do
    assert_rc 0 "profile create $p" -- docker exec "$c" hermes profile create "$p" --no-alias
done
assert_rc 0 "gateway start (work)" -- docker exec "$c" hermes -p work gateway start
assert_rc 0 "gateway start (paused)" -- docker exec "$c" hermes -p paused gateway start
wait_for 30 "gateway-work up" -- service_is "$c" gateway-work up
wait_for 30 "gateway-paused up" -- service_is "$c" gateway-paused up
assert_rc 0 "gateway stop (paused)" -- docker exec "$c" hermes -p paused gateway stop
wait_for 30 "gateway-paused down" -- service_is "$c" gateway-paused down
assert_eq down "$(service_state "$c" gateway-idle)" "a new profile's gateway is registered down"

t=$(now)
docker restart -t 10 "$c" >/dev/null
wait_for 30 "supervisor answers after docker restart" -- supervisor_up "$c"
wait_for 30 "gateway-work up again" -- service_is "$c" gateway-work up
echo "restart to gateway-work up: $(elapsed "$t") s"
assert_eq up "$(service_state "$c" gateway-work)" "started gateway reconciled to running after docker restart"
assert_eq down "$(service_state "$c" gateway-paused)" "stopped gateway stays stopped"
assert_eq down "$(service_state "$c" gateway-idle)" "never-started gateway stays down"
assert_eq down "$(service_state "$c" gateway-default)" "default gateway (never started) stays down"

bootlog=$(docker exec "$c" cat /opt/data/logs/container-boot.log)
assert_match "$bootlog" "profile=work prior_state=running action=started" "boot log: work started"
assert_match "$bootlog" "profile=paused prior_state=stopped action=registered" "boot log: paused registered, not started"
assert_match "$bootlog" "profile=idle prior_state=[A-Za-z]+ action=registered" "boot log: idle registered"
assert_eq 2 "$(grep -c 'profile=default ' <<<"$bootlog")" "one boot-log line per profile per boot (default: two boots)"
assert_eq 1 "$(grep -c 'profile=work ' <<<"$bootlog")" "work, created after the first boot: one line"
state=$(docker exec "$c" cat /opt/data/profiles/paused/gateway_state.json)
assert_match "$state" '"desired_state": ?"stopped"' "the operator's stop is recorded as desired_state"
finish
