"""Turns a rendered pod template of the chart into `docker run` options with the same constraints
(for tests/docker/helm-pod.sh): what Kubernetes would do with that pod spec, done by Docker.

    python3 pod_to_docker.py POD_JSON DATA_DIR SEED_DIR SECRET_ENV_FILE EMPTYDIR_ROOT

POD_JSON is `scripts/helm-test.sh pod CASE PROFILE`'s output. Writes the ConfigMap's files into
SEED_DIR the way the kubelet lays out a ConfigMap volume (each key a symlink through `..data` to a
timestamped directory), and prints one JSON object: `options` (docker run options), `args` (the
container's args, i.e. the image's CMD), `emptyDirs` (for each: the host directory under
EMPTYDIR_ROOT to mount a tmpfs on with `options`, as the kubelet would make it), `grace` (terminationGracePeriodSeconds), `probes`
(startup/liveness/readiness as the pod spec has them), `port` (the API port), `fsGroup`.

Every field of the pod that Docker cannot reproduce, or that this mapping does not know, is an
error: the scenario must never run a looser container than the pod.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

# Pod fields that change nothing a container run here could show.
IGNORED_POD = {"serviceAccountName", "automountServiceAccountToken", "enableServiceLinks",
               "terminationGracePeriodSeconds", "imagePullSecrets", "priorityClassName",
               "nodeSelector", "tolerations", "affinity", "securityContext", "containers", "volumes"}
IGNORED_CONTAINER = {"name", "image", "imagePullPolicy", "ports", "startupProbe", "livenessProbe",
                     "readinessProbe", "resources", "securityContext", "volumeMounts", "env",
                     "envFrom", "args"}


def fail(msg: str) -> None:
    print(f"pod_to_docker: {msg}", file=sys.stderr)
    sys.exit(1)


def unknown(kind: str, keys, known) -> None:
    extra = set(keys) - set(known)
    if extra:
        fail(f"the {kind} has fields this emulation does not map: {sorted(extra)}")


def write_configmap(data: dict[str, str], seed_dir: Path) -> None:
    """The kubelet's atomic-writer layout: ..<timestamp>/KEY, ..data -> ..<timestamp>,
    KEY -> ..data/KEY; files 0644 (defaultMode), directories 0755."""
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.000000001", time.gmtime())
    real = seed_dir / stamp
    real.mkdir(parents=True)
    for key, text in data.items():
        (real / key).write_text(text)
        os.chmod(real / key, 0o644)
    os.chmod(real, 0o755)
    data_link = seed_dir / "..data"
    tmp = seed_dir / "..data_tmp"
    tmp.symlink_to(stamp)
    os.replace(tmp, data_link)
    for key in data:
        link = seed_dir / key
        if not link.is_symlink():
            link.symlink_to(f"..data/{key}")


def quantity_bytes(q: str) -> int:
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "k": 1000, "M": 10**6, "G": 10**9}
    for unit, factor in units.items():
        if q.endswith(unit):
            return int(float(q[: -len(unit)]) * factor)
    return int(q)


def main(pod_json: str, data_dir: str, seed_dir: str, secret_env: str, empty_root: str) -> None:
    doc = json.loads(Path(pod_json).read_text())
    template, configmap = doc["template"], doc["configmap"]
    spec = template["spec"]
    unknown("pod spec", spec, IGNORED_POD)
    (c,) = spec["containers"]
    unknown("container", c, IGNORED_CONTAINER)
    psc, sc = spec.get("securityContext", {}), c.get("securityContext", {})
    opts: list[str] = []
    empty_dirs: list[dict] = []

    # Identity: the container's runAsUser/runAsGroup over the pod's; fsGroup as a supplementary
    # group, as the kubelet adds it.
    uid = sc.get("runAsUser", psc.get("runAsUser"))
    gid = sc.get("runAsGroup", psc.get("runAsGroup"))
    fs_group = psc.get("fsGroup")
    if uid is None or gid is None:
        fail("no runAsUser/runAsGroup: the image would start as root")
    if (sc.get("runAsNonRoot") or psc.get("runAsNonRoot")) and uid == 0:
        fail("runAsNonRoot with uid 0")
    opts += ["--user", f"{uid}:{gid}"]
    if fs_group is not None:
        opts += ["--group-add", str(fs_group)]
    if sc.get("readOnlyRootFilesystem"):
        opts.append("--read-only")
    if sc.get("allowPrivilegeEscalation") is False:
        opts += ["--security-opt", "no-new-privileges"]
    caps = sc.get("capabilities", {})
    opts += [f"--cap-drop={x}" for x in caps.get("drop", [])]
    opts += [f"--cap-add={x}" for x in caps.get("add", [])]
    seccomp = sc.get("seccompProfile", psc.get("seccompProfile", {})).get("type")
    if seccomp != "RuntimeDefault":
        fail(f"seccompProfile {seccomp}: only RuntimeDefault (Docker's default profile) is emulated")
    if sc.get("privileged"):
        fail("privileged")

    # Volumes, by their mounts.
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for m in c.get("volumeMounts", []):
        v = volumes[m["name"]]
        path, ro = m["mountPath"], m.get("readOnly", False)
        if "persistentVolumeClaim" in v:
            opts += ["-v", f"{data_dir}:{path}{':ro' if ro else ''}"]
        elif "emptyDir" in v:
            # A kubelet emptyDir: mode 0777 without the sticky bit, and with fsGroup the group's
            # with setgid (SetVolumeOwnership): 2777 root:fsGroup. Docker's --tmpfs would make it
            # 1777, so the scenario mounts a tmpfs of that mode at host/<name> and it is bound in.
            ed = v["emptyDir"]
            if ed.get("medium") not in ("Memory", None, ""):
                fail(f"emptyDir medium {ed.get('medium')}")
            host = Path(empty_root) / m["name"]
            tmpfs = ["mode=2777" if fs_group is not None else "mode=0777"]
            if fs_group is not None:
                tmpfs.append(f"gid={fs_group}")
            if ed.get("sizeLimit"):
                tmpfs.append(f"size={quantity_bytes(ed['sizeLimit'])}")
            empty_dirs.append({"host": str(host), "options": ",".join(tmpfs), "path": path})
            opts += ["-v", f"{host}:{path}{':ro' if ro else ''}"]
        elif "configMap" in v:
            write_configmap(configmap, Path(seed_dir))
            opts += ["-v", f"{seed_dir}:{path}:ro"]
        else:
            fail(f"volume {m['name']} of a kind this emulation does not map: {sorted(v)}")

    # Environment: the values, then the Secret's keys (envFrom) from SECRET_ENV_FILE.
    for e in c.get("env", []):
        if "value" not in e:
            fail(f"env {e['name']} without a plain value")
        opts += ["-e", f"{e['name']}={e['value']}"]
    for src in c.get("envFrom", []):
        if "secretRef" not in src:
            fail(f"envFrom {src}")
        opts += ["--env-file", secret_env]

    port = next(p["containerPort"] for p in c["ports"] if p["name"] == "api")
    probes = {k: c[k] for k in ("startupProbe", "livenessProbe", "readinessProbe")}
    print(json.dumps({"options": opts, "args": c.get("args", []), "emptyDirs": empty_dirs,
                      "grace": spec["terminationGracePeriodSeconds"], "probes": probes,
                      "port": port, "fsGroup": fs_group, "uid": uid, "gid": gid}))


if __name__ == "__main__":
    if len(sys.argv) != 6:
        fail("usage: pod_to_docker.py POD_JSON DATA_DIR SEED_DIR SECRET_ENV_FILE EMPTYDIR_ROOT")
    main(*sys.argv[1:])
