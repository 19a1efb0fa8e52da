#!/usr/bin/env bash
# A main program that cannot be executed: one line saying what failed, then 127 (not found,
# bad interpreter) or 126 (not executable), as shells do.
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
finish
