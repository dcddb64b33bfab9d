#!/bin/bash
# Runs one command inside a throw-away qemu VM that has a Soft-RoCE (rdma_rxe) device.
#
#   tests/softroce/vm_run.sh [options] [--] COMMAND [ARG...]
#
# The VM boots the host's Debian kernel under qemu (TCG unless /dev/kvm is usable) with the
# HOST ROOT FILESYSTEM SHARED READ-ONLY over 9p, so host-built binaries, Bazel outputs under
# /root/.cache/bazel and all libraries run unchanged. Before the command runs, the guest
# has: lo up, dummy0 = 10.9.9.1/24, rxe0 on dummy0 with port 1 ACTIVE and
# GID[1] = ::ffff:10.9.9.1 (RoCE v2). The command runs as root in the current directory,
# with stdin = /dev/null and a clean environment. Its stdout+stderr are streamed, in
# order, to this script's stdout and saved in the run's work directory (output.log).
#
# COMMAND is executed directly (no shell); use `-- bash -c '...'` for shell syntax.
#
# Options:
#   -e NAME=VALUE  set NAME in the command's environment (repeatable)
#   -e NAME        pass the host's value of NAME, if set (repeatable)
#   -C DIR         run the command in DIR instead of the current directory
#   -t SECONDS     overall timeout, boot included (default $XFERD_VM_TIMEOUT or 600)
#   --ro DIR       share host DIR read-only at the same path (repeatable). Only needed for
#                  paths under /tmp, /var/tmp, /run or /dev/shm: the guest mounts its own
#                  tmpfs there, hiding the host's files. The working directory is shared
#                  this way automatically when it is under one of them.
#   --rw DIR       share host DIR read-write at the same path (repeatable): results, Bazel's
#                  TEST_UNDECLARED_OUTPUTS_DIR, ... (the rest of the guest root is read-only)
#   --no-rdma      skip the Soft-RoCE setup (plain VM, ~0.5 s faster)
#   --log FILE     also copy the command's output log to FILE
#   -q, --quiet    no progress lines on stderr (errors are still reported)
#   -v, --verbose  also stream the guest's serial console to stderr
#   -h, --help     this text
#
# Exit status: the command's own exit status; 125 if the command did not report one (VM
# failed to boot, Soft-RoCE setup failed, the VM died, timeout, bad usage, missing tools).
#
# Environment:
#   XFERD_VM_TIMEOUT=600   overall timeout in seconds (-t overrides)
#   XFERD_VM_ENV="A B"     names of host variables to pass through, like -e A -e B
#   XFERD_VM_DIR=/tmp/xferd-softroce   base dir: initramfs cache + runs/<id>/ work dirs
#   XFERD_VM_KEEP_RUNS=20  finished run dirs kept under $XFERD_VM_DIR/runs (older: deleted)
#   XFERD_VM_MEM, XFERD_VM_SMP, XFERD_VM_ACCEL, XFERD_VM_KERNEL, XFERD_VM_APPEND,
#   XFERD_VM_QEMU          see vm/boot.sh and vm/common.sh
#
# Inside the guest the command also sees: HOME=/tmp/home (tmpfs), PYTHONDONTWRITEBYTECODE=1,
# XFERD_VM=1, XFERD_VM_WORK=<run dir, writable>, XFERD_RDMA_DEV=rxe0,
# XFERD_RDMA_NETDEV=dummy0, XFERD_RDMA_IP=10.9.9.1, XFERD_RDMA_GID_INDEX=1.
# shellcheck source-path=SCRIPTDIR disable=SC2317  # trap handlers look unreachable to it
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=vm/common.sh
source "$here/vm/common.sh"
# Read by xferd_vm_log / xferd_vm_die: every harness failure exits 125.
XFERD_VM_LOG_TAG=vm_run XFERD_VM_DIE_RC=125

# CI runs with stdin closed; make fd 0 a harmless /dev/null for us and every child.
exec </dev/null

