#!/usr/bin/env bash
# Plugins reach the agent in the full image (issue 14, item 3, in real Docker): a package that
# `hermes deps install` puts in the durable target on the volume is importable by the agent's
# interpreter (the target last on its sys.path, docker/agent-site.sh), the install uses the
# agent's venv (HERMES_VENV) and writes nothing into it, and after `docker rm` + `docker run` on
# the same volume the agent still imports it. The package comes from an index served on the
# container's own loopback (full/wheel_index.py), without outside network.
source "$(dirname "$0")/lib.sh"
use_full_image
here=$(cd "$(dirname "$0")" && pwd)

idx=$HDT_TMP/index
python3 "$here/full/wheel_index.py" "$idx" agentplug-sdk 0.1.0 'ORIGIN = "durable-target"' \
    || { fail "building the test wheel"; finish; }
python3 "$here/full/wheel_index.py" "$idx" agentlazy-sdk 0.2.0 'ORIGIN = "the-agents-installer"' \
    || { fail "building the second test wheel"; finish; }
chmod -R a+rX "$idx"

v=$(mkvolume data)
c=$(dstart one -v "$v:/opt/data" -v "$idx:/index:ro" -- python3 -m http.server 8000 --bind 127.0.0.1 --directory /index)
wait_up "$c"
wait_for 20 "the index answers" -- docker exec "$c" curl -fsS http://127.0.0.1:8000/simple/agentplug-sdk/

docker exec "$c" touch /tmp/before-install
sleep 1
assert_rc 0 "hermes deps install agentplug-sdk==0.1.0 from the local index" -- \
    docker exec -e PIP_INDEX_URL=http://127.0.0.1:8000/simple -e PIP_DISABLE_PIP_VERSION_CHECK=1 \
    "$c" hermes deps install agentplug-sdk==0.1.0
assert_rc 0 "the package is in the durable target" -- docker exec "$c" stat -c '%U %n' /opt/data/lazy-packages/agentplug_sdk/__init__.py
assert_eq "hermes /opt/data/lazy-packages/agentplug_sdk/__init__.py" "$OUT" "installed as hermes into /opt/data/lazy-packages"
assert_empty "$(docker exec "$c" find /opt/hermes-agent /opt/hermes/.venv -newer /tmp/before-install -not -type d)" \
    "neither the agent's venv nor the core venv was written"
# The ABI stamp is the agent interpreter's (docs/plugins.md: both installers write the same one).
abi=$(docker exec "$c" cat /opt/data/lazy-packages/.python-abi 2>&1)
want=$(docker exec "$c" /opt/hermes-agent/bin/python -c 'import sys, sysconfig; print("%d.%d:%s" % (sys.version_info[0], sys.version_info[1], sysconfig.get_config_var("EXT_SUFFIX")))' 2>&1)
assert_eq "$want" "$abi" "the target's ABI stamp is the agent interpreter's"

agent_import='import agentplug_sdk, sys; print(agentplug_sdk.ORIGIN, sys.path.index("/opt/data/lazy-packages") == len(sys.path) - 1)'
assert_rc 0 "the agent's interpreter imports it, as the hermes user" -- \
    docker exec -u hermes "$c" /opt/hermes-agent/bin/python -c "$agent_import"
assert_eq "durable-target True" "$OUT" "imported from the target, which is last on the agent's sys.path"

# The agent's own runtime installer (its code unchanged) goes through the `uv` shim on PATH: a
# new install generation holding both packages, its request recorded as the agent's.
agent_lazy='from tools import lazy_deps as L; L.LAZY_DEPS["test.agent"] = ("agentlazy-sdk==0.2.0",); L.ensure("test.agent", prompt=False); import agentlazy_sdk; print(agentlazy_sdk.ORIGIN)'
assert_rc 0 "the agent's own installer installs, as the hermes user" -- \
    docker exec -u hermes -e PIP_INDEX_URL=http://127.0.0.1:8000/simple -e PIP_DISABLE_PIP_VERSION_CHECK=1 \
    "$c" /opt/hermes-agent/bin/python -c "$agent_lazy"
assert_eq "the-agents-installer" "$OUT" "imported from what the agent's installer put in the target"
assert_rc 0 "hermes plugins generations" -- docker exec "$c" hermes plugins generations
assert_contains "$OUT" "generation 2 (active, installed)" "the agent's install is a new generation"
assert_contains "$OUT" "agentlazy-sdk==0.2.0 (asked by the agent's installer)" "recorded as the agent's"
assert_contains "$OUT" "agentplug-sdk==0.1.0 (asked by hermes deps)" "ours kept beside it"
assert_empty "$(docker exec "$c" find /opt/hermes-agent /opt/hermes/.venv -newer /tmp/before-install -not -type d)" \
    "still nothing written into either venv"

docker rm -f "$c" >/dev/null
assert_rc 0 "after docker rm + docker run on the same volume, the agent still imports it" -- \
    drun -v "$v:/opt/data" --entrypoint su -- -s /bin/sh hermes -c "/opt/hermes-agent/bin/python -c '$agent_import'"
assert_eq "durable-target True" "$OUT" "the package survived the container"
finish
