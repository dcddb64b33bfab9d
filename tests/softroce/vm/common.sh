# shellcheck shell=bash
# Host-side helpers shared by the Soft-RoCE VM harness scripts. Source it; it defines
# functions and defaults only and changes no shell options of the caller.
#
# Environment knobs (all optional):
#   XFERD_VM_DIR      base directory for the initramfs cache and per-run work dirs
#                     (default /tmp/xferd-softroce). Shared by concurrent runs.
#   XFERD_VM_KERNEL   guest kernel version, e.g. 6.1.0-56-amd64 (default: the newest
#                     version that has both /boot/vmlinuz-<v> and /lib/modules/<v>).

XFERD_VM_DIR=${XFERD_VM_DIR:-/tmp/xferd-softroce}

# Directory holding this file (tests/softroce/vm).
# shellcheck disable=SC2034  # used by the scripts that source this file
XFERD_VM_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)

xferd_vm_log() { printf '[%s] %s\n' "${XFERD_VM_LOG_TAG:-softroce}" "$*" >&2; }
xferd_vm_die() { xferd_vm_log "error: $*"; exit "${XFERD_VM_DIE_RC:-1}"; }

# Prints the kernel versions that can boot the guest, newest first: the guest needs the
# kernel image AND the matching module tree (rdma_rxe, 9p, ... are loaded from it).
# The host may run a different kernel (it does here: 6.18 without InfiniBand), so
# `uname -r` is deliberately not used.
xferd_vm_bootable_kernels() {
  local d v
  for d in /lib/modules/*/; do
    v=$(basename "$d")
    [[ -r /boot/vmlinuz-$v && -e /lib/modules/$v/modules.dep ]] && printf '%s\n' "$v"
  done | sort -rV
}

# Prints the kernel version to use, or fails with a hint.
xferd_vm_kernel() {
  if [[ -n ${XFERD_VM_KERNEL:-} ]]; then
    [[ -r /boot/vmlinuz-$XFERD_VM_KERNEL && -e /lib/modules/$XFERD_VM_KERNEL/modules.dep ]] ||
      { xferd_vm_log "XFERD_VM_KERNEL=$XFERD_VM_KERNEL: no /boot/vmlinuz-$XFERD_VM_KERNEL or /lib/modules/$XFERD_VM_KERNEL/modules.dep"; return 1; }
    printf '%s\n' "$XFERD_VM_KERNEL"
    return 0
  fi
  local v
  v=$(xferd_vm_bootable_kernels | head -n1)
  [[ -n $v ]] || { xferd_vm_log "no kernel with both /boot/vmlinuz-<v> and /lib/modules/<v>; run tests/softroce/install_deps.sh"; return 1; }
  printf '%s\n' "$v"
}

# Prints the qemu accelerator to use: XFERD_VM_ACCEL=tcg|kvm, or auto (the default): kvm
# only if /dev/kvm is usable AND the CPU shows vmx/svm. The device node alone proves
# nothing: on this project's machines /dev/kvm exists but KVM guests hang forever.
xferd_vm_accel() {
  case ${XFERD_VM_ACCEL:-auto} in
    tcg | kvm) printf '%s\n' "$XFERD_VM_ACCEL" ;;
    auto)
      if [[ -r /dev/kvm && -w /dev/kvm ]] && grep -qwE 'vmx|svm' /proc/cpuinfo 2>/dev/null; then
        echo kvm
      else
        echo tcg
      fi
      ;;
    *) xferd_vm_log "XFERD_VM_ACCEL must be auto, tcg or kvm"; return 1 ;;
  esac
}

# Paths handed to the guest travel on the kernel command line and in whitespace-separated
# files read by busybox sh, so only a conservative character set is allowed.
xferd_vm_safe_path() {
  [[ $1 == /* && $1 =~ ^[A-Za-z0-9._/+@%=,-]+$ ]]
}
