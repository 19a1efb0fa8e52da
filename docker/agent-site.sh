#!/bin/sh
# Makes what `hermes deps install` / `hermes memory setup` put in the durable install target
# importable by every interpreter start of the agent's venv (its gateway, its CLI, cron, the
# children it spawns with its own Python), without changing the agent's code.
#
#   agent-site.sh VENV      e.g. agent-site.sh /opt/hermes-agent   (run at image build time)
#
# It writes one `.pth` file into VENV's site-packages. At start-up Python runs its single
# `import` line, which reads HERMES_LAZY_INSTALL_TARGET (the variable both installers read;
# unset or empty: nothing happens), adds that directory with site.addsitedir (so `.pth` files
# inside it work, as the agent's own activation does) and keeps every entry it added at the END
# of sys.path: the venv's own packages win every name collision. PYTHONPATH is not used because
# it would put the target first. The name sorts after the venv's other `.pth` files, so the
# directories they add stay ahead of the target.
#
# As root (`HERMES_DOCKER_EXEC_AS_ROOT=1`, or a root process of the image) the target is added
# only when root owns it and nobody else can write it: the target is on the volume, the
# service user's to write, and a `.pth` or module planted there must never run as root.
#
# The line avoids comprehensions and lambdas on purpose: site executes it with separate
# globals and locals, where a nested scope cannot see the line's own variables.
#
# It also installs the socket hook (`hermes_listen.py` and `00-hermes-listen.pth`), which lets
# the agent's API server serve the socket the supervisor holds for its gateway; the supervisor
# passes one only to an agent whose venv has it (docs/gateway.md, "Engines"). Its files have one
# source, crates/hermes-services/src/agent_hook/ (the `hermes` binary embeds the same text and
# compares it to decide): they are taken from beside this script (the image build copies them
# there) or else from that directory of the repository this script is in. It is not compiled:
# only a gateway started with a socket imports it, and compiling it there takes milliseconds.
set -eu

if [ "$#" -ne 1 ] || [ ! -x "$1/bin/python" ]; then
    echo "usage: agent-site.sh VENV (a venv with bin/python; got: ${1:-nothing})" >&2
    exit 2
fi

site_packages=$(PYTHONDONTWRITEBYTECODE=1 "$1/bin/python" -c \
    'import sysconfig; print(sysconfig.get_path("purelib"))')
pth="$site_packages/zz-hermes-lazy-target.pth"

cat >"$pth" <<'PTH'
import os, sys, site, itertools; _t = os.environ.get("HERMES_LAZY_INSTALL_TARGET", "").strip(); _b = list(sys.path); _s = _t and os.path.isdir(_t) and os.stat(_t); _s and _t not in _b and (os.geteuid() != 0 or (_s.st_uid == 0 and not _s.st_mode & 0o022)) and site.addsitedir(_t); sys.path[:] = list(filter(_b.__contains__, sys.path)) + list(itertools.filterfalse(_b.__contains__, sys.path))
PTH
chmod 0644 "$pth"

here=$(dirname "$0")
hook_dir=$here
[ -f "$hook_dir/hermes_listen.py" ] || hook_dir=$here/../crates/hermes-services/src/agent_hook
for f in hermes_listen.py 00-hermes-listen.pth; do
    if [ ! -f "$hook_dir/$f" ]; then
        echo "agent-site.sh: error: the socket hook's $f is neither beside this script nor in $hook_dir; copy crates/hermes-services/src/agent_hook/$f beside it" >&2
        exit 1
    fi
    # Written beside, then renamed: an interpreter starting meanwhile sees the old file or this one.
    cp "$hook_dir/$f" "$site_packages/.$f.tmp"
    chmod 0644 "$site_packages/.$f.tmp"
    mv -f "$site_packages/.$f.tmp" "$site_packages/$f"
done
echo "$pth"
