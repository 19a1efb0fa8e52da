#!/usr/bin/env bash
# The container environment reaches the main program and the gateways, with HOME=/opt/data.
source "$(dirname "$0")/lib.sh"

assert_rc 0 "env of the main program" -- drun -e MY_SETTING=from-docker -e TZ=Asia/Tokyo -- \
    sh -c 'echo "MY_SETTING=$MY_SETTING HOME=$HOME USER=$USER LOGNAME=$LOGNAME HERMES_HOME=$HERMES_HOME"; date +tz=%Z; echo "pwd=$(pwd)"'
assert_contains "$OUT" "MY_SETTING=from-docker HOME=/opt/data USER=hermes LOGNAME=hermes HERMES_HOME=/opt/data" \
    "docker run -e reaches the main program; HOME, USER, LOGNAME from hermes's passwd entry"
assert_contains "$OUT" "tz=JST" "TZ is honoured (tzdata)"
assert_contains "$OUT" "pwd=/opt/data" "working directory is the image's WORKDIR"
assert_rc 0 "docker run -w" -- drun -w /tmp -- pwd
assert_contains "$OUT" "/tmp" "docker run -w sets the main program's directory"

# A gateway (here a profile's gateway.command) gets the same environment.
d=$HDT_TMP/data
mkdir -p "$d"
cat >"$d/config.yaml" <<'YAML'
gateway:
  command: "env > /opt/data/gateway-env.txt; exec sleep 300"
YAML
chown -R 10000:10000 "$d"
c=$(dstart gw -v "$d:/opt/data" -e MY_SETTING=from-docker -e HERMES_GATEWAY_BOOTSTRAP_STATE=running -- sleep 300)
wait_for 30 "the gateway wrote its environment" -- test -s "$d/gateway-env.txt"
sleep 0.3
genv=$(cat "$d/gateway-env.txt" 2>/dev/null)
assert_contains "$genv" "MY_SETTING=from-docker" "docker run -e reaches the gateway"
assert_contains "$genv" "HOME=/opt/data" "the gateway's HOME is /opt/data"
assert_contains "$genv" "HERMES_HOME=/opt/data" "the gateway's HERMES_HOME"
assert_contains "$genv" "HERMES_PROFILE=default" "the gateway knows its profile"
assert_eq "10000" "$(stat -c %u "$d/gateway-env.txt")" "the gateway runs as hermes"
finish
