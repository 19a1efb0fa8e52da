#!/usr/bin/env bash
# Orphans are reaped: as PID 1 and as a sub-reaper under `docker run --init`.
source "$(dirname "$0")/lib.sh"

# Five grandchildren lose their parent at once, re-parent to init, exit; then count zombies.
orphans='for i in 1 2 3 4 5; do sh -c "sleep 0.3 &" ; done; sleep 2;
ps -eo stat=,pid=,ppid=,comm= | awk "\$1 ~ /^Z/" ; echo zombies-checked'

assert_rc 0 "orphans under hermes init as PID 1" -- drun -- sh -c "$orphans"
assert_eq "zombies-checked" "$(plain "$OUT")" "no zombie left as PID 1 (ps lists none)"

assert_rc 0 "orphans under docker run --init (hermes init is a sub-reaper)" -- drun --init -- sh -c "$orphans"
assert_eq "zombies-checked" "$(plain "$OUT")" "no zombie left under --init"

assert_rc 0 "who is PID 1 under --init" -- drun --init -- ps -o pid=,comm= -p 1
assert_contains "$OUT" "docker-init" "under --init, docker's init is PID 1 and hermes is not"

# Orphans of a `docker exec` session are reaped by PID 1 too.
c=$(dstart exec -- sleep 300)
wait_up "$c"
docker exec "$c" sh -c 'for i in 1 2 3; do sh -c "sleep 0.2 &"; done' >/dev/null
sleep 1.5
z=$(docker exec "$c" ps -eo stat=,comm= | awk '$1 ~ /^Z/')
assert_empty "$z" "no zombie left by a docker exec session's orphans"
finish
