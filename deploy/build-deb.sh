#!/usr/bin/env bash
# Builds dist/xferd_<version>_amd64.deb: /usr/bin/xferd and xferctl, the
# systemd unit, /etc/xferd/xferd.toml (a conffile), the Python client package
# and the `xferd` system user (created on install). Depends on exactly the
# Debian packages whose shared libraries the binaries load.
#
#   deploy/build-deb.sh [OUTPUT_DIR]      (default: dist/)
# Install: apt-get install ./dist/xferd_<version>_amd64.deb
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"
out=$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd -P)
version=$(sed -n 's/^XFERD_VERSION = "\(.*\)"$/\1/p' version.bzl)
[ -n "$version" ] || { echo "build-deb.sh: no XFERD_VERSION in version.bzl" >&2; exit 1; }

deploy/install-deps.sh build </dev/null
bazel build --config=opt //daemon:xferd //client/cpp:xferctl //client/python:wheel
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
deploy/install.sh --no-build --prefix /usr --destdir "$stage/pkg" >/dev/null

# Runtime dependencies: the packages owning the libraries the binaries link
# directly (their NEEDED entries),
# plus what the Python client imports and the RDMA providers (the drivers
# libibverbs loads at run time, so ldd cannot see them).
bins=("$stage/pkg/usr/bin/xferd" "$stage/pkg/usr/bin/xferctl")
needed=$(objdump -p "${bins[@]}" | awk '/NEEDED/ {print $2}' | sort -u)
libs=$(ldd "${bins[@]}" | awk -v want="$needed" '
  BEGIN { n = split(want, w, "\n"); for (i = 1; i <= n; i++) direct[w[i]] = 1 }
  ($1 in direct) && /=> \// { print $3 }' | sort -u)
# One dpkg -S for all (each call reads the whole package database): every
# library by its resolved path and by the path ldd gave (one of the two is
# the packaged one when /usr is merged; dpkg -S fails for the other).
# shellcheck disable=SC2046
owners=$(dpkg -S $(for lib in $libs; do readlink -f "$lib"; echo "$lib"; done) 2>/dev/null || true)
depends=$(cut -d: -f1 <<<"$owners" | sort -u | grep -v '^libc6$' | paste -sd, | sed 's/,/, /g')
[ -n "$depends" ] || { echo "build-deb.sh: no package owns the libraries the binaries load" >&2; exit 1; }
depends="libc6, $depends, ibverbs-providers, python3-grpcio, python3-protobuf"

mkdir -p "$stage/pkg/DEBIAN"
cat >"$stage/pkg/DEBIAN/control" <<CONTROL
Package: xferd
Version: $version
Architecture: amd64
Maintainer: xferd developers <xferd@localhost>
Section: net
Priority: optional
Depends: $depends
Description: RDMA data-transfer daemon managed over gRPC
 xferd moves bulk data between hosts with one-sided RDMA WRITEs (verbs on
 InfiniBand and RoCE), or over TCP with the same semantics on hosts without
 an RDMA NIC. Clients drive it over gRPC: xferctl, the Python package xferd,
 or any gRPC client.
CONTROL
echo /etc/xferd/xferd.toml >"$stage/pkg/DEBIAN/conffiles"
cat >"$stage/pkg/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  getent passwd xferd >/dev/null ||
    useradd --system --user-group --home-dir /nonexistent --shell /usr/sbin/nologin xferd
  # The default regions.file_dirs.
  install -d -o xferd -g xferd -m 0750 /var/lib/xferd /var/lib/xferd/data
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    echo "xferd installed: edit /etc/xferd/xferd.toml, then systemctl enable --now xferd"
  fi
fi
POSTINST
cat >"$stage/pkg/DEBIAN/postrm" <<'POSTRM'
#!/bin/sh
set -e
[ -d /run/systemd/system ] && systemctl daemon-reload || true
POSTRM
chmod 0755 "$stage/pkg/DEBIAN/postinst" "$stage/pkg/DEBIAN/postrm"
deb="$out/xferd_${version}_amd64.deb"
dpkg-deb --root-owner-group --build "$stage/pkg" "$deb" >/dev/null
echo "built $deb"
