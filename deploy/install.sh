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
  bazel build --config=opt //daemon:xferd //client/cpp:xferctl //client/python:wheel
fi
bin=$(bazel info --config=opt bazel-bin 2>/dev/null)
version=$(sed -n 's/^XFERD_VERSION = "\(.*\)"$/\1/p' version.bzl)
wheel=client/python/xferd-$version-py3-none-any.whl
for f in daemon/xferd client/cpp/xferctl "$wheel"; do
  [ -e "$bin/$f" ] || { echo "install.sh: $bin/$f is missing: build first" >&2; exit 1; }
done

say() { echo "install.sh: $*"; }
# Python: Debian's /usr/bin/python3 reads packages from /usr/lib/python3/
# dist-packages (the .deb's) and local installs from /usr/local/lib/python3.X/
# dist-packages (where pip puts them as root).
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
# The Python package from its wheel (generated stubs included), by pip, so it
# has its metadata: `pip show xferd` sees it and `pip uninstall xferd` removes it.
pip=(/usr/bin/python3 -m pip install --quiet --no-index --disable-pip-version-check
  --root-user-action=ignore)
if [ -n "$destdir" ]; then
  # Staged: into exactly $pydir; the .deb depends on python3-grpcio and
  # python3-protobuf instead of pip checking them here.
  rm -rf "$destdir$pydir/xferd" "$destdir$pydir"/xferd-*.dist-info
  "${pip[@]}" --no-deps --target "$destdir$pydir" "$bin/$wheel"
else
  # This machine: pip's own location for root, /usr/local/lib/python3.X/
  # dist-packages, replacing an older xferd by its record. Debian marks its
  # Python as externally managed, hence --break-system-packages. The
  # dependencies are Debian's python3-grpcio and python3-protobuf
  # (install-deps.sh build): the import below checks them. An install of old
  # (unzipped, without metadata) goes first.
  if [ -d "$pydir/xferd" ] && ! compgen -G "$pydir/xferd-*.dist-info" >/dev/null; then
    rm -rf "$pydir/xferd"
  fi
  "${pip[@]}" --break-system-packages --force-reinstall --no-deps "$bin/$wheel"
  (cd / && /usr/bin/python3 -c 'import xferd') ||
    { echo "install.sh: /usr/bin/python3 cannot import the installed xferd (above)" >&2; exit 1; }
fi
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
