"""Builds a one-package "simple" index with a pure-Python wheel, for installs without network.

Usage: wheel_index.py INDEX_DIR DIST_NAME VERSION MODULE_SOURCE [REQUIREMENT...]

Writes INDEX_DIR/files/<module>-<version>-py3-none-any.whl (the module `<module>`, from
DIST_NAME with `-` as `_`, whose `__init__.py` is MODULE_SOURCE, requiring each REQUIREMENT)
and links it from INDEX_DIR/simple/<dist-name>/index.html (added to what the page already
lists, so several versions of a project can be served), so `python3 -m http.server
--directory INDEX_DIR` is an index pip accepts (PIP_INDEX_URL=http://.../simple).

`link(INDEX_DIR, WHEEL_FILE)` (`wheel_index.py --link INDEX_DIR WHEEL_FILE`) serves a wheel
built elsewhere (a compiled one) the same way.
"""

import base64
import hashlib
import sys
import zipfile
from pathlib import Path


def record_line(path, data):
    """A RECORD row: path, urlsafe-base64 sha256 without padding, size."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def link(index, wheel):
    """Copies `wheel` into INDEX_DIR/files and lists it on its project's page."""
    wheel = Path(wheel)
    (index / "files").mkdir(parents=True, exist_ok=True)
    (index / "files" / wheel.name).write_bytes(wheel.read_bytes())
    project = wheel.name.split("-")[0].replace("_", "-").lower()
    page = index / "simple" / project
    page.mkdir(parents=True, exist_ok=True)
    with (page / "index.html").open("a") as f:
        f.write(f'<a href="../../files/{wheel.name}">{wheel.name}</a>\n')


def build(index, dist, version, source, requires=()):
    module = dist.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    requirements = "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {
        f"{module}/__init__.py": source.encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n{requirements}".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    rows = [record_line(path, data) for path, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(rows) + "\n").encode()
    wheel = index / "build" / f"{module}-{version}-py3-none-any.whl"
    wheel.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    link(index, wheel)


if __name__ == "__main__":
    if sys.argv[1] == "--link":
        link(Path(sys.argv[2]), sys.argv[3])
    else:
        build(Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
