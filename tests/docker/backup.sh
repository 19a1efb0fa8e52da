#!/usr/bin/env bash
# Backups as operators take them (docs/backup.md): `docker exec … hermes backup create -o - >
# file` streams an archive out of a running container, a second container verifies it and
# restores it onto its own volume while its gateway runs — the gateway is stopped for the swap
# and started after, the restored files are the service user's although `docker exec` ran as
# root, and the settings and profiles are back.
source "$(dirname "$0")/lib.sh"

c=$(dstart src -e HERMES_GATEWAY_BOOTSTRAP_STATE=running -- sleep 300)
wait_up "$c"
assert_rc 0 "config set in the running container" -- docker exec "$c" hermes config set model.default backed-up-model
assert_rc 0 "a named profile" -- docker exec "$c" hermes profile create work --no-alias
archive=$HDT_TMP/hermes-backup.zip
rc=0
docker exec "$c" hermes backup create -o - >"$archive" 2>"$HDT_TMP/create.err" || rc=$?
assert_eq 0 "$rc" "backup create -o - streams the archive out of the container ($(cat "$HDT_TMP/create.err"))"
assert_contains "$(cat "$HDT_TMP/create.err")" "Backed up the whole volume" "its summary goes to stderr"
assert_contains "$(head -c 2 "$archive")" "PK" "what came out is a zip"

c2=$(dstart dst -e HERMES_GATEWAY_BOOTSTRAP_STATE=running -- sleep 300)
wait_up "$c2"
wait_for 60 "the second container's gateway is up" -- service_is "$c2" gateway-default up
pid_before=$(service_pid "$c2" gateway-default)
docker cp "$archive" "$c2:/tmp/hermes-backup.zip"
assert_rc 0 "verify in the other container" -- docker exec "$c2" hermes backup verify /tmp/hermes-backup.zip
assert_contains "$OUT" "every checksum matches the manifest" "the manifest is checked"
assert_rc 0 "restore as root through docker exec" -- docker exec -u 0 "$c2" hermes backup restore /tmp/hermes-backup.zip --yes
assert_contains "$OUT" "Restarted: gateway-default" "the gateway was stopped for the restore and started after"
wait_for 60 "the gateway is up again" -- service_is "$c2" gateway-default up
assert_ne "$pid_before" "$(service_pid "$c2" gateway-default)" "it is a new gateway process"
assert_rc 0 "config get" -- docker exec "$c2" hermes config get model.default
assert_contains "$OUT" "backed-up-model" "the setting is restored"
assert_rc 0 "profile list" -- docker exec "$c2" hermes profile list
assert_contains "$OUT" "work" "the named profile is restored"
assert_eq "10000" "$(docker exec "$c2" stat -c %u /opt/data/config.yaml)" "a replaced file keeps its owner"
assert_eq "10000" "$(docker exec "$c2" stat -c %u /opt/data/profiles/work/SOUL.md)" "a new file is the service user's"
assert_eq "600" "$(docker exec "$c2" stat -c %a /opt/data/.env)" ".env stays 0600"
finish
