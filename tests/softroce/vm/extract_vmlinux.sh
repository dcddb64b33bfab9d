#!/bin/bash
# Prints the path of the kernel image qemu should boot, extracting an uncompressed vmlinux
# from /boot/vmlinuz-<kver> once and caching it.
#
#   tests/softroce/vm/extract_vmlinux.sh
#
# Why: under TCG the compressed bzImage spends ~2.8 s decompressing itself (XZ) in
# emulated code before the kernel even starts. qemu can boot the uncompressed ELF vmlinux
# directly through its PVH entry point (CONFIG_PVH=y, as in Debian's kernels), which cuts
# a boot from ~8 s to ~5 s. The extraction (host-native xz) takes about a second, once.
#
# Falls back to printing /boot/vmlinuz-<kver> when PVH is not available, the payload can't
# be extracted, or XFERD_VM_PVH=0.
# Output: ${XFERD_VM_DIR:-/tmp/xferd-softroce}/kernel/<kver>/vmlinux (+ .stamp)
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
XFERD_VM_LOG_TAG=extract_vmlinux # read by xferd_vm_log

kver=$(xferd_vm_kernel)
bz=/boot/vmlinuz-$kver
fallback() { xferd_vm_log "$1; booting the compressed $bz (slower)"; printf '%s\n' "$bz"; exit 0; }

[[ ${XFERD_VM_PVH:-1} != 0 ]] || { printf '%s\n' "$bz"; exit 0; }
grep -qx 'CONFIG_PVH=y' "/boot/config-$kver" 2>/dev/null || fallback "kernel $kver: no CONFIG_PVH=y in /boot/config-$kver"

out_dir=$XFERD_VM_DIR/kernel/$kver
out=$out_dir/vmlinux
stamp=$out_dir/vmlinux.stamp
want=$(stat -L -c '%n %s %Y' "$bz")
up_to_date() { [[ -s $out && -r $stamp && $(<"$stamp") == "$want" ]]; }
if up_to_date; then printf '%s\n' "$out"; exit 0; fi

mkdir -p "$out_dir"
exec 9>"$out_dir/.lock"
flock 9
if up_to_date; then printf '%s\n' "$out"; exit 0; fi

tmp=$(mktemp "$out_dir/vmlinux.XXXXXX")
trap 'rm -f "$tmp"' EXIT
# Like the kernel's scripts/extract-vmlinux: find a compressed stream's magic inside the
# bzImage, decompress from there, accept the first result that is an ELF file. The
# decompressors complain about the trailing bytes after the stream; that is expected.
try() { # magic-bytes decompress-command...
  local magic=$1 pos
  shift
  command -v "$1" >/dev/null || return 1
  while IFS=: read -r pos _; do
    tail -c +"$((pos + 1))" "$bz" | "$@" >"$tmp" 2>/dev/null || true
    if [[ $(head -c 4 "$tmp" | od -An -c | tr -d ' ') == 177ELF ]]; then return 0; fi
  done < <(LC_ALL=C grep -abo "$magic" "$bz" 2>/dev/null || true)
  return 1
}
try $'\xfd7zXZ' xz -dc --single-stream ||
  try $'\x28\xb5\x2f\xfd' zstd -dc ||
  try $'\x1f\x8b\x08' gzip -dc ||
  fallback "could not extract an ELF vmlinux from $bz"
chmod 0644 "$tmp"
mv -f "$tmp" "$out"
printf '%s\n' "$want" >"$stamp.tmp" && mv -f "$stamp.tmp" "$stamp"
xferd_vm_log "extracted $out ($(stat -c %s "$out") bytes) from $bz"
printf '%s\n' "$out"
