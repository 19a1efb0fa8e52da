"""Leaves a profile's gateway files as the original Python gateway (hermes-agent 0.19) leaves them.

Run with the ORIGINAL package's interpreter (its venv's python), never ours:

    <venv>/bin/python gateway_history.py HERMES_HOME PROFILE HISTORY

No command of the original writes these files without running a real gateway (which needs
platform adapters, a provider and minutes of start-up), so this calls the very functions its
gateway and its s6 service manager call, in the order they call them; the files therefore have
exactly the original's format (compact JSON, its keys, its atomic writer):

  * gateway.status.acquire_gateway_runtime_lock / write_pid_file / write_runtime_status /
    remove_pid_file / release_gateway_runtime_lock — what `hermes gateway run` does at start,
    at each phase and at exit (gateway/run.py: start_gateway, _update_runtime_status, stop);
  * hermes_cli.service_manager._write_gateway_desired_state — what the image's
    `hermes -p P gateway start|stop|restart` persists after its s6-svc call.

The argv recorded is the one the original image's s6 slot runs (`/opt/hermes/.venv/bin/hermes
-p P gateway run`), so the record looks as it would on the original image's volume.

HISTORY is one of:
  signalled  ran, then stopped by an unexpected SIGTERM (docker stop/restart of the container):
             the gateway persists gateway_state=running (issue #42675), removes gateway.pid
  killed     operator `gateway start` (desired_state=running), ran, then SIGKILL/OOM: the
             record says running and gateway.pid + gateway.lock stay behind (stale)
  stopped    ran, operator `gateway stop`: desired_state=stopped, then a planned stop persists
             gateway_state=stopped
  failed     startup_failed (no platform could start), then operator `gateway restart`:
             desired_state=running wins over the runtime state at the next boot
"""

import os
import sys

root, profile, history = sys.argv[1:4]
home = root if profile == "default" else os.path.join(root, "profiles", profile)
# `hermes -p P ...` sets HERMES_HOME to the profile's directory before anything runs.
os.environ["HERMES_HOME"] = home
sys.argv = ["/opt/hermes/.venv/bin/hermes"] + ([] if profile == "default" else ["-p", profile]) + [
    "gateway",
    "run",
]

from gateway import status  # noqa: E402  (reads HERMES_HOME at call time)
from hermes_cli.service_manager import _write_gateway_desired_state  # noqa: E402

service = f"gateway-{profile}"


def start():
    assert status.acquire_gateway_runtime_lock(), "gateway.lock is held"
    status.write_pid_file()
    status.write_runtime_status(gateway_state="starting", exit_reason=None)


def phase(state, reason=None):
    # GatewayRunner._update_runtime_status
    status.write_runtime_status(
        gateway_state=state, exit_reason=reason, restart_requested=False, active_agents=0
    )


def exit_cleanly():
    status.remove_pid_file()
    status.release_gateway_runtime_lock()


if history == "signalled":
    start()
    phase("running")
    phase("draining")
    phase("running")  # unexpected signal: persist running so the next boot starts it
    exit_cleanly()
elif history == "killed":
    _write_gateway_desired_state(service, "running")
    start()
    phase("running")
    os._exit(0)  # SIGKILL: no clean-up, gateway.pid and gateway.lock stay
elif history == "stopped":
    start()
    phase("running")
    _write_gateway_desired_state(service, "stopped")
    phase("draining")
    phase("stopped")
    exit_cleanly()
elif history == "failed":
    start()
    reason = "No messaging platforms could be started"
    phase("startup_failed", reason)
    exit_cleanly()
    _write_gateway_desired_state(service, "running")
else:
    sys.exit(f"unknown history {history!r}")
