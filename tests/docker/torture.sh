#!/usr/bin/env bash
# The torture run in real Docker (docs/docker.md#stopping): the native gateway in front of the
# stub model, four clients writing sessions (tests/docker/full/writers.py, every acknowledged
# turn recorded at once outside the container), while the scenario, at random from a fixed seed:
# `docker kill`s the container (PID 1 SIGKILLed, everything with it), kills it a moment into
# its start, `docker stop`s it with a short timeout (-t 2: SIGKILL mid-stop when the drain is
# not done) and with Docker's default (10 s), restarts the gateway, SIGKILLs it, and backs up.
# After every event the container serves again (a turn gets through) and every SQLite file of
# the volume passes `integrity_check`; at the end every acknowledged turn is in state.db.
# HDT_TORTURE_EVENTS (default 10) and HDT_TORTURE_SEED (default 4242) change the run.
source "$(dirname "$0")/lib.sh"

events=${HDT_TORTURE_EVENTS:-10}
RANDOM=${HDT_TORTURE_SEED:-4242}
key=torture-docker-key-0123456789abcdef
data=$HDT_TMP/data out=$HDT_TMP/out
mkdir -p "$data" "$out"
printf 'API_SERVER_KEY=%s\n' "$key" >"$data/.env"
printf 'model:\n  default: stub\n  provider: custom\n  base_url: http://127.0.0.1:%s/v1\n  api_key: stub-key\n' \
    "$HDT_STUB_PORT" >"$data/config.yaml"
chown -R 10000:10000 "$data"
c=$(full_start torture "$data" -v "$out:/out" -e HERMES_GATEWAY_BOOTSTRAP_STATE=running)

health() { docker exec "$c" curl -fsS -m 5 http://127.0.0.1:8642/health >/dev/null 2>&1; }
acked() { cat "$out"/acked-*.txt 2>/dev/null | wc -l; }
more_acked_than() { (($(acked) > $1)); }
run=0 writers_of=""
# Serving again after an event: the supervisor answers, the gateway's /health does, the
# clients are (re)started when the container was, and one more turn gets through.
serving() {
    running "$c" || docker start "$c" >/dev/null
    wait_up "$c" 60 || return 1
    wait_for 60 "the gateway serves after event $1" -- health || return 1
    # The clients live in the container: a new start, new clients.
    local started
    started=$(docker inspect -f '{{.State.StartedAt}}' "$c")
    if [[ $started != "$writers_of" ]]; then
        writers_of=$started run=$((run + 1))
        docker exec -d "$c" python3 /opt/hdt/writers.py 8642 "$key" "/out/acked-$run.txt" /tmp/stop "r$run" 4
    fi
    local before
    before=$(acked)
    wait_for 30 "a turn gets through after event $1" -- more_acked_than "$before"
}

serving start
kinds=(docker-kill kill-in-start stop-short stop-default gateway-restart kill-gateway backup)
declare -A tally=()
corrupt=0
for ((event = 1; event <= events; event++)); do
    sleep "0.$((RANDOM % 8 + 2))"
    kind=${kinds[RANDOM % ${#kinds[@]}]}
    tally[$kind]=$((${tally[$kind]:-0} + 1))
    case $kind in
        docker-kill) docker kill "$c" >/dev/null ;;
        kill-in-start)
            docker kill "$c" >/dev/null
            docker start "$c" >/dev/null
            sleep "0.$((RANDOM % 9 + 1))"
            docker kill "$c" >/dev/null 2>&1 ;;
        stop-short) docker stop -t 2 "$c" >/dev/null ;;
        stop-default) docker stop "$c" >/dev/null ;;
        gateway-restart) docker exec "$c" hermes gateway restart >/dev/null 2>&1 ;;
        kill-gateway)
            pid=$(service_pid "$c" gateway-default)
            ((pid)) && docker exec "$c" kill -KILL "$pid" ;;
        backup) assert_rc 0 "backup during event $event" -- docker exec "$c" hermes backup create --keep 2 ;;
    esac
    serving "$event ($kind)" || break
    if ! bad=$(python3 "$HDT_LIB_DIR/full/integrity.py" check "$data"); then
        corrupt=$((corrupt + 1))
        fail "every database passes integrity_check after event $event ($kind)" "$bad"
    fi
done
docker exec "$c" touch /tmp/stop
docker stop "$c" >/dev/null
summary=$(python3 "$HDT_LIB_DIR/full/integrity.py" lost "$data" "$out"/acked-*.txt)
# One JSON line, which bench/torture/docker.sh collects.
by_kind=$(for k in "${!tally[@]}"; do printf '"%s":%s\n' "$k" "${tally[$k]}"; done | sort | paste -sd,)
read -r _ acknowledged _ lost <<<"$(tail -n1 <<<"$summary")"
printf 'torture-docker: {"events":%s,"seed":%s,"seconds":%s,"by_kind":{%s},"turns_acknowledged":%s,"lost":%s,"corrupt":%s}\n' \
    "$((event - 1))" "${HDT_TORTURE_SEED:-4242}" "$SECONDS" "$by_kind" "${acknowledged:-0}" "${lost:-0}" "$corrupt"
assert_eq "$events" "$((event - 1))" "every event was followed by a serving gateway"
assert_match "$(tail -n1 <<<"$summary")" "^acknowledged [1-9][0-9]* lost 0$" "no acknowledged turn lost"
assert_eq 0 "$corrupt" "no database corrupt after any event"
assert_rc 0 "every database passes integrity_check at the end" -- python3 "$HDT_LIB_DIR/full/integrity.py" check "$data"
finish
