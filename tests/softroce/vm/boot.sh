#!/bin/bash
# The qemu command line of the Soft-RoCE guest. Replaces itself with qemu (exec), so a
# caller that starts it in the background gets qemu's own pid in $! and can stop exactly
# that process.
#
#   tests/softroce/vm/boot.sh WORKDIR
#
# WORKDIR is a prepared per-run work directory (see vm_run.sh / stage2.sh): it becomes the
# read-write 9p share "xferdwork", mounted in the guest at the same path. Extra shares are
# read from WORKDIR/shares ("<tag> <ro|rw> <host path>" per line). The serial console goes
# to WORKDIR/console.log; qemu never touches stdin or the terminal.
#
# Environment:
#   XFERD_VM_MEM=2G  XFERD_VM_SMP=2   guest size. Keep >= 2 vCPUs: two busy-polling verbs
#                                     processes on one vCPU run ~40x slower.
#   XFERD_VM_ACCEL=auto|tcg|kvm       see xferd_vm_accel in common.sh (default auto -> tcg here)
#   XFERD_VM_INITRAMFS=PATH           initramfs (default: built/cached by mkinitramfs.sh)
#   XFERD_VM_KERNEL_IMAGE=PATH        kernel to boot (default: from extract_vmlinux.sh)
#   XFERD_VM_KERNEL, XFERD_VM_DIR     see common.sh
#   XFERD_VM_APPEND="..."             extra kernel command line
#   XFERD_VM_QEMU=qemu-system-x86_64  qemu binary
# shellcheck source-path=SCRIPTDIR disable=SC2054  # commas inside qemu arguments are intended
set -euo pipefail

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
XFERD_VM_LOG_TAG=boot # read by xferd_vm_log

[[ $# == 1 ]] || xferd_vm_die "usage: $0 WORKDIR"
work=$(cd "$1" && pwd -P) || xferd_vm_die "no such work dir: $1"
xferd_vm_safe_path "$work" || xferd_vm_die "work dir path has unsupported characters: $work"
[[ -f $work/stage2.sh ]] || xferd_vm_die "$work is not a prepared work dir (no stage2.sh)"

initramfs=${XFERD_VM_INITRAMFS:-$("$XFERD_VM_SRC/mkinitramfs.sh")}
kernel_image=${XFERD_VM_KERNEL_IMAGE:-$("$XFERD_VM_SRC/extract_vmlinux.sh")}
qemu=${XFERD_VM_QEMU:-qemu-system-x86_64}
command -v "$qemu" >/dev/null || xferd_vm_die "$qemu not found (run tests/softroce/install_deps.sh)"

accel=$(xferd_vm_accel) || exit 1
if [[ $accel == kvm ]]; then
  accel_args=(-accel kvm -cpu host)
else
  # thread=multi: one host thread per vCPU (MTTCG). -cpu max: all features TCG emulates.
  accel_args=(-accel tcg,thread=multi -cpu max)
fi

# The host root. multidevs=remap is required: / spans several host filesystems (/proc,
# /sys, /dev, tmpfs mounts...) and without it inode numbers collide in the guest, which
# e.g. made /proc/cmdline invisible in the guest's /proc.
share_args=(
  -fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap"
  -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot
  -fsdev "local,id=xferdwork,path=$work,security_model=none,multidevs=remap"
  -device virtio-9p-pci,fsdev=xferdwork,mount_tag=xferdwork
)
if [[ -f $work/shares ]]; then
  while read -r tag mode path; do
    [[ -n $tag ]] || continue
    ro=; [[ $mode == ro ]] && ro=,readonly=on
    share_args+=(
      -fsdev "local,id=$tag,path=$path,security_model=none,multidevs=remap$ro"
      -device "virtio-9p-pci,fsdev=$tag,mount_tag=$tag"
    )
  done <"$work/shares"
fi

# loglevel=4: warnings and worse on the console only (rxe logs "speed is unknown" on
# every QP modify). panic=-1 + -no-reboot: a guest panic ends qemu at once.
append="console=ttyS0 panic=-1 loglevel=4 xferd.work=$work ${XFERD_VM_APPEND:-}"

exec "$qemu" \
  "${accel_args[@]}" -m "${XFERD_VM_MEM:-2G}" -smp "${XFERD_VM_SMP:-2}" \
  -nodefaults -no-reboot -display none -monitor none \
  -serial "file:$work/console.log" \
  -nic none \
  -kernel "$kernel_image" -initrd "$initramfs" -append "$append" \
  "${share_args[@]}" \
  </dev/null
