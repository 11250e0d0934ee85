#!/bin/sh
# Build confine's OCI image from Debian's packages and nothing else (docs/DEPLOY.md).
#
#   deploy/image/build.sh [OUT]        (as root; OUT defaults to target/image)
#
# 1. `cargo build --release --locked --bin confine`;
# 2. mmdebstrap makes a minimal Debian root file system (the `essential` package set plus git,
#    Node.js, Python 3, CA certificates and tini) of the host's own release, from the package
#    sources this machine's apt is configured with (never another mirror or registry);
# 3. confine goes to /usr/local/bin, an ordinary user `confine` (uid and gid 10001) gets a
#    home, /workspace (owned by it) and /run/secrets are made;
# 4. umoci writes OUT/oci, an OCI image layout (tag `latest` unless CONFINE_IMAGE_TAG): one
#    layer, a config whose entry point is tini running
#    `confine mcp --root /workspace --http 0.0.0.0:8080 --http-public
#     --http-token-file /run/secrets/confine-token` as uid 10001, port 8080/tcp exposed.
#    The token is CONFINE_HTTP_TOKEN when set, else the file (mount a secret there).
#
# mmdebstrap and umoci are installed with apt when missing. OUT/rootfs is the root file system
# (kept for inspection; rebuilt each time).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:-$repo/target/image}
tag=${CONFINE_IMAGE_TAG:-latest}
uid=10001

if [ "$(id -u)" != 0 ]; then
    echo "build.sh: run as root (the root file system holds files of other owners)" >&2
    exit 2
fi

missing=""
command -v mmdebstrap >/dev/null 2>&1 || missing="$missing mmdebstrap"
command -v umoci >/dev/null 2>&1 || missing="$missing umoci"
if [ -n "$missing" ]; then
    echo "build.sh: installing$missing with apt" >&2
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# The release of the host, and the package sources its apt uses.
. /etc/os-release
suite=${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}
set --
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && grep -q '^[^#[:space:]]' "$f" && set -- "$@" "$f"
done
if [ $# = 0 ]; then
    echo "build.sh: this machine's apt has no package sources" >&2
    exit 2
fi

echo "build.sh: building confine (release)" >&2
(cd "$repo" && cargo build --release --locked --bin confine)
bin="$repo/target/release/confine"

mkdir -p "$out"
rootfs="$out/rootfs"
rm -rf "$rootfs" "$out/oci"

echo "build.sh: making the root file system ($suite)" >&2
mmdebstrap --mode=root --variant=essential \
    --include=git,nodejs,python3,ca-certificates,tini \
    --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
    "$suite" "$rootfs" "$@"

install -m 0755 "$bin" "$rootfs/usr/local/bin/confine"
echo "confine:x:$uid:$uid:confine:/home/confine:/bin/sh" >>"$rootfs/etc/passwd"
echo "confine:x:$uid:" >>"$rootfs/etc/group"
echo "confine:!:1::::::" >>"$rootfs/etc/shadow"
install -d -m 0750 -o "$uid" -g "$uid" "$rootfs/home/confine"
install -d -m 0755 -o "$uid" -g "$uid" "$rootfs/workspace"
install -d -m 0755 "$rootfs/run/secrets"

echo "build.sh: writing the OCI layout $out/oci:$tag" >&2
umoci init --layout "$out/oci"
umoci new --image "$out/oci:$tag"
umoci insert --image "$out/oci:$tag" --history.created_by "deploy/image/build.sh" "$rootfs" /
# The entry point leaves confine's own sandbox on, its default. Under gVisor, which has no
# Landlock, the server then refuses to start: the manifests' `args` add --no-sandbox there
# (gVisor and the pod are the sandbox), as `docker run`/`runsc` callers must. It is not in
# the entry point itself, because a flag given twice is a usage error.
umoci config --image "$out/oci:$tag" \
    --os linux --architecture "$(dpkg --print-architecture)" \
    --author "confine deploy/image/build.sh" \
    --config.user "$uid:$uid" \
    --config.workingdir /workspace \
    --config.exposedports 8080/tcp \
    --config.env PATH=/usr/local/bin:/usr/bin:/bin \
    --config.env HOME=/home/confine \
    --config.env LANG=C.UTF-8 \
    --config.entrypoint /usr/bin/tini \
    --config.entrypoint=-- \
    --config.entrypoint /usr/local/bin/confine \
    --config.entrypoint mcp \
    --config.entrypoint --root \
    --config.entrypoint /workspace \
    --config.entrypoint --http \
    --config.entrypoint 0.0.0.0:8080 \
    --config.entrypoint --http-public \
    --config.entrypoint --http-token-file \
    --config.entrypoint /run/secrets/confine-token \
    --config.label org.opencontainers.image.title=confine \
    --config.label "org.opencontainers.image.version=$("$bin" --version | cut -d' ' -f2)"
umoci gc --layout "$out/oci"
echo "build.sh: done: $out/oci:$tag ($(du -sh "$out/oci" | cut -f1))" >&2
