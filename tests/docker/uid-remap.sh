#!/usr/bin/env bash
# HERMES_UID/HERMES_GID (PUID/PGID) remap hermes to the owner of a bind mount; ownership repair
# touches only what it documents, never a blanket chown of the volume.
source "$(dirname "$0")/lib.sh"

d=$HDT_TMP/data
mkdir -p "$d/notes/deep" "$d/other"
echo "mine" >"$d/notes/deep/a.txt"
echo "someone else's" >"$d/other/b.txt"
printf 'OPENAI_API_KEY=sk-test\n' >"$d/.env"
chown -R 1234:1234 "$d"
chown 4321:4321 "$d/other" "$d/other/b.txt"
chmod 0644 "$d/.env"

assert_rc 0 "boot with HERMES_UID=1234 HERMES_GID=1234 on a bind mount" -- \
    drun -v "$d:/opt/data" -e HERMES_UID=1234 -e HERMES_GID=1234 -- \
    sh -c 'echo "ids=$(id -u):$(id -g)"; touch /opt/data/created-by-main'
assert_contains "$OUT" "ids=1234:1234" "the main program runs as the remapped ids"
assert_eq "1234:1234" "$(stat -c %u:%g "$d/created-by-main")" "a file the main program creates is 1234's on the host"
assert_eq "1234:1234" "$(stat -c %u:%g "$d/config.yaml")" "seeded config.yaml is 1234's"
assert_eq "4321:4321" "$(stat -c %u:%g "$d/other/b.txt")" "a file of another owner in an unknown subtree is left alone (no blanket chown)"
assert_eq "4321:4321" "$(stat -c %u:%g "$d/other")" "its directory too"
assert_eq "600" "$(stat -c %a "$d/.env")" ".env made 0600 by ownership repair"
assert_eq "sk-test" "$(grep -o 'sk-test' "$d/.env")" ".env content kept"

# PUID/PGID aliases; HERMES_* wins over them.
assert_rc 0 "PUID/PGID aliases" -- drun -v "$d:/opt/data" -e PUID=1234 -e PGID=1234 -- sh -c 'echo "ids=$(id -u):$(id -g)"'
assert_contains "$OUT" "ids=1234:1234" "PUID/PGID remap"
mkdir -p "$HDT_TMP/d2"
chown 2345:2345 "$HDT_TMP/d2"
assert_rc 0 "HERMES_UID wins over PUID" -- drun -v "$HDT_TMP/d2:/opt/data" -e PUID=1234 -e PGID=1234 \
    -e HERMES_UID=2345 -e HERMES_GID=2345 -- sh -c 'echo "ids=$(id -u):$(id -g)"'
assert_contains "$OUT" "ids=2345:2345" "HERMES_UID/HERMES_GID win"
assert_rc 0 "an invalid HERMES_UID is ignored with a warning" -- drun -e HERMES_UID=0 -- sh -c 'echo "ids=$(id -u)"'
assert_contains "$OUT" "ids=10000" "hermes keeps uid 10000"
assert_contains "$OUT" "warning" "a warning is printed"
finish
