#!/usr/bin/env bash
# Installs xferd on this machine (or stages it under a directory, for
# packaging): the daemon and xferctl in /usr/local/bin, the systemd unit, the
# example configuration as /etc/xferd/xferd.toml (never overwriting an
# existing one), the Python client package, and the `xferd` system user.
#
#   deploy/install.sh                    build (optimized) and install
#   deploy/install.sh --enable           ... and start the service now
#   deploy/install.sh --destdir DIR      stage under DIR only (no user, no
#                                        systemctl): what deploy/build-deb.sh uses
#   deploy/install.sh --no-build         install what Bazel built last (--config=opt)
#   deploy/install.sh --prefix /usr      binaries under PREFIX (default /usr/local;
#                                        the .deb uses /usr)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

destdir="" build=1 enable=0 prefix=/usr/local
while (($#)); do
  case $1 in
    --destdir) destdir=$2; shift 2 ;;
    --prefix) prefix=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --enable) enable=1; shift ;;
    -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

if [ "$build" = 1 ]; then
  deploy/install-deps.sh build </dev/null
  bazel build --config=opt //daemon:xferd //client/cpp:xferctl //client/python:xferd_zip
fi
bin=$(bazel info --config=opt bazel-bin 2>/dev/null)
for f in daemon/xferd client/cpp/xferctl client/python/xferd.zip; do
  [ -e "$bin/$f" ] || { echo "install.sh: $bin/$f is missing: build first" >&2; exit 1; }
done

say() { echo "install.sh: $*"; }
# Python: Debian's /usr/bin/python3 reads packages from /usr/lib/python3/
# dist-packages and local installs from /usr/local/lib/python3.X/dist-packages.
if [ "$prefix" = /usr ]; then
  pydir=/usr/lib/python3/dist-packages
else
  pydir=$prefix/lib/$(/usr/bin/python3 -c 'import sys; print(f"python3.{sys.version_info.minor}")')/dist-packages
fi
install -d "$destdir$prefix/bin" "$destdir/etc/xferd" "$destdir/lib/systemd/system" \
  "$destdir$pydir" "$destdir$prefix/share/doc/xferd"
install -m 0755 "$bin/daemon/xferd" "$bin/client/cpp/xferctl" "$destdir$prefix/bin/"
sed "s#/usr/local/bin/xferd#$prefix/bin/xferd#" deploy/xferd.service \
  >"$destdir/lib/systemd/system/xferd.service"
chmod 0644 "$destdir/lib/systemd/system/xferd.service"
if [ -e "$destdir/etc/xferd/xferd.toml" ]; then
  say "keeping the existing /etc/xferd/xferd.toml (example: $prefix/share/doc/xferd/xferd.toml)"
else
  install -m 0644 deploy/xferd.toml "$destdir/etc/xferd/xferd.toml"
fi
install -m 0644 deploy/xferd.toml README.md "$destdir$prefix/share/doc/xferd/"
# The Python package, generated stubs included.
rm -rf "$destdir$pydir/xferd"
/usr/bin/python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
  "$bin/client/python/xferd.zip" "$destdir$pydir"
say "installed under ${destdir:-/}"

[ -n "$destdir" ] && exit 0
if ! getent passwd xferd >/dev/null; then
  useradd --system --user-group --home-dir /nonexistent --shell /usr/sbin/nologin xferd
  say "created the system user xferd (local clients join group xferd to use the socket)"
fi
# The default regions.file_dirs (systemd's StateDirectory makes it too).
install -d -o xferd -g xferd -m 0750 /var/lib/xferd /var/lib/xferd/data
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  if [ "$enable" = 1 ]; then
    systemctl enable --now xferd.service
    say "xferd is running: xferctl info"
  else
    say "start it with: systemctl enable --now xferd"
  fi
else
  say "systemd is not running here: start /usr/local/bin/xferd yourself"
fi
