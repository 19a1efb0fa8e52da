#!/usr/bin/env bash
# A declared service that allocates without bound, under a container memory limit: it is
# killed at its own `memory_max` and restarted (the reason in `service status`), while the
# gateway beside it keeps its process and the container is never OOM-killed as a whole. Run
# with a private cgroup namespace and with the host's: where the container sees a memory
# controller it can write (cgroup v2's, or v1's hierarchy), the limit is the service's own
# cgroup (`enforced_by: cgroup`), elsewhere the supervisor's sampling; the scenario says which
# it got, and why.
source "$(dirname "$0")/lib.sh"

v=$(mkvolume data)
assert_rc 0 "first boot seeds the volume" -- drun -v "$v:/opt/data" -- true
assert_rc 0 "declare a leaking service" -- drun -v "$v:/opt/data" -- sh -c '
cat >> /opt/data/config.yaml <<YAML
services:
  leaky:
    # Doubles a string every 0.3 s: 1 MiB, 2, 4, ... past its limit in about two seconds.
    command: "x=\$(head -c 1048576 /dev/zero | tr \"\\\\0\" x); while :; do x=\"\$x\$x\"; sleep 0.3; done"
    memory_max: 64MiB
YAML'

# What a container with these options sees: a memory controller (cgroup v2's, or v1's
# hierarchy) it may create cgroups in (Docker mounts /sys/fs/cgroup read-only unless the
# container is privileged).
cgroup_probe() { # docker options...
    drun "$@" -- sh -c 'if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then d=/sys/fs/cgroup
        elif [ -e /sys/fs/cgroup/memory/cgroup.procs ]; then d=/sys/fs/cgroup/memory
        else echo no-memory-controller; exit; fi
        mkdir "$d/probe.$$" 2>/dev/null && rmdir "$d/probe.$$" && echo writable || echo read-only' 2>&1 | tail -n 1
}

# One container: the leak is restarted at its limit by `want` (cgroup or sampling), the gateway
# untouched, the container never OOM-killed.
leak_is_contained() { # name want docker-options...
    local name=$1 want=$2
    shift 2
    c=$(dstart "$name" -v "$v:/opt/data" --memory 512m --memory-swap 512m "$@" \
        -e HERMES_GATEWAY_BOOTSTRAP_STATE=running -- sleep 300)
    wait_up "$c" 60
    wait_for 90 "the gateway is up ($name)" -- service_is "$c" gateway-default up
    gateway=$(service_pid "$c" gateway-default)
    restarted() { [[ $(service_field "$c" leaky restarts) -ge 2 ]]; }
    wait_for 60 "leaky restarted twice at its limit ($name)" -- restarted
    failure=$(service_field "$c" leaky last_failure)
    assert_contains "$failure" "memory limit: " "the reason names the limit ($name): $failure"
    assert_contains "$(docker exec "$c" hermes service status)" "last restart: memory limit: " "service status shows it ($name)"
    by=$(service_field "$c" leaky memory_max)
    assert_contains "$by" '"bytes": 67108864' "the limit is in status ($name)"
    assert_contains "$by" "\"enforced_by\": \"$want\"" "enforced by $want ($name)"
    if [[ $probe == read-only ]]; then
        assert_contains "$(docker logs "$c" 2>&1)" "limits are enforced by sampling" "the fallback says why, once ($name)"
    fi
    assert_eq "$gateway" "$(service_pid "$c" gateway-default)" "the gateway kept its process ($name)"
    assert_eq "0" "$(service_field "$c" gateway-default restarts)" "the gateway never restarted ($name)"
    assert_eq "running false" "$(docker inspect -f '{{.State.Status}} {{.State.OOMKilled}}' "$c")" "the container was not OOM-killed ($name)"
    docker rm -f "$c" >/dev/null
}

for ns in private host; do
    probe=$(cgroup_probe --cgroupns "$ns")
    # Unprivileged, the mount is read-only (or there is no memory controller): sampled.
    ok "cgroupns $ns, unprivileged: the container sees $probe"
    want=sampling
    [[ $probe == writable ]] && want=cgroup
    leak_is_contained "mem-$ns" "$want" --cgroupns "$ns"
done

# Privileged with a private namespace: its own cgroup (v2, or v1's memory hierarchy). Said why
# not where it cannot be.
if ! why=$(drun --privileged -- true 2>&1); then
    ok "a privileged container cannot start on this machine ($(show "$why" | head -c 200)); the cgroup path is covered by the unit tests only here"
else
    probe=$(cgroup_probe --privileged --cgroupns private)
    if [[ $probe == writable ]]; then
        leak_is_contained mem-privileged cgroup --privileged --cgroupns private
    else
        ok "privileged, private namespace: the container sees $probe, so its limit is sampled"
        leak_is_contained mem-privileged sampling --privileged --cgroupns private
    fi
fi
finish
