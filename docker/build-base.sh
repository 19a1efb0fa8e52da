#!/usr/bin/env bash
# Builds a local equivalent of `debian:trixie-slim` for machines that cannot pull base images
# from a registry, and imports it into Docker under that name.
#
#   docker/build-base.sh [--tag debian:trixie-slim] [--cache DIR] [--mirror URL]
#                        [--security-mirror URL|none] [--refresh]
#
# `debootstrap --variant=minbase trixie` from the Debian mirror (by default the one the host's
# apt uses), then the same slimming as the official image: no man pages, docs (copyright files
# kept), locales or apt lists, and dpkg told to keep it that way. The root file system is
# cached as a tarball in the cache directory, so a second run only re-imports it (a few
# seconds); `--refresh` builds it again.
#
# Needs root and `debootstrap` (Debian package `debootstrap`).
set -euo pipefail

tag=debian:trixie-slim
cache=${HERMES_DOCKER_CACHE:-/var/cache/hermes-docker-test}
mirror=${HERMES_DEBIAN_MIRROR:-}
security=${HERMES_DEBIAN_SECURITY_MIRROR:-}
refresh=0
suite=trixie
docker=${DOCKER:-docker}

die() { echo "build-base: error: $*" >&2; exit 1; }

while (($#)); do
    case "$1" in
        --tag) tag=$2; shift 2 ;;
        --cache) cache=$2; shift 2 ;;
        --mirror) mirror=$2; shift 2 ;;
        --security-mirror) security=$2; shift 2 ;;
        --refresh) refresh=1; shift ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) die "unknown argument \`$1\` (see --help)" ;;
    esac
done

(( EUID == 0 )) || die "must run as root (debootstrap and the tarball's file owners need it)"
command -v debootstrap >/dev/null || die "debootstrap not found; install it with \`apt-get install debootstrap\`"

arch=$(dpkg --print-architecture)

# The mirror the host's apt uses: the first `.../debian <codename>/main` source apt knows.
host_mirror() {
    local kind=$1 # debian | debian-security
    apt-cache policy 2>/dev/null | awk -v kind="$kind" '
        $2 ~ /^https?:\/\// && $3 ~ /\/main$/ {
            url = $2; sub(/\/+$/, "", url)
            n = split(url, parts, "/")
            if (parts[n] == kind && !(seen++)) print url
        }'
}
if [[ -z $mirror ]]; then
    mirror=$(host_mirror debian)
    [[ -n $mirror ]] || mirror=http://deb.debian.org/debian
fi
if [[ -z $security ]]; then
    security=$(host_mirror debian-security)
    [[ -n $security ]] || security=none
fi

mkdir -p "$cache"
tarball=$cache/$suite-slim-$arch.tar
if [[ $refresh == 1 || ! -s $tarball ]]; then
    root=$(mktemp -d "$cache/rootfs.XXXXXX")
    trap 'rm -rf "$root"' EXIT
    mkdir -p "$cache/debs"
    echo "build-base: debootstrap --variant=minbase $suite from $mirror ($arch)"
    if ! debootstrap --variant=minbase --arch="$arch" --cache-dir="$cache/debs" \
            "$suite" "$root" "$mirror" >"$cache/debootstrap.log" 2>&1; then
        tail -n 20 "$cache/debootstrap.log" >&2
        die "debootstrap failed (full log: $cache/debootstrap.log)"
    fi

    # Slimming, as the official slim images do it (debuerreotype's "slimify").
    cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
# Keep the image small: no documentation, manual pages or translations (copyright files stay).
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
    find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
    rm -rf "$root"/usr/share/{man,groff,info,lintian,linda}/*
    find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +

    cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
    echo 'Acquire::Languages "none";' >"$root/etc/apt/apt.conf.d/docker-no-languages"
    echo 'Acquire::GzipIndexes "true";' >"$root/etc/apt/apt.conf.d/docker-gzip-indexes"
    printf 'APT::AutoRemove::SuggestsImportant "false";\n' >"$root/etc/apt/apt.conf.d/docker-autoremove-suggests"
    printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
    chmod 0755 "$root/usr/sbin/policy-rc.d"

    rm -f "$root/etc/apt/sources.list"
    {
        printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
            "$mirror" "$suite" "$suite"
        if [[ $security != none ]]; then
            printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
                "$security" "$suite"
        fi
    } >"$root/etc/apt/sources.list.d/debian.sources"

    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old \
        "$root"/var/log/*.log "$root"/var/log/apt/* "$root"/tmp/* "$root"/var/tmp/*
    mkdir -p "$root/var/lib/apt/lists/partial" "$root/var/cache/apt/archives/partial"
    : >"$root/etc/machine-id"
    : >"$root/etc/hostname"
    : >"$root/etc/resolv.conf"

    tar --numeric-owner --xattrs -C "$root" -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf "$root"
    trap - EXIT
fi

echo "build-base: docker import $tarball as $tag"
"$docker" import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    --message "debootstrap --variant=minbase $suite ($mirror), slimmed" \
    "$tarball" "$tag" >/dev/null
"$docker" image inspect --format 'build-base: {{.RepoTags}} {{.Size}} bytes' "$tag"
