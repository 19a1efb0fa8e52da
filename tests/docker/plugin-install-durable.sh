#!/usr/bin/env bash
# A plugin install on the sealed image lands in /opt/data/lazy-packages and survives
# `docker rm` + `docker run` on the same volume. The package comes from a tiny index served on
# the container's own loopback (no outside network): a wheel built here by hand.
source "$(dirname "$0")/lib.sh"

idx=$HDT_TMP/index
mkdir -p "$idx/simple/tinymem-sdk" "$idx/files"
python3 - "$idx/files" <<'PY'
import base64, hashlib, sys, zipfile
name, version = "tinymem_sdk", "0.1.0"
files = {
    f"{name}/__init__.py": 'VERSION = "0.1.0"\n',
    f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: tinymem-sdk\nVersion: {version}\n",
    f"{name}-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = f"{name}-{version}.dist-info/RECORD"
lines = []
for path, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    lines.append(f"{path},sha256={digest},{len(text.encode())}")
lines.append(f"{record},,")
files[record] = "\n".join(lines) + "\n"
with zipfile.ZipFile(f"{sys.argv[1]}/{name}-{version}-py3-none-any.whl", "w") as z:
    for path, text in files.items():
        z.writestr(path, text)
PY
printf '<html><body><a href="../../files/tinymem_sdk-0.1.0-py3-none-any.whl">tinymem_sdk-0.1.0-py3-none-any.whl</a></body></html>\n' \
    >"$idx/simple/tinymem-sdk/index.html"

v=$(mkvolume data)
# The plugin's manifest on the volume (as an operator would put it there).
plant_memory_plugin "$v" tinymem tinymem-sdk==0.1.0

serve=(python3 -m http.server 8000 --bind 127.0.0.1 --directory /index)
c=$(dstart one -v "$v:/opt/data" -v "$idx:/index:ro" -- "${serve[@]}")
wait_up "$c"
wait_for 20 "the index answers" -- docker exec "$c" curl -fsS http://127.0.0.1:8000/simple/tinymem-sdk/
assert_rc 0 "memory setup tinymem installs tinymem-sdk from the local index" -- \
    docker exec -e PIP_INDEX_URL=http://127.0.0.1:8000/simple -e PIP_DISABLE_PIP_VERSION_CHECK=1 \
    "$c" hermes memory setup tinymem
assert_rc 0 "the package is in the durable target" -- docker exec "$c" stat -c '%U %n' /opt/data/lazy-packages/tinymem_sdk/__init__.py
assert_contains "$OUT" "hermes /opt/data/lazy-packages/tinymem_sdk/__init__.py" "installed as hermes into /opt/data/lazy-packages"
sealed=$(docker exec "$c" find /opt/hermes/.venv -newer /opt/hermes/.container-image -not -type d)
assert_empty "$sealed" "the sealed core venv was not written"

docker rm -f "$c" >/dev/null
assert_rc 0 "after docker rm + docker run on the same volume: memory status" -- drun -v "$v:/opt/data" -- memory status
assert_contains "$OUT" "provider: tinymem" "tinymem is the active provider (config.yaml on the volume)"
assert_contains "$OUT" "tinymem (available)" "tinymem is available: its package survived the container"
finish
