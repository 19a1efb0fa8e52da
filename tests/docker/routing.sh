#!/usr/bin/env bash
# Routing of CMD (docs/container.md "Routing of CMD"): what `docker run IMAGE <cmd>` runs.
source "$(dirname "$0")/lib.sh"

assert_rc 0 "no CMD runs \`hermes\` (its help)" -- drun
assert_contains "$OUT" "Usage: hermes" "no CMD: hermes usage printed"

assert_rc 0 "\`--version\` runs \`hermes --version\`" -- drun -- --version
assert_match "$OUT" "hermes $HDT_VERSION \\[" "--version: hermes version line"

assert_rc 0 "\`dump\` runs \`hermes dump\`" -- drun -- dump
assert_contains "$OUT" "--- hermes dump ---" "dump: dump printed"

# A hermes subcommand wins over a program of the same name on PATH.
printf '#!/bin/sh\necho SHADOW-PROGRAM-RAN\n' >"$HDT_TMP/dump"
chmod 0755 "$HDT_TMP/dump"
assert_rc 0 "\`dump\` with a \`dump\` program on PATH still runs hermes dump" -- \
    drun -v "$HDT_TMP/dump:/usr/local/bin/dump:ro" -- dump
assert_not_contains "$OUT" "SHADOW-PROGRAM-RAN" "the PATH program named dump did not run"
assert_contains "$OUT" "--- hermes dump ---" "hermes dump ran instead"

assert_rc 0 "a program on PATH runs as is" -- drun -- echo routed-as-is
assert_contains "$OUT" "routed-as-is" "echo printed its argument"

assert_rc 0 "\`sh -c ...\` runs as is, as the hermes user" -- drun -- sh -c 'echo "uid=$(id -u) gid=$(id -g) user=$(id -un)"'
assert_contains "$OUT" "uid=10000 gid=10000 user=hermes" "main program runs as hermes"

assert_rc 0 "a path to an executable runs as is" -- drun -- /bin/echo by-path
assert_contains "$OUT" "by-path" "/bin/echo printed its argument"

assert_rc 2 "an unknown word goes to hermes, which prints usage and exits 2" -- drun -- no-such-word
assert_contains "$OUT" "no-such-word" "the usage error names the word"

assert_rc 0 "\`profile list\` runs hermes profile list" -- drun -- profile list
assert_contains "$OUT" "default" "profile list shows the default profile"
finish
