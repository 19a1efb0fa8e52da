#!/usr/bin/env bash
# The full image itself (issue 14, item 4): at most 1 GB, our `hermes` on PATH showing both
# versions, the agent (hermes-agent 0.19.0) in a root-owned venv the service user cannot write,
# its extras importable, the durable plugin target last on its sys.path, and the tools it runs.
source "$(dirname "$0")/lib.sh"
use_full_image

size=$(docker image inspect -f '{{.Size}}' "$IMAGE")
mb=$(awk -v s="$size" 'BEGIN { printf "%.1f", s / 1e6 }')
echo "full image size: $mb MB ($size bytes)"
assert_le "$mb" 1000 "the full image is at most 1 GB uncompressed"

env=$(docker image inspect -f '{{join .Config.Env "\n"}}' "$IMAGE")
for kv in HERMES_HOME=/opt/data HERMES_VENV=/opt/hermes-agent HERMES_AGENT_CLI=/opt/hermes-agent/bin/hermes \
          HERMES_DISABLE_LAZY_INSTALLS=1 HERMES_LAZY_INSTALL_TARGET=/opt/data/lazy-packages; do
    assert_contains "$env" "$kv" "ENV $kv"
done
assert_eq "${HDT_GIT_SHA:-}" "$(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.revision"}}' "$IMAGE")" \
    "label org.opencontainers.image.revision is the commit"

# --- one hermes: ours on PATH, the agent's version shown ------------------------------------
assert_rc 0 "hermes on PATH is this project's binary" -- drun --entrypoint sh -- -c 'readlink -f "$(command -v hermes)"'
assert_eq /opt/hermes/bin/hermes "$OUT" "command -v hermes resolves to /opt/hermes/bin/hermes"
assert_rc 0 "hermes version" -- drun -- hermes version
assert_match "$OUT" "hermes ${HDT_VERSION//./\\.}" "hermes version names our version"
assert_match "$OUT" 'hermes-agent: +0\.19\.0 \(/opt/hermes-agent/bin/hermes\)' "hermes version names the agent's version and CLI"
agent_json=$(drun -- hermes version --json 2>/dev/null | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["agent"], sort_keys=True))' 2>&1)
assert_contains "$agent_json" '"0.19.0"' "hermes version --json: the agent's version"
# The agent's own CLI answers for itself (not through ours).
assert_rc 0 "the agent's CLI runs" -- drun --entrypoint /opt/hermes-agent/bin/hermes -- --version
assert_contains "$OUT" "0.19.0" "the agent's CLI reports 0.19.0"

# --- the sealed venv -------------------------------------------------------------------------
sealed=$(drun --entrypoint sh -- -c '
    find /opt/hermes-agent ! -user root | head -n 3
    find /opt/hermes-agent ! -type l -perm /022 | head -n 3
    sp=$(/opt/hermes-agent/bin/python -c "import sysconfig; print(sysconfig.get_path(\"purelib\"))")
    for d in /opt/hermes-agent /opt/hermes-agent/bin "$sp" "$sp/hermes_cli"; do
        su -s /bin/sh hermes -c "touch $d/.probe" 2>/dev/null && echo "writable: $d"
    done
    true')
assert_empty "$sealed" "the agent venv is root-owned, has no group/other-writable file, and the service user can write nowhere in it"

# --- what it ships ---------------------------------------------------------------------------
# The extras of docker/agent-requirements.in: messaging (Telegram, Discord, Slack, aiohttp for
# the API server), MCP's client, Anthropic's SDK; imported as the service user, from the volume's
# working directory, without network.
assert_rc 0 "the agent's platforms and extras import" -- drun --entrypoint su -- -s /bin/sh hermes -c \
    '/opt/hermes-agent/bin/python -c "import telegram, discord, slack_bolt, aiohttp, mcp, anthropic, gateway.platforms.api_server; print(\"imports ok\")"'
assert_contains "$OUT" "imports ok" "telegram, discord, slack_bolt, aiohttp, mcp, anthropic and the API server platform import"
# The durable plugin target comes last on the agent's sys.path (docker/agent-site.sh).
assert_rc 0 "the agent's sys.path with the plugin target" -- drun -e HERMES_LAZY_INSTALL_TARGET=/tmp/t --entrypoint sh -- -c \
    'mkdir -p /tmp/t && /opt/hermes-agent/bin/python -c "import sys; print(sys.path[-1])"'
assert_eq /tmp/t "$OUT" "HERMES_LAZY_INSTALL_TARGET is the last entry of the agent's sys.path"

tools=$(drun --entrypoint sh -- -c '
    git --version | cut -d" " -f1-2
    ssh -V 2>&1 | cut -d_ -f1
    rg --version | head -n 1 | cut -d" " -f1
    node -e "console.log(\"node\", process.versions.node.split(\".\")[0] >= 18)"
    npm --version >/dev/null && echo npm
    npx --version >/dev/null && echo npx
    python3 -c "import sys; print(\"python\", sys.version_info[:2] >= (3, 11) and sys.version_info[:2] < (3, 14))"' 2>&1)
assert_eq "git version
OpenSSH
ripgrep
node true
npm
npx
python True" "$tools" "git, ssh, rg, node (>= 18), npm, npx and a Python the agent supports are there"
finish
