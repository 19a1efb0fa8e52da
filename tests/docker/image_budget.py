#!/usr/bin/env python3
"""The slim image's size budget: what our Dockerfile adds to its base, judged layer by layer.

    image_budget.py check  --image IMAGE --base BASE [--budget FILE] [--binary PATH]
    image_budget.py record --image IMAGE --base BASE [--budget FILE]

`check` measures the base image, each layer our Dockerfile adds on top of it, and (with
--binary) the binary file, prints them all with the packages our apt layer installs and the
base's package list, and exits 1 when one of our layers is over its budget, naming the layer and
the packages that grew since the budget was recorded. The base is Debian's, not ours: when it
grew the check still passes and says so in one line (with the base packages that moved).

`record` rewrites the measured part of the budget file (the base's size, its packages and the
packages of our apt layer) from the images, keeping the layer budgets, which are set by hand.

Sizes are in MB (10^6 bytes), as `docker images` shows them; package sizes are dpkg's
Installed-Size in KiB. Needs the docker CLI and an engine; reads the images only.
"""

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field

DEFAULT_BUDGET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "image-budget.txt")
# A base within this much of the recorded size has not grown (layer sizes wobble by some KB).
BASE_SLACK_MB = 0.5
# A package counts as grown when its Installed-Size rose by more than this.
PACKAGE_SLACK_KIB = 64


class Usage(Exception):
    """Bad input: a missing image, a malformed budget file. One line, exit 2."""


@dataclass
class LayerBudget:
    name: str
    limit_mb: float
    pattern: re.Pattern  # matched against the layer's `created by`; None for `other`


@dataclass
class Budget:
    layers: list = field(default_factory=list)  # LayerBudget, `other` last
    base_mb: float = 0.0
    base_name: str = ""
    base_packages: dict = field(default_factory=dict)  # name -> (version, KiB)
    packages: dict = field(default_factory=dict)  # name -> (version, KiB): our apt layer's


def parse_budget(path):
    budget = Budget()
    other = None
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        raise Usage(f"cannot read the budget file {path}: {e.strerror}")
    for number, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        where = f"{path}:{number}"
        try:
            if words[0] == "layer" and len(words) >= 3:
                name, limit = words[1], float(words[2])
                if name == "other":
                    other = LayerBudget(name, limit, None)
                elif len(words) >= 4:
                    budget.layers.append(LayerBudget(name, limit, re.compile(" ".join(words[3:]))))
                else:
                    raise ValueError("a layer other than `other` needs a pattern")
            elif words[0] == "base" and len(words) == 3:
                budget.base_name, budget.base_mb = words[1], float(words[2])
            elif words[0] in ("base-package", "package") and len(words) == 4:
                table = budget.base_packages if words[0] == "base-package" else budget.packages
                table[words[1]] = (words[2], int(words[3]))
            else:
                raise ValueError(f"unknown line `{line}`")
        except (ValueError, re.error) as e:
            raise Usage(f"{where}: {e} (lines are `layer NAME MB PATTERN`, `layer other MB`, "
                        "`base IMAGE MB`, `base-package`/`package NAME VERSION KIB`)")
    if other is None:
        raise Usage(f"{path}: no `layer other MB` line (the budget of layers no pattern names)")
    budget.layers.append(other)
    return budget


