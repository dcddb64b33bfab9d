#!/bin/bash
# Stage 2 of the Soft-RoCE guest: PID 1 after switch_root into the host root (read-only 9p).
# vm_run.sh copies this file into the per-run work directory, which the initramfs mounts
# read-write at its host path and passes as XFERD_VM_WORK.
#
# Work directory protocol (written by vm_run.sh on the host before boot):
#   job.sh       the command: environment, cd, exec (generated; run with bash)
#   rdma         present => bring up Soft-RoCE first with rdma_setup.sh
#   rdma_setup.sh
# Written here:
#   setup.log    output of rdma_setup.sh
#   output.log   the command's stdout+stderr (the host streams this file while we run)
#   rc           the command's exit status, written only once it has one. qemu exits 0 on
#                any guest poweroff, so this file is the only channel for the status.
#   error        why the command was not run (setup failure)
#   timings      guest uptime (s) at each step
#
# PID 1 must never exit (that is a kernel panic), so no `set -e` here; every path ends in
# poweroff.
set -u

work=${XFERD_VM_WORK:?XFERD_VM_WORK not set by /init}
uptime_s() { cut -d' ' -f1 /proc/uptime; }
mark() { printf '%s %s\n' "$1" "$(uptime_s)" >>"$work/timings"; }
say() { printf '[stage2] %s\n' "$*"; }  # to the serial console (console.log on the host)

power_off() {
  sync
  # -f: no init system to ask; the filesystems that matter are 9p with cache=none (written
  # through) or tmpfs (discarded).
  /bin/busybox poweroff -f
  echo o >/proc/sysrq-trigger
  sleep 60
}

mark stage2
say "up at $(uptime_s)s, kernel $(uname -r)"

# A writable home in tmpfs: /root is the host's, read-only (Bazel's output base is there).
export HOME=/tmp/home USER=root LOGNAME=root SHELL=/bin/bash
export PYTHONDONTWRITEBYTECODE=1  # read-only root: no __pycache__ writes
export XFERD_VM=1
mkdir -p "$HOME"
hostname localhost
# Memory registration pins pages. Root has CAP_IPC_LOCK anyway; a raised limit also covers
# commands that drop privileges (the default is 8 MiB).
ulimit -l unlimited

if [[ -e $work/rdma ]]; then
  if bash "$work/rdma_setup.sh" </dev/null >"$work/setup.log" 2>&1; then
    # Values the command can rely on (rdma_setup.sh creates exactly these).
    export XFERD_RDMA_DEV=rxe0 XFERD_RDMA_NETDEV=dummy0 XFERD_RDMA_IP=10.9.9.1 XFERD_RDMA_GID_INDEX=1
    mark rdma_ready
  else
    printf 'Soft-RoCE setup failed (exit %s); see setup.log\n' "$?" >"$work/error"
    say "Soft-RoCE setup FAILED:"
    cat "$work/setup.log"
    power_off
  fi
fi

mark command_start
bash "$work/job.sh" </dev/null >>"$work/output.log" 2>&1
rc=$?
mark command_end
printf '%s\n' "$rc" >"$work/rc.tmp" && mv -f "$work/rc.tmp" "$work/rc"
say "command exit status $rc at $(uptime_s)s"
power_off
