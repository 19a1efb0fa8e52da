#!/usr/bin/env bash
# `docker run --read-only` with only the volume (and a tmpfs /tmp) writable: PID 1 and every
# client agree where the control socket is, so control commands work.
source "$(dirname "$0")/lib.sh"

v=$(mkvolume data)
c=$(dstart ro -v "$v:/opt/data" --read-only --tmpfs /tmp -e HERMES_GATEWAY_BOOTSTRAP_STATE=running -- sleep 300)
wait_for 30 "docker exec hermes service status answers" -- supervisor_up "$c"
assert_rc 0 "service status" -- docker exec "$c" hermes service status
wait_for 30 "gateway-default up" -- service_is "$c" gateway-default up
assert_rc 0 "profile create" -- docker exec "$c" hermes profile create work --no-alias
assert_not_contains "$OUT" "warning" "profile create registered its gateway without a warning"
wait_for 10 "gateway-work registered" -- service_is "$c" gateway-work down
assert_rc 0 "gateway start" -- docker exec "$c" hermes -p work gateway start
wait_for 30 "gateway-work up" -- service_is "$c" gateway-work up
# (the main program counts as `starting` for its first second)
wait_for 15 "hermes health exits 0" -- docker exec "$c" hermes health

# Read-only without a tmpfs: the socket goes to /dev/shm, which every container has.
assert_rc 0 "--read-only without a tmpfs: boot uses /dev/shm" -- drun -v "$(mkvolume data2):/opt/data" --read-only -- sh -c 'echo MAIN-RAN'
assert_contains "$OUT" "control socket in \`/dev/shm/hermes\`" "boot says where the socket went"
assert_contains "$OUT" "MAIN-RAN" "the main program ran"
# No private place for the socket (here: the one place named is on the read-only root; the
# volume belongs to the service user, so root never puts it there): boot stops with one error
# naming each place tried and the fix.
assert_rc 1 "no writable runtime directory: boot stops" -- drun -v "$(mkvolume data3):/opt/data" --read-only -e HERMES_RUNTIME_DIR=/usr/share/hermes-run -- sh -c 'echo MAIN-RAN'
assert_not_contains "$OUT" "MAIN-RAN" "the main program did not run"
assert_contains "$OUT" "error: no private directory for the control socket" "one error line says what is missing"
assert_contains "$OUT" "--tmpfs" "the hint names the fix"
# A client that cannot reach any supervisor says so (never a silent skip).
assert_rc 1 "service status with no supervisor at all says so" -- drun --read-only --entrypoint /usr/local/bin/hermes -- service status
assert_match "$OUT" "error:" "one error line"
finish
