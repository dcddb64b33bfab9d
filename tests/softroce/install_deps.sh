#!/bin/bash
# Installs what the Soft-RoCE VM harness needs (Debian 12), idempotently.
#
#   tests/softroce/install_deps.sh           install whatever is missing
#   tests/softroce/install_deps.sh --check   only report; exit 1 if something is missing
#
# apt-get update/install run only when something is actually missing, non-interactively,
# so the script is cheap to call at the start of every CI run. Needs root (or sudo -n).
#
# The guest kernel is Debian's linux-image-amd64 kernel, booted by qemu: it need not be
# (and on the project machines is not) the kernel the host runs. What matters is a version
# that has BOTH /boot/vmlinuz-<v> and /lib/modules/<v> (rdma_rxe, 9p, ... come from there).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

# shellcheck source=vm/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/vm/common.sh"
XFERD_VM_LOG_TAG=install_deps # read by xferd_vm_log

check_only=0
case ${1:-} in
  "") ;;
  --check) check_only=1 ;;
  -h | --help) sed -n '2,8p' "$0"; exit 0 ;;
  *) xferd_vm_die "unknown argument: $1" ;;
esac

# package: why
packages=(
  qemu-system-x86   # qemu-system-x86_64 (TCG; no KVM needed)
  linux-image-amd64 # guest kernel + modules (rdma_rxe, 9p, virtio, dummy)
  busybox-static    # the initramfs userland (must be static: no libc in the initramfs)
  cpio              # initramfs archive
  kmod              # modinfo/modprobe (host: initramfs build; guest: module loading)
  iproute2          # ip, rdma, ss (guest)
  rdma-core         # rdma_rxe userspace bits, udev rules, rdma link
  ibverbs-utils     # ibv_devices, ibv_devinfo, ibv_rc_pingpong
  ibverbs-providers # librxe (the Soft-RoCE verbs provider)
  perftest          # ib_write_bw, ib_write_lat, ...
  rdmacm-utils      # rping, ucmatose
  xz-utils          # xz: kernel/module decompression
  zstd              # zstd: kernel/module decompression (newer kernels)
)

installed() { [[ $(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) == installed ]]; }

missing=()
for p in "${packages[@]}"; do installed "$p" || missing+=("$p"); done
kernel_ok=1
xferd_vm_kernel >/dev/null 2>&1 || kernel_ok=0

if [[ ${#missing[@]} == 0 && $kernel_ok == 1 ]]; then
  xferd_vm_log "all present (guest kernel $(xferd_vm_kernel))"
  exit 0
fi
if [[ $check_only == 1 ]]; then
  [[ ${#missing[@]} == 0 ]] || xferd_vm_log "missing packages: ${missing[*]}"
  [[ $kernel_ok == 1 ]] || xferd_vm_log "no kernel with both /boot/vmlinuz-<v> and /lib/modules/<v>"
  exit 1
fi

sudo=()
if [[ $(id -u) != 0 ]]; then
  if ! { command -v sudo >/dev/null && sudo -n true 2>/dev/null; }; then
    xferd_vm_die "need root (or passwordless sudo) to install: ${missing[*]}"
  fi
  sudo=(sudo -n)
fi
apt_get() {
  # noninteractive + keep existing config files + wait for a concurrent apt instead of failing.
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -y -q \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    -o DPkg::Lock::Timeout=600 "$@" </dev/null
}

updated=0
apt_update_once() { [[ $updated == 1 ]] || { apt_get update; updated=1; }; }

if [[ ${#missing[@]} -gt 0 ]]; then
  xferd_vm_log "installing: ${missing[*]}"
  apt_update_once
  apt_get install --no-install-recommends "${missing[@]}"
fi

if ! xferd_vm_kernel >/dev/null 2>&1; then
  # The kernel package is installed but its files are gone (e.g. a slimmed container
  # image that deleted /boot or /lib/modules): reinstall the versioned image packages.
  mapfile -t images < <(dpkg-query -W -f='${db:Status-Status} ${Package}\n' 'linux-image-[0-9]*' 2>/dev/null |
    awk '$1 == "installed" { print $2 }')
  [[ ${#images[@]} -gt 0 ]] || images=(linux-image-amd64)
  xferd_vm_log "no bootable kernel files; reinstalling ${images[*]}"
  apt_update_once
  apt_get install --no-install-recommends --reinstall "${images[@]}"
fi

kver=$(xferd_vm_kernel) || xferd_vm_die "still no kernel with both /boot/vmlinuz-<v> and /lib/modules/<v>"
for c in qemu-system-x86_64 busybox cpio modinfo ib_write_bw ibv_devinfo; do
  command -v "$c" >/dev/null || xferd_vm_die "$c still missing after install"
done
xferd_vm_log "ready (guest kernel $kver)"
