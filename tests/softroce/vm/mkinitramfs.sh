#!/bin/bash
# Builds the guest initramfs for the Soft-RoCE VM and prints its path on stdout.
#
#   tests/softroce/vm/mkinitramfs.sh [--force]
#
# The initramfs is deliberately tiny (~1.5 MB): a static busybox, our /init, and only the
# kernel modules needed to mount the host root over virtio-9p. Everything else (rdma_rxe,
# ib_core, dummy, verbs tools, shared libraries, the code under test) is used straight
# from the host root after switch_root, so nothing has to be copied or kept in sync.
#
# Output: ${XFERD_VM_DIR:-/tmp/xferd-softroce}/initramfs/<kernel>/initramfs.cpio.gz
# It is rebuilt only when its inputs change (kernel modules, /init, busybox, this script):
# a stamp file holds a digest of them. Concurrent callers are serialised with flock and
# the image is replaced with an atomic rename, so a qemu that is already booting keeps
# reading the old file.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
XFERD_VM_LOG_TAG=mkinitramfs # read by xferd_vm_log

force=0
case ${1:-} in
  "") ;;
  --force) force=1 ;;
  -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
  *) xferd_vm_die "unknown argument: $1" ;;
esac

kver=$(xferd_vm_kernel)
busybox=/bin/busybox
init_script=$XFERD_VM_SRC/init
[[ -x $busybox ]] || xferd_vm_die "$busybox missing (apt-get install busybox-static)"
# A dynamically linked busybox (package 'busybox') would need its libc in the initramfs.
if LC_ALL=C file -b "$busybox" 2>/dev/null | grep -q 'dynamically linked'; then
  xferd_vm_die "$busybox is dynamically linked; install busybox-static"
fi

# Modules for virtio-pci + 9p, dependencies first (order from `modinfo -F depends`).
# Modules built into the kernel are skipped.
modules=(virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci
  netfs fscache 9pnet 9pnet_virtio 9p)
declare -A module_file=()
for m in "${modules[@]}"; do
  f=$(modinfo -k "$kver" -n "$m" 2>/dev/null) || xferd_vm_die "module $m not found for kernel $kver"
  module_file[$m]=$f
done

out_dir=$XFERD_VM_DIR/initramfs/$kver
out=$out_dir/initramfs.cpio.gz
stamp=$out_dir/initramfs.stamp
mkdir -p "$out_dir"

digest() {
  {
    printf 'kernel %s\n' "$kver"
    for m in "${modules[@]}"; do
      f=${module_file[$m]}
      if [[ $f == /* ]]; then stat -L -c "$m %n %s %Y" "$f"; else printf '%s %s\n' "$m" "$f"; fi
    done
    cat "$init_script" "${BASH_SOURCE[0]}" "$busybox" | sha256sum
  } | sha256sum | cut -d' ' -f1
}
want=$(digest)

up_to_date() { [[ $force == 0 && -s $out && -r $stamp && $(<"$stamp") == "$want" ]]; }
if up_to_date; then printf '%s\n' "$out"; exit 0; fi

exec 9>"$out_dir/.lock"
flock 9
if up_to_date; then printf '%s\n' "$out"; exit 0; fi  # another caller just built it

xferd_vm_log "building initramfs for kernel $kver"
tmp=$(mktemp -d "$out_dir/build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
mkdir -p "$root"/{bin,dev,proc,sys,newroot,lib/modules}
cp "$busybox" "$root/bin/busybox"
cp "$init_script" "$root/init"
chmod 0755 "$root/init" "$root/bin/busybox"

: >"$root/lib/modules/order"
for m in "${modules[@]}"; do
  f=${module_file[$m]}
  case $f in
    builtin* | "") continue ;;
    *.ko.xz) xz -dc "$f" >"$root/lib/modules/$m.ko" ;;
    *.ko.zst) zstd -q -dc "$f" >"$root/lib/modules/$m.ko" ;;
    *.ko.gz) gzip -dc "$f" >"$root/lib/modules/$m.ko" ;;
    *.ko) cp "$f" "$root/lib/modules/$m.ko" ;;
    *) xferd_vm_die "unexpected module file for $m: $f" ;;
  esac
  printf '%s\n' "$m" >>"$root/lib/modules/order"
done

(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet -R 0:0) |
  gzip -1 >"$tmp/initramfs.cpio.gz"
mv -f "$tmp/initramfs.cpio.gz" "$out"
printf '%s\n' "$want" >"$tmp/stamp" && mv -f "$tmp/stamp" "$stamp"
xferd_vm_log "wrote $out ($(stat -c %s "$out") bytes)"
printf '%s\n' "$out"
