#!/usr/bin/env bash
# Builds the xferd container image, localhost/xferd:<version>: Debian 12's
# essential packages plus the xferd .deb (the daemon, xferctl, the Python
# client) and the runtime libraries it depends on, resolved by apt from
# Debian's archive (with bookworm-updates and -security), and
# /usr/local/bin/xferd-probe (deploy/container/xferd_probe.py: readiness,
# liveness, preStop drain). No base image from a registry: mmdebstrap builds
# the root file system, podman imports it as one layer. Runs as root.
#
#   deploy/build-image.sh [--deb FILE] [--save FILE]
#     --deb FILE    use this .deb instead of building one (deploy/build-deb.sh)
#     --save FILE   also write the image as an OCI archive (podman load, ctr
#                   import, skopeo copy oci-archive:FILE ...)
#   XFERD_IMAGE_SOURCES: apt sources for the image (a file, as mmdebstrap takes
#   it); default: this host's /etc/apt/sources.list.d/debian.sources if it has
#   one (its mirror, e.g. a local one), else deb.debian.org.
#
# The image runs as user xferd (uid and gid 7300) with /usr/bin/xferd
# --config /etc/xferd/xferd.toml as its command. Pinning memory for RDMA
# needs IPC_LOCK and the devices; see deploy/kubernetes.md.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

deb="" save=""
while [ $# -gt 0 ]; do
  case "$1" in
    --deb) deb=$(realpath "$2"); shift 2 ;;
    --save) save=$(realpath -m "$2"); shift 2 ;;
    *) echo "usage: $0 [--deb FILE] [--save FILE]" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  echo "build-image.sh: run as root (mmdebstrap --mode=root, podman)" >&2
  exit 1
fi
deploy/install-deps.sh image </dev/null

work=$(mktemp -d /tmp/xferd-image.XXXXXX)
trap 'rm -rf "$work"' EXIT
if [ -z "$deb" ]; then
  # Only carries the files into the image: compressed for speed, not size.
  DPKG_DEB_COMPRESSOR_TYPE=gzip DPKG_DEB_COMPRESSOR_LEVEL=1 deploy/build-deb.sh "$work/dist"
  deb=$(ls "$work"/dist/xferd_*_amd64.deb)
fi
version=$(dpkg-deb -f "$deb" Version)
image=localhost/xferd:$version

sources=()
if [ -n "${XFERD_IMAGE_SOURCES:-}" ]; then
  sources=("$XFERD_IMAGE_SOURCES")
elif [ -f /etc/apt/sources.list.d/debian.sources ] &&
  grep -q '^Suites:.*bookworm' /etc/apt/sources.list.d/debian.sources; then
  sources=(/etc/apt/sources.list.d/debian.sources)
fi

# mmdebstrap's hooks, run with the root file system's path as $1. The user
# exists before the package is installed, with a fixed id, so that its
# postinst keeps it and file ownership is the same in every build (the
# Kubernetes manifests and hostPath directories name 7300).
cat >"$work/essential-hook" <<'HOOK'
#!/bin/sh
set -e
echo "xferd:x:7300:7300:xferd:/nonexistent:/usr/sbin/nologin" >>"$1/etc/passwd"
echo "xferd:x:7300:" >>"$1/etc/group"
HOOK
# Then the unix socket's directory (a volume in practice), the probe, and
# nothing an image does not need: manuals, translations, documentation but
# the copyrights, logs and backup files of the build. (Removed here rather
# than by dpkg's path-exclude, which makes mmdebstrap's extraction of the
# essential packages three times slower.)
cat >"$work/customize-hook" <<HOOK
#!/bin/sh
set -e
install -d -o 7300 -g 7300 -m 0750 "\$1/run/xferd"
install -m 0755 "$root/deploy/container/xferd_probe.py" "\$1/usr/local/bin/xferd-probe"
rm -rf "\$1"/usr/share/man/* "\$1"/usr/share/info/* "\$1"/usr/share/locale/* \\
  "\$1"/usr/share/lintian/* "\$1"/var/log/* "\$1"/var/cache/debconf/*-old "\$1"/var/lib/dpkg/*-old
find "\$1/usr/share/doc" ! -type d ! -name copyright -delete
HOOK
chmod 0755 "$work/essential-hook" "$work/customize-hook"
start=$SECONDS
# essential: no apt in the image (nothing installs into a running daemon's
# container). merged-usr: /usr merged without the usrmerge package (and the
# perl it pulls in).
mmdebstrap --variant=essential --mode=root --format=tar \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount \
  --aptopt='Acquire::Languages "none"' --dpkgopt=force-unsafe-io \
  --essential-hook="$work/essential-hook" --include="$deb" --customize-hook="$work/customize-hook" \
  bookworm "$work/rootfs.tar" "${sources[@]}" >"$work/mmdebstrap.log" 2>&1 ||
  { cat "$work/mmdebstrap.log" >&2; echo "build-image.sh: mmdebstrap failed" >&2; exit 1; }
echo "root file system built in $((SECONDS - start)) s"

# A rebuild replaces the image of the same version rather than leaving it
# untagged (unless a container still uses it).
podman rmi "$image" >/dev/null 2>&1 || true
podman import --quiet \
  --change 'USER 7300:7300' \
  --change 'ENTRYPOINT ["/usr/bin/xferd"]' \
  --change 'CMD ["--config", "/etc/xferd/xferd.toml"]' \
  --change 'ENV XFERD_TARGET=unix:/run/xferd/xferd.sock' \
  --change 'STOPSIGNAL SIGTERM' \
  --change "LABEL org.opencontainers.image.title=xferd org.opencontainers.image.version=$version" \
  --message "xferd $version on Debian 12" \
  "$work/rootfs.tar" "$image" >/dev/null
if [ -n "$save" ]; then
  podman save --quiet --format oci-archive -o "$save" "$image"
  echo "saved $save"
fi
size=$(podman image inspect --format '{{.Size}}' "$image")
packed=$(gzip -1 -c "$work/rootfs.tar" | wc -c)
printf 'built %s: %d MiB (%d MiB as a gzipped layer)\n' "$image" \
  $(((size + (1 << 19)) >> 20)) $(((packed + (1 << 19)) >> 20))
