#!/usr/bin/env bash
# Checks the deployment path: builds the .deb, then verifies its control data
# and files, the packaged daemon and xferctl, the packaged configuration
# (xferd --check-config), the systemd unit (systemd-analyze verify), and that
# the packaged Python client imports and pip sees it with its metadata.
# Prints "deploy: N passed, N failed".
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$root"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

passed=0 failed=0
check() {
  local what=$1
  shift
  if "$@" >"$work/out" 2>&1; then
    passed=$((passed + 1))
    echo "ok     $what"
  else
    failed=$((failed + 1))
    echo "FAILED $what"
    sed 's/^/       /' "$work/out"
  fi
}

deploy/build-deb.sh "$work/dist" || { echo "deploy: 0 passed, 1 failed"; exit 1; }
deb=$(ls "$work"/dist/xferd_*_amd64.deb)
dpkg-deb -x "$deb" "$work/root"
control=$(dpkg-deb -f "$deb")

check "control names the package, version and runtime dependencies" \
  grep -Eq '^Depends: .*libgrpc\+\+1\.51.*libibverbs1' <<<"$control"
check "/etc/xferd/xferd.toml is a conffile" \
  bash -c "dpkg-deb -I '$deb' conffiles | grep -qx /etc/xferd/xferd.toml"
check "every file is in place" test -x "$work/root/usr/bin/xferd" -a -x "$work/root/usr/bin/xferctl" \
  -a -f "$work/root/lib/systemd/system/xferd.service" -a -f "$work/root/etc/xferd/xferd.toml"
check "the daemon reports its version" "$work/root/usr/bin/xferd" --version
check "the packaged configuration is valid" \
  "$work/root/usr/bin/xferd" --check-config --config "$work/root/etc/xferd/xferd.toml"
check "xferctl runs" "$work/root/usr/bin/xferctl" --help
# systemd-analyze verify needs ExecStart to exist: point it at the extracted binary.
sed "s#^ExecStart=/usr/bin/xferd#ExecStart=$work/root/usr/bin/xferd#" \
  "$work/root/lib/systemd/system/xferd.service" >"$work/xferd.service"
check "systemd-analyze verify accepts the unit" systemd-analyze verify "$work/xferd.service"
# The [cluster] drop-in (deploy/cluster.md), read next to the unit: no warnings.
mkdir -p "$work/xferd.service.d"
cp deploy/xferd-cluster.conf "$work/xferd.service.d/cluster.conf"
check "systemd-analyze verify accepts the [cluster] drop-in, silently" \
  bash -c "out=\$(systemd-analyze verify '$work/xferd.service' 2>&1) && [ -z \"\$out\" ] || { echo \"\$out\"; false; }"
check "the unit is Type=notify with LimitMEMLOCK=infinity" \
  grep -Eqz 'Type=notify.*LimitMEMLOCK=infinity' "$work/xferd.service"
pydir=$work/root/usr/lib/python3/dist-packages
check "the packaged Python client imports" env PYTHONPATH="$pydir" \
  /usr/bin/python3 -c 'import xferd, xferd.v1.xferd_pb2; xferd.Client'
# Installed from the wheel, with its metadata: pip sees it, at the daemon's version.
check "pip shows the packaged Python client at the package's version" \
  bash -c "cd / && PYTHONPATH='$pydir' /usr/bin/python3 -m pip show xferd |
    grep -qx 'Version: $(dpkg-deb -f "$deb" Version)'"
check "the packaged Python client's record lists its generated stubs and py.typed" \
  bash -c "grep -q '^xferd/v1/xferd_pb2.py,sha256=' '$pydir'/xferd-*.dist-info/RECORD &&
    grep -q '^xferd/py.typed,' '$pydir'/xferd-*.dist-info/RECORD"

echo "deploy: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
