#!/usr/bin/env bash
# The container's exit code is the main program's (docs/container.md "Shutdown and exit codes").
source "$(dirname "$0")/lib.sh"

assert_rc 0 "main program exits 0" -- drun -- true
assert_rc 42 "main program exits 42" -- drun -- sh -c 'exit 42'
assert_rc 130 "main program killed by SIGINT: 130" -- drun -- sh -c 'kill -INT $$; sleep 5'
assert_rc 137 "main program killed by SIGKILL: 137" -- drun -- sh -c 'kill -KILL $$; sleep 5'
assert_rc 143 "main program killed by SIGTERM: 143" -- drun -- sh -c 'kill -TERM $$; sleep 5'
# tini's -e: an exit code reported as 0 (flags go before `--`, so the entrypoint is spelled out).
assert_rc 0 "-e 143 maps 143 to 0" -- \
    drun --entrypoint /usr/local/bin/hermes -- init -e 143 -- sh -c 'kill -TERM $$; sleep 5'
assert_rc 42 "-e 143 leaves 42 alone" -- \
    drun --entrypoint /usr/local/bin/hermes -- init -e 143 -- sh -c 'exit 42'
assert_rc 0 "-e is repeatable" -- \
    drun --entrypoint /usr/local/bin/hermes -- init -e 3 -e 42 -- sh -c 'exit 42'
# `docker kill -s` goes to the main program.
c=$(dstart kill -- sleep 300)
wait_up "$c"
docker kill -s INT "$c" >/dev/null
assert_eq 130 "$(wait_exit "$c")" "docker kill -s INT: the main program's 130"
finish
