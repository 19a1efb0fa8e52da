# Sourced by the scripts that install Debian packages (scripts/install-test-deps.sh,
# scripts/docker-test.sh): one way to refresh apt's lists that works on any machine we run on.

# apt_install [OPTION...] PACKAGE...: `apt-get update`, then `apt-get install -y OPTION... PACKAGE...`.
#
# `APT::Sandbox::User=root`: apt drops to its `_apt` user to fetch and to verify signatures, and
# writes a temporary file under /tmp for that; where /tmp is mode 0755 (some CI machines) `_apt`
# cannot, every fetch fails, and apt quietly falls back to old lists or none. As root we need no
# sandbox. `--error-on=any`: a list that could not be fetched is an error, not a warning (apt's
# default exits 0 and the install then fails later, or installs stale versions).
apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get update -qq -o APT::Sandbox::User=root --error-on=any; then
        echo "error: apt-get update could not fetch Debian's package lists (see the lines above); hint: check the mirror in /etc/apt/sources.list* and this machine's network" >&2
        return 1
    fi
    apt-get install -y -qq -o APT::Sandbox::User=root "$@"
}
