"""Builds a one-package "simple" index with a pure-Python wheel, for installs without network.

Usage: wheel_index.py INDEX_DIR DIST_NAME VERSION MODULE_SOURCE

Writes INDEX_DIR/files/<module>-<version>-py3-none-any.whl (the module `<module>`, from
DIST_NAME with `-` as `_`, whose `__init__.py` is MODULE_SOURCE) and
INDEX_DIR/simple/<dist-name>/index.html linking it, so `python3 -m http.server --directory
INDEX_DIR` is an index pip accepts (PIP_INDEX_URL=http://.../simple).
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


def build(index, dist, version, source):
    module = dist.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": source.encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    rows = [record_line(path, data) for path, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(rows) + "\n").encode()
    wheel = f"{module}-{version}-py3-none-any.whl"
    (index / "files").mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(index / "files" / wheel, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    page = index / "simple" / dist
    page.mkdir(parents=True, exist_ok=True)
    (page / "index.html").write_text(f'<html><body><a href="../../files/{wheel}">{wheel}</a></body></html>\n')


if __name__ == "__main__":
    build(Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4])
