#!/usr/bin/env bash
# A volume written by the original 0.19 keeps working in the full image (issue 14, item 5). The
# original (hermes-agent 0.19.0 on the host, tests/docker/original/venv.sh) writes a data
# directory with its own commands and functions: the model (`config set`, a custom provider at
# the stub on loopback), a conversation in state.db (original/session.py), memory through its
# MemoryStore (full/memory.py), a cron job (`cron create`), and the record of a gateway that was
# running when its container stopped (original/gateway_history.py). The full image boots on it
# (bind-mounted, owned by uid 10000 as the original image leaves it): the gateway comes up with
# the agent engine, `hermes sessions list` and `hermes cron list` (handed to the agent's CLI)
# show what the original stored, and the memory reaches the model in the agent's system prompt.
source "$(dirname "$0")/lib.sh"
use_full_image
here=$(cd "$(dirname "$0")" && pwd)

orig=${HDT_ORIGINAL_HERMES:-}
if [[ -z $orig ]]; then
    orig=$(bash "$here/original/venv.sh") || { fail "cannot make the original's venv (tests/docker/original/venv.sh)"; finish; }
fi
orig_py=$(dirname "$orig")/python

# --- the original writes the data directory ------------------------------------------------
data=$HDT_TMP/data
key=full-original-volume-key-0123456789
mkdir -p "$data" "$HDT_TMP/home"
clean_env=(env -i PATH=/usr/bin:/bin LANG=C.UTF-8 HOME="$HDT_TMP/home" NO_COLOR=1)
O() { "${clean_env[@]}" HERMES_HOME="$data" "$orig" "$@"; }
original() { assert_rc 0 "original: hermes $*" -- O "$@"; }
original config set model.default stub-model
original config set model.provider custom
original config set model.base_url "http://127.0.0.1:$HDT_STUB_PORT/v1"
original config set model.api_key stub-upstream-key
original config set model.context_length 131072
original config set security.tirith_enabled false
original cron create --name nightly-digest "0 9 * * *" "Summarise the day's messages"
# The API server platform, as an operator of the original image switches it on in .env.
printf 'API_SERVER_ENABLED=true\nAPI_SERVER_HOST=127.0.0.1\nAPI_SERVER_PORT=8642\nAPI_SERVER_KEY=%s\n' "$key" >>"$data/.env"
assert_rc 0 "original: a stored conversation in state.db" -- \
    "${clean_env[@]}" "$orig_py" "$here/original/session.py" "$data" orig-session-1
assert_rc 0 "original: memory through its MemoryStore" -- \
    "${clean_env[@]}" "$orig_py" "$here/full/memory.py" "$data" "The build server is named zephyr-42" "The user signs as Ada"
assert_rc 0 "original: its gateway was running when the container stopped" -- \
    "${clean_env[@]}" "$orig_py" "$here/original/gateway_history.py" "$data" default signalled
chown -R 10000:10000 "$data"

# --- the full image boots on it --------------------------------------------------------------
c=$(full_start boot "$data")
wait_up "$c"
serving() { service_is "$c" gateway-default up && agent_health "$c"; }
wait_for 120 "the agent's gateway (recorded running) serves" -- serving
assert_contains "$(docker exec "$c" hermes gateway status --json 2>&1)" '"engine": "agent"' "the gateway runs with the agent engine"

assert_rc 0 "hermes sessions list (the agent's CLI)" -- docker exec "$c" hermes sessions list
assert_contains "$OUT" "orig-session-1" "the original's conversation is listed"
assert_rc 0 "hermes cron list (the agent's CLI)" -- docker exec "$c" hermes cron list
assert_contains "$OUT" "nightly-digest" "the original's cron job is listed"
assert_contains "$OUT" "0 9 * * *" "with its schedule"

# The memory reaches the model: the system prompt the agent sends the stub carries it.
assert_rc 0 "the openai SDK asks the agent" -- openai_ask "$c" "$key" "what do you remember"
assert_contains "$OUT" "plain: echo: what do you remember" "the agent answers with the stub's reply"
system=$(stub_requests "$c" | python3 -c '
import json, sys
for line in sys.stdin:
    for m in json.loads(line)["body"].get("messages", []):
        if m.get("role") == "system":
            print(m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content")))
' 2>&1)
assert_contains "$system" "zephyr-42" "the original's MEMORY.md is in the agent's system prompt"
assert_contains "$system" "The user signs as Ada" "the original's USER.md is in the agent's system prompt"

assert_empty "$(find "$data" ! -user 10000 -printf '%P (%u)\n' | head -n 5)" "nothing on the volume is owned by another user than hermes"
docker stop -t 20 "$c" >/dev/null
# And the original still reads what it wrote, after the full image used the same files.
original sessions list
assert_contains "$OUT" "orig-session-1" "the original still lists its conversation"
original cron list
assert_contains "$OUT" "nightly-digest" "the original still lists its cron job"
finish
