#!/usr/bin/env bash
# A volume from the original image works (issue 12, item 6). The original Python implementation
# (hermes-agent 0.19.0 from PyPI, on the host, in the venv tests/docker/original/venv.sh makes)
# writes a data directory with its own commands (`config set`, `profile create`, `profile use`;
# gateway records and a stored conversation through its own Python functions, see
# original/gateway_history.py and original/session.py); our image boots on it, bind-mounted and
# owned by uid 10000 as the original image leaves it, and must honour its profiles, `.env`,
# `config.yaml` and `gateway_state.json` desired states, also across `docker restart`, and
# rewrite nothing but what the docs say (tests/docker/original/compare.py compares every file,
# mode and owner before and after, and lists each allowed change with the doc that allows it).
source "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)

orig=${HDT_ORIGINAL_HERMES:-}
if [[ -z $orig ]]; then
    orig=$(bash "$here/original/venv.sh") || { fail "cannot make the original's venv (tests/docker/original/venv.sh)"; finish; }
fi
orig_py=$(dirname "$orig")/python
echo "the original: $orig ($("$orig_py" -c 'import importlib.metadata as m; print("hermes-agent", m.version("hermes-agent"))'))"

# --- the original writes the data directory ------------------------------------------------
data=$HDT_TMP/data
mkdir -p "$data" "$HDT_TMP/home"
# ITS `hermes` (never ours), with HERMES_HOME = the data directory, as in the original image,
# and nothing from this machine's environment (no provider keys, no ~/.hermes).
O() { env -i PATH=/usr/bin:/bin LANG=C.UTF-8 HOME="$HDT_TMP/home" HERMES_HOME="$data" NO_COLOR=1 "$orig" "$@"; }
original() { assert_rc 0 "original: hermes $*" -- O "$@"; }

original config set model.default openai/gpt-4o-mini
original config set model.provider openrouter
original config set OPENROUTER_API_KEY sk-or-original-default-0123456789 # `config set` of a key goes to .env
original profile create work --no-alias --description "Work agent"
original -p work config set model.default gpt-4.1-mini
original -p work config set model.provider openai
original -p work config set model.base_url http://127.0.0.1:9/v1
original -p work config set OPENAI_API_KEY sk-original-work-0123456789
for p in paused flaky idle; do original profile create "$p" --no-alias; done
original profile use work
# A conversation in work's state.db, stored by the original's SessionDB (its schema, its rows).
assert_rc 0 "original: a stored conversation in work's state.db" -- \
    env -i PATH=/usr/bin:/bin LANG=C.UTF-8 HOME="$HDT_TMP/home" "$orig_py" "$here/original/session.py" "$data/profiles/work" orig-session-1

# Each gateway's history, left by the original's own gateway and service-manager functions
# (no CLI command writes these files without running real gateways; see gateway_history.py):
#   default  ran, then the container was restarted (unexpected SIGTERM: gateway_state=running)
#   work     operator `gateway start` (desired_state=running), then SIGKILL (stale gateway.pid)
#   paused   operator `gateway stop` (desired_state=stopped, gateway_state=stopped)
#   flaky    startup_failed, then operator `gateway restart` (desired_state=running wins)
#   idle     never ran: no gateway_state.json
for h in default:signalled work:killed paused:stopped flaky:failed; do
    assert_rc 0 "original: gateway history of ${h%%:*} (${h#*:})" -- \
        env -i PATH=/usr/bin:/bin LANG=C.UTF-8 HOME="$HDT_TMP/home" "$orig_py" "$here/original/gateway_history.py" "$data" "${h%%:*}" "${h#*:}"
done
for f in gateway_state.json profiles/work/gateway_state.json profiles/paused/gateway_state.json profiles/flaky/gateway_state.json; do
    echo "$f: $(cat "$data/$f")"
done

# The original image runs everything as hermes, uid/gid 10000 (same as ours): an operator's
# volume is that user's. Modes stay as the original made them (.env and config.yaml 0600).
chown -R 10000:10000 "$data"
cp -a "$data" "$HDT_TMP/before"
echo "sha256 of every file the original wrote:"
(cd "$data" && find . -type f -printf '%P\n' | LC_ALL=C sort | xargs sha256sum | sed 's/^/    /')

# --- our image boots on it ------------------------------------------------------------------
c=$(dstart boot -v "$data:/opt/data" -- sleep 600)
wait_up "$c"
for p in default work flaky; do wait_for 30 "gateway-$p up" -- service_is "$c" "gateway-$p" up; done

