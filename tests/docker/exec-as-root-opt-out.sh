#!/usr/bin/env bash
# HERMES_DOCKER_EXEC_AS_ROOT=1/true/yes: `docker exec c hermes ...` runs as root on purpose;
# any other value drops to hermes.
source "$(dirname "$0")/lib.sh"

c=$(dstart optout -- sleep 300)
wait_up "$c"

owner() { docker exec "$c" stat -c %U "/opt/data/profiles/$1"; }
i=0
for value in 1 true ' YES '; do
    i=$((i + 1))
    assert_rc 0 "HERMES_DOCKER_EXEC_AS_ROOT='$value': profile create" -- \
        docker exec -e "HERMES_DOCKER_EXEC_AS_ROOT=$value" "$c" hermes profile create "asroot$i" --no-alias
    assert_eq root "$(owner "asroot$i")" "HERMES_DOCKER_EXEC_AS_ROOT='$value' runs as root"
done
for value in 0 no ''; do
    i=$((i + 1))
    assert_rc 0 "HERMES_DOCKER_EXEC_AS_ROOT='$value': profile create" -- \
        docker exec -e "HERMES_DOCKER_EXEC_AS_ROOT=$value" "$c" hermes profile create "dropped$i" --no-alias
    assert_eq hermes "$(owner "dropped$i")" "HERMES_DOCKER_EXEC_AS_ROOT='$value' drops to hermes"
done
# Set for the whole container, it applies to every exec.
c2=$(dstart optout2 -e HERMES_DOCKER_EXEC_AS_ROOT=1 -- sleep 300)
wait_up "$c2"
docker exec "$c2" hermes profile create viaenv --no-alias >/dev/null 2>&1
assert_eq root "$(docker exec "$c2" stat -c %U /opt/data/profiles/viaenv)" "container-wide HERMES_DOCKER_EXEC_AS_ROOT=1"
finish
