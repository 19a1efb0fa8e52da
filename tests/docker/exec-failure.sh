#!/usr/bin/env bash
# A main program that cannot be executed: one line on stderr saying what failed, in tini's
# shape (`[FATAL tini (7)] exec /x failed: …` → `[FATAL hermes (1)] cannot start: …`), nothing
# on stdout, then 127 (not found, bad interpreter) or 126 (not executable), as shells do.
source "$(dirname "$0")/lib.sh"

printf '#!/nonexistent/interpreter\necho never\n' >"$HDT_TMP/badinterp"
chmod 0755 "$HDT_TMP/badinterp"
printf '#!/bin/sh\necho never\n' >"$HDT_TMP/noexec"
chmod 0644 "$HDT_TMP/noexec"

assert_rc 127 "missing program given by path" -- drun -- /nonexistent/program
assert_contains "$OUT" "/nonexistent/program" "the message names the program"
assert_rc 127 "bad interpreter" -- drun -v "$HDT_TMP/badinterp:/usr/local/bin/badinterp:ro" -- badinterp
assert_contains "$OUT" "badinterp" "the message names the program"
assert_rc 126 "not executable" -- drun -v "$HDT_TMP/noexec:/usr/local/bin/noexec:ro" -- /usr/local/bin/noexec
assert_contains "$OUT" "noexec" "the message names the program"

err=$(drun -- /nonexistent/program 2>&1 >/dev/null)
assert_contains "$err" '[FATAL hermes (1)] cannot start: `/nonexistent/program`: command not found' \
    "said on stderr, in tini's shape"
out=$(drun -- /nonexistent/program 2>/dev/null)
assert_not_contains "$out" "cannot start" "not on stdout"
assert_not_contains "$out" "[main]" "not as the main program's output"
finish