check_states() { # when
    local when=$1 p
    for p in default work flaky; do
        assert_eq up "$(service_state "$c" "gateway-$p")" "$when: gateway-$p follows the recorded running state: up"
    done
    for p in paused idle; do
        assert_eq down "$(service_state "$c" "gateway-$p")" "$when: gateway-$p (recorded $([[ $p == paused ]] && echo stopped || echo nothing)) registered down"
    done
}
check_states "first boot"

list=$(docker exec "$c" hermes profile list --json 2>&1)
names=$(python3 -c 'import json,sys; print(" ".join(sorted(p["name"] for p in json.load(sys.stdin))))' <<<"$list" 2>&1)
assert_eq "default flaky idle paused work" "$names" "hermes profile list lists every profile the original made"
active=$(python3 -c 'import json,sys; print(" ".join(p["name"] for p in json.load(sys.stdin) if p["active"]))' <<<"$list" 2>&1)
assert_eq work "$active" "the original's \`profile use work\` (active_profile) is the active profile"
desc=$(python3 -c 'import json,sys; print([p["description"] for p in json.load(sys.stdin) if p["name"] == "work"][0])' <<<"$list" 2>&1)
assert_eq "Work agent" "$desc" "the original's profile description (profile.yaml) is read"

dump_fields() { # profile -> "model provider base_url keys-set"
    docker exec "$c" hermes -p "$1" dump --json 2>&1 | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d.get("model"), d.get("provider"), d.get("base_url"), ",".join(k["env"] for k in d.get("api_keys", []) if k.get("set")))' 2>&1
}
assert_eq "openai/gpt-4o-mini openrouter (not set) OPENROUTER_API_KEY,API_SERVER_KEY" "$(dump_fields default)" \
    "default: the model, provider (config.yaml) and key (.env) the original set are read"
assert_eq "gpt-4.1-mini openai http://127.0.0.1:9/v1 OPENAI_API_KEY" "$(dump_fields work)" \
    "work: the model, provider, base_url (config.yaml) and key (.env) the original set are read"

bootlog=$(cat "$data/logs/container-boot.log" 2>&1)
echo "container-boot.log:"; sed 's/^/    /' <<<"$bootlog"
assert_match "$bootlog" "profile=default prior_state=running action=started" "boot log: default (gateway_state running) started"
assert_match "$bootlog" "profile=work prior_state=running action=started" "boot log: work (desired_state running) started"
assert_match "$bootlog" "profile=flaky prior_state=running action=started" "boot log: flaky (desired_state running over startup_failed) started"
assert_match "$bootlog" "profile=paused prior_state=stopped action=registered" "boot log: paused (desired_state stopped) registered, not started"
assert_match "$bootlog" "profile=idle prior_state=None action=registered" "boot log: idle (no state) registered"

logs=$(docker logs "$c" 2>&1)
assert_not_contains "$(grep '^\[init\]' <<<"$logs")" "warning" "boot says no warning about the original's volume"
assert_not_contains "$logs" "gateway_state.json" "no gateway complains about the original's gateway_state.json"

# --- restart: our own records reconcile the same way ----------------------------------------
docker restart -t 10 "$c" >/dev/null
wait_up "$c"
for p in default work flaky; do wait_for 30 "gateway-$p up after docker restart" -- service_is "$c" "gateway-$p" up; done
check_states "after docker restart"
docker stop -t 10 "$c" >/dev/null

# --- nothing rewritten but what the docs say -------------------------------------------------
changes=$(python3 "$here/original/compare.py" "$HDT_TMP/before" "$data" 10000:10000 default work flaky 2>&1)
echo "changes on the volume after two boots and a stop:"; sed 's/^/    /' <<<"$changes"
assert_empty "$(grep -v '^allowed: ' <<<"$changes")" "nothing on the volume changed but what docs/container.md says boot writes"
for f in profiles/paused/gateway_state.json profiles/work/config.yaml profiles/work/.env config.yaml active_profile; do
    assert_eq "$(sha256sum <"$HDT_TMP/before/$f")" "$(sha256sum <"$data/$f" 2>&1)" "$f: same sha256 as the original wrote"
done
assert_eq "" "$(ls "$data/profiles/idle/gateway_state.json" 2>/dev/null)" "idle: no gateway_state.json written for a gateway that never ran"
# And the original can still read what it wrote: its conversation, after our gateway used the same state.db.
original -p work sessions list
assert_contains "$OUT" "orig-session-1" "the original still lists its conversation in work's state.db"
finish
