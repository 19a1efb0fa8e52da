#!/usr/bin/env bash
# A declared service that allocates without bound, under a container memory limit: it is
# killed at its own `memory_max` and restarted (the reason in `service status`), while the
# gateway beside it keeps its process and the container is never OOM-killed as a whole. Run
# with a private cgroup namespace and with the host's: where the container sees a cgroup v2
# memory controller it can write, the limit is the service's own cgroup (`enforced_by:
# cgroup`), elsewhere the supervisor's sampling; the scenario says which it got, and why.
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

# Which enforcement a container with this cgroup namespace can have: cgroup v2 with the memory
# controller and a writable mount (Docker mounts it read-only unless privileged).
expected_enforcement() { # cgroupns
    local probe
    probe=$(drun --cgroupns "$1" --privileged -- sh -c '
        grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null && echo v2 || echo none')
    [[ $probe == v2 ]] && echo cgroup-possible || echo sampling
}

for ns in private host; do
    expect=$(expected_enforcement "$ns")
    for privileged in "" "--privileged"; do
        c=$(dstart "mem-$ns${privileged:+-priv}" -v "$v:/opt/data" --memory 512m --memory-swap 512m \
            --cgroupns "$ns" $privileged -e HERMES_GATEWAY_BOOTSTRAP_STATE=running -- sleep 300)
        wait_up "$c"
        wait_for 60 "the gateway is up ($ns)" -- service_is "$c" gateway-default up
        gateway=$(service_pid "$c" gateway-default)
        restarted() { [[ $(service_field "$c" leaky restarts) -ge 2 ]]; }
        wait_for 60 "leaky restarted twice at its limit ($ns $privileged)" -- restarted
        failure=$(service_field "$c" leaky last_failure)
        assert_contains "$failure" "memory limit: " "the reason names the limit ($ns $privileged): $failure"
        assert_contains "$(docker exec "$c" hermes service status)" "memory limit: " "service status shows it"
        by=$(service_field "$c" leaky memory_max)
        assert_contains "$by" '"bytes": 67108864' "the limit is in status"
        if [[ $expect == cgroup-possible && $ns == private && -n $privileged ]]; then
            assert_contains "$by" '"enforced_by": "cgroup"' "a private namespace with a writable cgroup v2 mount: its own cgroup"
        elif [[ $expect == sampling ]]; then
            assert_contains "$by" '"enforced_by": "sampling"' "no cgroup v2 memory controller here: sampled"
            ok "cgroupns $ns: this host has no cgroup v2 memory controller (cgroup v1 or hybrid), so the limit is enforced by sampling"
        else
            ok "cgroupns $ns ${privileged:-unprivileged}: enforced by $(show "$by")"
        fi
        assert_eq "$gateway" "$(service_pid "$c" gateway-default)" "the gateway kept its process ($ns)"
        assert_eq "0" "$(service_field "$c" gateway-default restarts)" "the gateway never restarted ($ns)"
        assert_eq "running false" "$(docker inspect -f '{{.State.Status}} {{.State.OOMKilled}}' "$c")" "the container was not OOM-killed ($ns)"
        docker rm -f "$c" >/dev/null
    done
done
finish
