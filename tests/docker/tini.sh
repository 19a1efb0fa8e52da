#!/usr/bin/env bash
# /usr/bin/tini is hermes: invoked as tini it is `hermes init` with tini's flags, so compose
# files and scripts written for the original image keep working.
source "$(dirname "$0")/lib.sh"

assert_rc 7 "tini -- CMD: the main program's exit code" -- drun --entrypoint /usr/bin/tini -- -- sh -c 'exit 7'
assert_rc 0 "tini -s -g -- CMD: as PID 1, CMD runs as hermes" -- \
    drun --entrypoint /usr/bin/tini -- -s -g -- sh -c 'echo "pid1=$(ps -o comm= -p 1) uid=$(id -u)"'
assert_contains "$OUT" "uid=10000" "the main program runs as hermes (hermes init dropped privileges)"
assert_contains "$OUT" "[init]" "hermes init booted (its [init] lines)"
assert_rc 0 "tini -e 143" -- drun --entrypoint /usr/bin/tini -- -e 143 -- sh -c 'kill -TERM $$; sleep 5'
assert_rc 0 "the original image's entrypoint: tini -g -- hermes gateway ... routes too" -- \
    drun --entrypoint /usr/bin/tini -- -g -- hermes version
assert_contains "$OUT" "install method:  docker" "hermes ran under tini"
finish
