#!/usr/bin/env bash
# A damaged state.db is caught at boot and restored (docs/backup.md#hermes-backup-check): a
# container serves, an archive is taken, the container stops, eight bytes of state.db's second
# page are overwritten on the volume (as a torn write leaves it), and the next start's stage 6c
# finds it before the gateway starts, restores it from the archive, sets the damaged copy aside
# (the service user's), and says so in the boot output, container-boot.log and `service status`.
source "$(dirname "$0")/lib.sh"

v=$(mkvolume data)
c=$(dstart dbc -v "$v:/opt/data" -e HERMES_GATEWAY_BOOTSTRAP_STATE=running -- sleep 300)
wait_up "$c"
wait_for 60 "the gateway is up (it creates state.db)" -- service_is "$c" gateway-default up
assert_rc 0 "an archive of the volume" -- docker exec "$c" hermes backup create
docker stop -t 60 "$c" >/dev/null

# The damage, from a throwaway container on the same volume.
docker run --rm --network none "${LABEL[@]}" -v "$v:/opt/data" --entrypoint sh "$IMAGE" -c \
    "printf '\377\377\377\377\377\377\377\377' | dd of=/opt/data/state.db bs=1 seek=4096 conv=notrunc 2>/dev/null"

docker start "$c" >/dev/null
wait_up "$c"
wait_for 60 "the gateway is up again" -- service_is "$c" gateway-default up
logs=$(docker logs "$c" 2>&1)
assert_contains "$logs" "[init] database check: profile \`default\`: \`state.db\` failed its check" "caught at boot"
assert_contains "$logs" "restored from \`/opt/data/backups/hermes-backup-" "restored from the archive"
bootlog=$(docker exec "$c" cat /opt/data/logs/container-boot.log)
assert_contains "$bootlog" "restored from" "said in container-boot.log"
assert_rc 0 "service status" -- docker exec "$c" hermes service status
assert_contains "$OUT" "database: \`state.db\` failed its check" "said by service status"
aside=$(docker exec "$c" sh -c 'ls /opt/data/backups/set-aside/')
assert_contains "$aside" "-default-state.db" "the damaged copy is set aside"
assert_eq "10000" "$(docker exec "$c" sh -c 'stat -c %u /opt/data/backups/set-aside/*-default-state.db')" "the service user's"
assert_eq "10000" "$(docker exec "$c" stat -c %u /opt/data/logs/container-boot.log)" "the boot log stays the service user's"
finish