def docker(*args):
    try:
        done = subprocess.run(["docker", *args], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise Usage("no docker command on PATH")
    if done.returncode != 0:
        raise Usage(f"docker {' '.join(args[:3])}…: {done.stderr.strip() or 'failed'}")
    return done.stdout


def image_size(image):
    return int(docker("image", "inspect", "-f", "{{.Size}}", image).strip())


def history(image):
    """[(bytes, created_by)], newest layer first, as `docker history` lists them."""
    rows = []
    out = docker("history", "--no-trunc", "--human=false", "--format", "{{.Size}}\t{{.CreatedBy}}", image)
    for line in out.splitlines():
        size, _, created_by = line.partition("\t")
        rows.append((int(size), created_by))
    return rows


def packages(image):
    """name -> (version, KiB) of the installed packages in IMAGE."""
    out = docker("run", "--rm", "--network", "none", "--entrypoint", "dpkg-query", image,
                 "-W", "-f", "${db:Status-Abbrev}\t${Package}\t${Version}\t${Installed-Size}\n")
    table = {}
    for line in out.splitlines():
        status, name, version, kib = line.split("\t")
        if status.startswith("ii"):
            table[name] = (version, int(kib or 0))
    return table


def mb(size_bytes):
    return size_bytes / 1e6


def short(text, width=70):
    """A `created by` as its step reads in the Dockerfile, cut to `width`: without the classic
    builder's `|N ARG=value /bin/sh -c` and `#(nop)` prefixes."""
    text = " ".join(text.split())
    text = re.sub(r"^\|\d+ (\S+=\S* )*", "", text)
    text = re.sub(r"^/bin/sh -c (#\(nop\) )?", "", text)
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass
class Measured:
    image_bytes: int
    base_bytes: int
    ours: list  # (bytes, created_by), oldest first
    base_packages: dict
    packages: dict  # what the image has beyond the base


def measure(image, base):
    image_history, base_history = history(image), history(base)
    count = len(image_history) - len(base_history)
    if count < 0 or image_history[count:] != base_history:
        raise Usage(f"{image} is not built on {base} (their layer histories differ); "
                    "hint: pass the base the image was built FROM")
    base_packages = packages(base)
    added = {name: v for name, v in packages(image).items() if base_packages.get(name) != v}
    return Measured(image_size(image), image_size(base), list(reversed(image_history[:count])),
                    base_packages, added)


def classify(budget, created_by):
    for layer in budget.layers:
        if layer.pattern is None or layer.pattern.search(created_by):
            return layer
    raise AssertionError("the budget always ends with `other`")


def moved(recorded, now):
    """Lines naming the packages that grew, are new, or went away, biggest change first."""
    changes = []
    for name, (version, kib) in now.items():
        if name not in recorded:
            changes.append((kib, f"{name} {version} is new ({kib} KiB)"))
            continue
        old_version, old_kib = recorded[name]
        if kib - old_kib > PACKAGE_SLACK_KIB:
            changes.append((kib - old_kib, f"{name} grew {old_kib} → {kib} KiB "
                                           f"(+{kib - old_kib}; {old_version} → {version})"))
    for name, (version, kib) in recorded.items():
        if name not in now:
            changes.append((0, f"{name} {version} is gone ({kib} KiB)"))
    return [text for _, text in sorted(changes, key=lambda c: -c[0])]


def check(budget, measured, base, binary_bytes=None):
    """Prints the report; returns the failures (one line each)."""
    failures = []
    totals = {layer.name: 0 for layer in budget.layers}
    steps = {layer.name: [] for layer in budget.layers}
    for size, created_by in measured.ours:
        layer = classify(budget, created_by)
        totals[layer.name] += size
        if size:
            steps[layer.name].append((size, created_by))
    ours = sum(totals.values())

    print(f"base {base}: {mb(measured.base_bytes):.1f} MB, {len(measured.base_packages)} packages "
          f"(recorded: {budget.base_mb:.1f} MB, {len(budget.base_packages)} packages)")
    print(f"our layers: {mb(ours):.1f} MB in all, budget {sum(l.limit_mb for l in budget.layers):.1f} MB")
    for layer in budget.layers:
        size = mb(totals[layer.name])
        verdict = "ok" if size <= layer.limit_mb else "OVER"
        biggest = max(steps[layer.name], default=(0, ""))[1]
        print(f"  {layer.name:<8} {size:6.1f} MB  budget {layer.limit_mb:5.1f} MB  {verdict:<4}  {short(biggest)}")
        if size > layer.limit_mb:
            detail = f"our layer `{layer.name}` is {size:.1f} MB, over its {layer.limit_mb:.1f} MB budget"
            if biggest:
                detail += f" (its biggest step: {short(biggest, 100)})"
            if layer.name == "apt":
                grown = moved(budget.packages, measured.packages)
                detail += "; packages that moved since the budget was recorded: " + ("; ".join(grown) or "none")
            failures.append(detail)
    if binary_bytes is not None:
        print(f"binary: {mb(binary_bytes):.1f} MB ({binary_bytes} bytes)")
    print(f"image: {mb(measured.image_bytes):.1f} MB = base {mb(measured.base_bytes):.1f} MB + ours {mb(ours):.1f} MB")

    print(f"packages our apt layer installs ({len(measured.packages)}, KiB):")
    for name, (version, kib) in sorted(measured.packages.items(), key=lambda p: -p[1][1]):
        print(f"  {kib:7d}  {name} {version}")
    print(f"packages of the base ({len(measured.base_packages)}):")
    for name, (version, kib) in sorted(measured.base_packages.items()):
        print(f"  {name} {version} {kib}")

    grew = mb(measured.base_bytes) - budget.base_mb
    if grew > BASE_SLACK_MB:
        base_moves = moved(budget.base_packages, measured.base_packages)
        print(f"note: the base {base} grew by {grew:.1f} MB to {mb(measured.base_bytes):.1f} MB since it was "
              f"recorded; that is Debian's, not ours, and is not judged"
              + (f" (moved: {'; '.join(base_moves[:5])})" if base_moves else ""))
    return failures


def record(path, budget_text, measured, base):
    """The budget file with its measured lines replaced by MEASURED's."""
    kept = [line for line in budget_text.splitlines()
            if not re.match(r"\s*(base|base-package|package)\s", line)]
    while kept and not kept[-1].strip():
        kept.pop()
    out = kept + ["", f"base {base} {mb(measured.base_bytes):.1f}"]
    out += [f"base-package {n} {v} {k}" for n, (v, k) in sorted(measured.base_packages.items())]
    out += [f"package {n} {v} {k}" for n, (v, k) in sorted(measured.packages.items())]
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    os.replace(path + ".tmp", path)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("mode", choices=["check", "record"])
    parser.add_argument("--image", required=True, help="the slim image to judge")
    parser.add_argument("--base", required=True, help="the image it was built FROM (debian:trixie-slim)")
    parser.add_argument("--budget", default=DEFAULT_BUDGET, help="the budget file (default: %(default)s)")
    parser.add_argument("--binary", help="the hermes binary copied into the image, to print its size")
    args = parser.parse_args(argv)
    try:
        budget = parse_budget(args.budget)
        measured = measure(args.image, args.base)
        if args.mode == "record":
            record(args.budget, open(args.budget, encoding="utf-8").read(), measured, args.base)
            print(f"recorded the base and package sizes of {args.image} in {args.budget}")
            return 0
        binary_bytes = os.path.getsize(args.binary) if args.binary else None
        failures = check(budget, measured, args.base, binary_bytes)
    except Usage as e:
        print(f"image_budget: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"image_budget: error: {e}", file=sys.stderr)
        return 2
    for line in failures:
        print(f"FAIL: {line}")
    if failures:
        print(f"hint: keep the layer small, or raise its budget in {args.budget} deliberately "
              "(and say why in BENCHMARKS.md)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