usage() { awk 'NR > 1 { if (!/^#/ || /^# shellcheck/) exit; sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; }

quiet=0 verbose=0 rdma=1 log_copy='' workdir_arg=''
timeout=${XFERD_VM_TIMEOUT:-600}
env_names=() env_values=() ro_dirs=() rw_dirs=()

add_env() { # NAME=VALUE or NAME
  local name=${1%%=*}
  [[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || xferd_vm_die "bad variable name in -e $1"
  if [[ $1 == *=* ]]; then
    env_names+=("$name"); env_values+=("${1#*=}")
  elif [[ -n ${!name+set} ]]; then
    env_names+=("$name"); env_values+=("${!name}")
  else
    [[ $quiet == 1 ]] || xferd_vm_log "note: -e $name: not set on the host, not passed"
  fi
}

while (($#)); do
  case $1 in
    -e) (($# >= 2)) || xferd_vm_die "-e needs an argument"; add_env "$2"; shift 2 ;;
    -e*) add_env "${1#-e}"; shift ;;
    -C) (($# >= 2)) || xferd_vm_die "-C needs a directory"; workdir_arg=$2; shift 2 ;;
    -t) (($# >= 2)) || xferd_vm_die "-t needs seconds"; timeout=$2; shift 2 ;;
    --ro) (($# >= 2)) || xferd_vm_die "--ro needs a directory"; ro_dirs+=("$2"); shift 2 ;;
    --rw) (($# >= 2)) || xferd_vm_die "--rw needs a directory"; rw_dirs+=("$2"); shift 2 ;;
    --no-rdma) rdma=0; shift ;;
    --log) (($# >= 2)) || xferd_vm_die "--log needs a file"; log_copy=$2; shift 2 ;;
    -q | --quiet) quiet=1; shift ;;
    -v | --verbose) verbose=1; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    -*) xferd_vm_die "unknown option $1 (see --help)" ;;
    *) break ;;
  esac
done
(($#)) || xferd_vm_die "no command given (usage: vm_run.sh [options] -- COMMAND [ARG...])"
cmd=("$@")
[[ $timeout =~ ^[1-9][0-9]*$ ]] || xferd_vm_die "timeout must be a positive number of seconds: $timeout"
for name in ${XFERD_VM_ENV:-}; do add_env "$name"; done

progress() { [[ $quiet == 1 ]] || xferd_vm_log "$@"; }
now() { printf '%s' "${EPOCHREALTIME/,/.}"; }

# --- preconditions -------------------------------------------------------------------
command -v "${XFERD_VM_QEMU:-qemu-system-x86_64}" >/dev/null ||
  xferd_vm_die "qemu-system-x86_64 not found; run tests/softroce/install_deps.sh"
kver=$(xferd_vm_kernel) || exit 125
accel=$(xferd_vm_accel) || exit 125
export XFERD_VM_ACCEL=$accel
xferd_vm_safe_path "$XFERD_VM_DIR" || xferd_vm_die "XFERD_VM_DIR must be an absolute path of [A-Za-z0-9._/+@%=,-]: $XFERD_VM_DIR"

# Directories the guest covers with its own tmpfs (or kernel filesystems).
masked_prefix() { # prints the covering mount point if $1 is hidden in the guest
  local p
  for p in /tmp /var/tmp /run /dev/shm /dev /proc /sys; do
    if [[ $1 == "$p" || $1 == "$p"/* ]]; then printf '%s' "$p"; return 0; fi
  done
  return 1
}
canon_dir() { # prints the physical path of directory $1 (symlinks resolved)
  local d
  d=$(cd "$1" 2>/dev/null && pwd -P) || xferd_vm_die "not a directory: $1"
  xferd_vm_safe_path "$d" || xferd_vm_die "path has characters the guest mount cannot carry: $d"
  printf '%s' "$d"
}

cwd=$(canon_dir "${workdir_arg:-.}")
shares=() # "ro|rw path"
for d in "${ro_dirs[@]}"; do shares+=("ro $(canon_dir "$d")"); done
for d in "${rw_dirs[@]}"; do shares+=("rw $(canon_dir "$d")"); done
for s in "${shares[@]}"; do
  case $(masked_prefix "${s#* }" || true) in
    /dev | /proc | /sys) xferd_vm_die "cannot share ${s#* } (guest kernel filesystem)" ;;
  esac
done

# --- per-run work directory ------------------------------------------------------------
# Unique per invocation, so concurrent runs never share files. It is the guest's
# read-write share, mounted at this same path.
mkdir -p "$XFERD_VM_DIR/runs"
run=$(mktemp -d "$XFERD_VM_DIR/runs/$(date +%Y%m%d-%H%M%S).XXXXXX")
chmod 0755 "$run"

under_share() { # is $1 inside the work dir or one of the explicit shares?
  local s
  [[ $1 == "$run" || $1 == "$run"/* ]] && return 0
  for s in "${shares[@]}"; do [[ $1 == "${s#* }" || $1 == "${s#* }"/* ]] && return 0; done
  return 1
}
if m=$(masked_prefix "$cwd") && ! under_share "$cwd"; then
  case $m in
    /dev | /proc | /sys) xferd_vm_die "cannot run in $cwd (guest kernel filesystem)" ;;
  esac
  progress "working directory $cwd is under $m (a tmpfs in the guest): sharing it read-only"
  shares+=("ro $cwd")
fi

i=0
for s in "${shares[@]}"; do printf 's%d %s\n' "$((i++))" "$s"; done >"$run/shares"

cp "$here/vm/stage2.sh" "$here/vm/rdma_setup.sh" "$run/"
[[ $rdma == 0 ]] || : >"$run/rdma"
: >"$run/output.log"
: >"$run/console.log" # exists before the tails below start
{
  echo '#!/bin/bash'
  echo '# Generated by tests/softroce/vm_run.sh; run by stage2.sh inside the guest.'
  for i in "${!env_names[@]}"; do
    printf 'export %s=%q\n' "${env_names[i]}" "${env_values[i]}"
  done
  printf 'cd -- %q || { echo "[vm_run] cannot enter the working directory in the guest" >&2; exit 125; }\n' "$cwd"
  printf 'exec'
  printf ' %q' "${cmd[@]}"
  printf '\n'
} >"$run/job.sh"
printf '%s\n' "${cmd[*]}" >"$run/command"

# Cached boot artifacts, (re)built here in the foreground, outside the timeout.
XFERD_VM_INITRAMFS=$("$here/vm/mkinitramfs.sh") || xferd_vm_die "initramfs build failed"
XFERD_VM_KERNEL_IMAGE=$("$here/vm/extract_vmlinux.sh") || xferd_vm_die "kernel image preparation failed"
export XFERD_VM_INITRAMFS XFERD_VM_KERNEL_IMAGE

# --- boot, stream, wait ------------------------------------------------------------------
qpid='' tpid='' cpid='' spid=''
stop_pid() { # pid: TERM, then KILL after a grace period; only processes we started
  local pid=$1 _
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}
cleanup() {
  stop_pid "$qpid"
  for p in "$spid" "$tpid" "$cpid"; do [[ -z $p ]] || kill "$p" 2>/dev/null || true; done
  : >"$run/finished" # prunable from now on (see prune_runs)
}
on_signal() {
  xferd_vm_log "interrupted by SIG$1; stopping the VM (pid $qpid)"
  cleanup
  exit $((128 + $(kill -l "$1")))
}
trap cleanup EXIT
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
trap 'on_signal HUP' HUP

progress "booting $kver ($accel, ${XFERD_VM_SMP:-2} vCPU, ${XFERD_VM_MEM:-2G}); run dir $run"
t_boot=$(now)
"$here/vm/boot.sh" "$run" 2>"$run/qemu.stderr" &
qpid=$! # boot.sh execs qemu: this is qemu's own pid
printf '%s\n' "$qpid" >"$run/qemu.pid"

# tail --pid exits after qemu is gone, having printed everything written before that.
tail -n +1 -f -s 0.2 --pid="$qpid" "$run/output.log" &
tpid=$!
if [[ $verbose == 1 ]]; then
  tail -n +1 -f -s 0.2 --pid="$qpid" "$run/console.log" >&2 2>/dev/null &
  cpid=$!
fi
sleep "$timeout" &
spid=$!

# Whichever ends first: qemu (the guest powered off or died) or the timer. -p tells which;
# wait -n also consumes that child's status, so it is taken from here.
timed_out=0 qemu_rc=0 first=''
wait -n -p first "$qpid" "$spid" || qemu_rc=$?
if [[ $first != "$qpid" ]]; then
  timed_out=1 qemu_rc=0
  xferd_vm_log "timeout after ${timeout}s; stopping qemu (pid $qpid)"
  stop_pid "$qpid"
  wait "$qpid" 2>/dev/null || qemu_rc=$?
fi
qpid=
kill "$spid" 2>/dev/null || true
wait "$spid" 2>/dev/null || true
spid=
wait "$tpid" || true
tpid=
if [[ -n $cpid ]]; then wait "$cpid" || true; cpid=; fi
t_end=$(now)

# --- result ------------------------------------------------------------------------------
[[ -z $log_copy ]] || cp "$run/output.log" "$log_copy" || xferd_vm_log "could not copy the log to $log_copy"

show_console() {
  xferd_vm_log "last console lines ($run/console.log):"
  tail -n 25 "$run/console.log" 2>/dev/null | sed 's/^/    /' >&2 || true
  [[ ! -s $run/qemu.stderr ]] || { xferd_vm_log "qemu stderr:"; sed 's/^/    /' "$run/qemu.stderr" >&2; }
}

status=125
if [[ -s $run/rc ]]; then
  status=$(<"$run/rc")
  [[ $timed_out == 0 ]] || xferd_vm_log "(the command had finished with status $status before the timeout)"
elif [[ $timed_out == 1 ]]; then
  xferd_vm_log "FAILED: no exit status within ${timeout}s (set -t / XFERD_VM_TIMEOUT)"
  show_console
elif [[ -s $run/error ]]; then
  xferd_vm_log "FAILED: $(<"$run/error")"
  sed 's/^/    /' "$run/setup.log" >&2 2>/dev/null || true
else
  xferd_vm_log "FAILED: the VM stopped without reporting an exit status (qemu exit $qemu_rc)"
  show_console
fi

if [[ $quiet == 0 ]]; then
  # Guest uptime stamps: when stage2 started, Soft-RoCE was ready, the command ran.
  declare -A mark=()
  if [[ -r $run/timings ]]; then
    while read -r k v; do mark[$k]=$v; done <"$run/timings"
  fi
  summary="exit $status; host wall $(awk -v a="$t_boot" -v b="$t_end" 'BEGIN{printf "%.1f", b-a}')s"
  [[ -z ${mark[stage2]:-} ]] || summary+="; guest uptime: root ready ${mark[stage2]}s"
  [[ -z ${mark[rdma_ready]:-} ]] || summary+=", rxe0 ready ${mark[rdma_ready]}s"
  if [[ -n ${mark[command_start]:-} && -n ${mark[command_end]:-} ]]; then
    summary+=", command $(awk -v a="${mark[command_start]}" -v b="${mark[command_end]}" 'BEGIN{printf "%.2f", b-a}')s"
  fi
  xferd_vm_log "$summary; log $run/output.log"
fi

# --- housekeeping ------------------------------------------------------------------------
prune_runs() {
  local keep=${XFERD_VM_KEEP_RUNS:-20} d
  [[ $keep =~ ^[0-9]+$ ]] || keep=20
  # Finished runs beyond the newest $keep (names start with a timestamp) ...
  for d in $(find "$XFERD_VM_DIR/runs" -mindepth 2 -maxdepth 2 -name finished -printf '%h\n' | sort -r | tail -n +"$((keep + 1))"); do
    rm -rf -- "$d" 2>/dev/null || true
  done
  # ... and leftovers of runs killed before they finished, after a day.
  find "$XFERD_VM_DIR/runs" -mindepth 1 -maxdepth 1 -type d -mmin +1440 -exec rm -rf -- {} + 2>/dev/null || true
}
prune_runs
exit "$status"
