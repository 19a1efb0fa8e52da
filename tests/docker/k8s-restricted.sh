#!/usr/bin/env bash
# Kubernetes' "restricted" profile, emulated in Docker: non-root (runAsUser 10000), read-only
# root file system with an emptyDir /tmp as the kubelet makes it (mode 0777 with the fsGroup's
# setgid group, and no sticky bit: nothing under it can be private, so the control socket
# must find /dev/shm by itself), every capability dropped, no-new-privileges, and an
# fsGroup-style volume (root-owned, group 3000, setgid, group-writable).
source "$(dirname "$0")/lib.sh"

d=$HDT_TMP/pvc
mkdir -p "$d"
chown 0:3000 "$d"
chmod 2775 "$d"
# An emptyDir on the node's disk, as the kubelet makes it (Docker's --tmpfs is always sticky).
tmp=$HDT_TMP/emptydir
mkdir -p "$tmp"
chown 0:3000 "$tmp"
chmod 2777 "$tmp"
c=$(dstart k8s -v "$d:/opt/data" --user 10000:10000 --group-add 3000 --read-only -v "$tmp:/tmp" \
    --cap-drop ALL --security-opt no-new-privileges -e HERMES_GATEWAY_BOOTSTRAP_STATE=running -- sleep 300)
wait_up "$c" 30
assert_rc 0 "service status" -- docker exec "$c" hermes service status
assert_rc 0 "the control socket is in /dev/shm/hermes" -- docker exec "$c" test -S /dev/shm/hermes/supervisor.sock
assert_rc 0 "/tmp is as a pod's emptyDir: not sticky" -- docker exec "$c" stat -c %a /tmp
assert_eq "2777" "$OUT" "mode of /tmp"
wait_for 30 "gateway-default up" -- service_is "$c" gateway-default up
wait_for 15 "hermes health exits 0" -- docker exec "$c" hermes health
assert_rc 0 "profile create" -- docker exec "$c" hermes profile create work --no-alias
assert_rc 0 "seeded files are group 3000 (fsGroup) and hermes's" -- stat -c '%u:%g %n' "$d/config.yaml"
assert_eq "10000:3000 $d/config.yaml" "$OUT" "config.yaml owner and group"
t=$(now)
docker stop -t 10 "$c" >/dev/null
assert_lt "$(elapsed "$t")" 2 "docker stop"
finish
