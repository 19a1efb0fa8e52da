#!/usr/bin/env bash
# The root-exec shim: `docker exec c hermes ...` as root drops to hermes first, so no root-owned
# file appears on the volume; when it cannot drop it exits 126 with the reason.
source "$(dirname "$0")/lib.sh"

v=$(mkvolume data)
c=$(dstart shim -v "$v:/opt/data" -- sleep 300)
wait_up "$c"

assert_rc 0 "docker exec (root) hermes profile create work" -- docker exec "$c" hermes profile create work
assert_rc 0 "docker exec (root) hermes profile use work" -- docker exec "$c" hermes profile use work
assert_rc 0 "docker exec (root) hermes dump" -- docker exec "$c" hermes dump
assert_rc 0 "docker exec (root) hermes gateway start" -- docker exec "$c" hermes -p work gateway start
wait_for 30 "gateway-work up" -- service_is "$c" gateway-work up
assert_rc 0 "docker exec (root) hermes gateway stop" -- docker exec "$c" hermes -p work gateway stop

assert_rc 0 "the shimmed command runs as hermes" -- docker exec "$c" hermes profile show work --json
roots=$(docker exec "$c" find /opt/data -xdev \( -user root -o -group root \) -printf '%u:%g %p\n')
assert_empty "$roots" "no file on /opt/data belongs to root"

# No service user to drop to: 126 with the reason, never running as root.
docker exec "$c" sh -c "sed -i '/^hermes:/d' /etc/passwd" 
assert_rc 126 "without a hermes user the shim refuses with 126" -- docker exec "$c" hermes dump
assert_match "$OUT" "hermes|HERMES_DOCKER_EXEC_AS_ROOT" "the refusal says why"
roots=$(docker exec "$c" find /opt/data -xdev -user root -printf '%p\n')
assert_empty "$roots" "still no root-owned file"
finish
