#!/usr/bin/env bash
# Services declared under `services:` in the volume's config.yaml run under PID 1, as the
# service user (the volume is the service user's to write, so what it declares never runs as
# root); a bad entry and one that takes a gateway's name are reported and left out, and the
# others still run.
source "$(dirname "$0")/lib.sh"

v=$(mkvolume data)
# Seed the volume (first boot), then declare the services.
assert_rc 0 "first boot seeds the volume" -- drun -v "$v:/opt/data" -- true
assert_rc 0 "declare services in config.yaml" -- drun -v "$v:/opt/data" -- sh -c '
cat >> /opt/data/config.yaml <<YAML
services:
  whoami:
    command: ["sh", "-c", "id -u > /opt/data/whoami.txt; exec sleep 300"]
  broken:
    restart: sometimes
    command: "true"
  gateway-default:
    command: ["sleep", "1"]
YAML'

c=$(dstart declared -v "$v:/opt/data" -- sleep 300)
wait_up "$c"
wait_for 30 "declared service whoami up" -- service_is "$c" whoami up
wait_for 10 "whoami wrote its uid" -- docker exec "$c" test -s /opt/data/whoami.txt
assert_eq "10000" "$(docker exec "$c" cat /opt/data/whoami.txt)" "the declared service runs as the service user, not root"
assert_rc 0 "the file it wrote is the service user's" -- docker exec "$c" stat -c '%u' /opt/data/whoami.txt
assert_eq "10000" "$OUT" "whoami.txt owner"
logs=$(docker logs "$c" 2>&1)
assert_contains "$logs" "restart" "the bad entry is reported in the boot log"
assert_contains "$logs" "gateway-default" "the entry with a gateway's name is reported"
assert_rc 0 "start the default profile's gateway" -- docker exec "$c" hermes gateway start
wait_for 30 "gateway-default up" -- service_is "$c" gateway-default up
# The supervisor's row (the declared entry of that name is listed too, as `invalid`).
pid=$(docker exec "$c" hermes service status --json | python3 -c '
import json, sys
for s in json.load(sys.stdin):
    if s["name"] == "gateway-default" and s["state"] != "invalid":
        print(s["pid"])')
assert_rc 0 "the declared gateway-default is listed as invalid beside the gateway" -- docker exec "$c" hermes service status gateway-default
assert_contains "$OUT" "invalid" "status of the reserved name shows the invalid entry"
assert_rc 0 "the command of gateway-default" -- docker exec "$c" sh -c "tr '\\0' ' ' < /proc/$pid/cmdline"
assert_contains "$OUT" "gateway run" "gateway-default runs the gateway, not the declared sleep"
finish
