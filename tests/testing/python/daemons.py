"""Starts and stops real xferd daemons: the one launcher of the integration,
load and fault tests and of the benchmarks.

Each daemon listens on 127.0.0.1:0 (gRPC and TCP data) unless told otherwise,
serves a unix socket and writes a ready file, all under one short directory
(unix socket paths must stay under 108 bytes, and Bazel's TEST_TMPDIR can be
long).

Its config file, written here, holds regions.file_dirs (the cluster's
directory and any the caller adds), after any extra configuration the caller
gives, so no /etc/xferd/xferd.toml leaks in. (SHM regions are memfds, with no
name on any filesystem, so daemons of tests running in parallel cannot
collide on them.)

Stopping sends SIGTERM to the pids this module started, and only those, and
checks that each daemon exited 0 and removed its sockets.
Nothing here imports the xferd client until Daemon.client() needs it, so the
benchmarks can load it from the build they measure.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence

if TYPE_CHECKING:
    import xferd

__all__ = ["Daemon", "Cluster", "daemon_binary", "TRANSPORT"]

# Unix socket paths are limited to 107 bytes plus NUL (sun_path); leave room
# for "/<name>.sock" below the directory.
_MAX_DIR_LEN = 80
_READY_TIMEOUT_S = 20.0
_STOP_TIMEOUT_S = 20.0
_POLL_S = 0.01
_LOG_TAIL_BYTES = 4000
# The transport every daemon must use: "tcp" (default) or "verbs" (the
# Soft-RoCE suite). Passed explicitly, with require_rdma for verbs, so a
# suite never silently runs over another transport than it claims.
TRANSPORT = os.environ.get("XFERD_TEST_TRANSPORT", "tcp")


def daemon_binary() -> str:
    """The xferd binary: $XFERD_BIN, else the one in this test's runfiles."""
    explicit = os.environ.get("XFERD_BIN")
    if explicit:
        return explicit
    for root in (os.environ.get("TEST_SRCDIR"), os.environ.get("RUNFILES_DIR")):
        if root:
            workspace = os.environ.get("TEST_WORKSPACE", "xferd")
            path = os.path.join(root, workspace, "daemon", "xferd")
            if os.path.exists(path):
                return path
    raise RuntimeError("xferd binary not found: run under Bazel or set XFERD_BIN")


def _make_workdir() -> str:
    base = os.environ.get("TEST_TMPDIR") or tempfile.gettempdir()
    if len(base) > _MAX_DIR_LEN - 12:
        base = "/tmp"
    return tempfile.mkdtemp(prefix="xf", dir=base)


class Daemon:
    """One xferd process started by this module.

    Attributes:
        name: The node id (and the stem of its files).
        proc: The running process (None before start).
        info: The ready file's JSON: node_id, grpc_address, port, pid.
    """

    def __init__(self, name: str, workdir: str, binary: str,
                 pollers: Optional[int] = 2, slice_size: Optional[str] = "1MiB",
                 extra_args: Sequence[str] = (), host: str = "127.0.0.1", port: int = 0,
                 netns: Optional[str] = None, config_extra: str = "",
                 transport: str = TRANSPORT, log_level: str = "debug",
                 file_dirs: Sequence[str] = (), data_host: Optional[str] = None,
                 env: Optional[Dict[str, str]] = None) -> None:
        """Describes a daemon; start() runs it.

        `pollers` and `slice_size` None leave the daemon's defaults. `host`
        and `port` are where it serves gRPC and TCP data lanes (port 0: any; a
        fixed port keeps its address across restarts). `netns` runs it in that
        network namespace (`ip netns exec`); the caller still reaches it over
        its unix socket. `config_extra` opens its config file (TOML, e.g.
        "[tls]\nallowed_clients = [...]"). `transport` "verbs" also requires
        RDMA, so a run never silently falls back to TCP. File regions may
        be in `workdir` and in `file_dirs` (regions.file_dirs). TCP data
        lanes listen on `data_host` (default: `host`), e.g. "0.0.0.0".
        `env` adds to its environment (a test hook's variable).
        """
        self.env = dict(env or {})
        self.name = name
        self.host = host
        self.data_host = data_host or host
        self.port = port
        self.netns = netns
        self.config_extra = config_extra
        self.file_dirs = [workdir, *file_dirs]
        self.binary = binary
        self.pollers = pollers
        self.slice_size = slice_size
        self.transport = transport
        self.log_level = log_level
        self.extra_args = list(extra_args)
        self.socket_path = os.path.join(workdir, f"{name}.sock")
        self.ready_path = os.path.join(workdir, f"{name}.ready")
        self.config_path = os.path.join(workdir, f"{name}.toml")
        self.log_path = os.path.join(workdir, f"{name}.log")
        assert len(self.socket_path) < 108, self.socket_path
        self.proc: Optional[subprocess.Popen] = None
        self._ended = False  # by kill() or terminate(): nothing left to stop
        self.info: Dict[str, object] = {}
        self._clients: List["xferd.Client"] = []

    def __repr__(self) -> str:
        pid = self.proc.pid if self.proc else None
        return f"Daemon({self.name!r}, pid={pid}, address={self.info.get('grpc_address')!r})"

    @property
    def node_id(self) -> str:
        """The node id peers and writes use."""
        return str(self.info["node_id"])

    @property
    def address(self) -> str:
        """The gRPC address ("host:port") other daemons connect to."""
        return str(self.info["grpc_address"])

    @property
    def pid(self) -> int:
        """The process id."""
        assert self.proc is not None
        return self.proc.pid

    @property
    def target(self) -> str:
        """The client target over the unix socket."""
        return "unix:" + self.socket_path

    def start(self, timeout: float = _READY_TIMEOUT_S) -> "Daemon":
        """Runs the daemon and waits for its ready file (spawn, wait_ready).

        Raises:
            AssertionError: it exited, or was not ready within `timeout` s.
        """
        self.spawn()
        self.wait_ready(timeout)
        return self

    def spawn(self) -> subprocess.Popen:
        """Writes the config and runs the daemon; returns the process at once."""
        assert self.proc is None or self.proc.poll() is not None, f"{self} is running"
        with open(self.config_path, "w") as config:
            config.write(f'{self.config_extra}\n[regions]\n'
                         f'file_dirs = {json.dumps(self.file_dirs)}\n')
        for stale in (self.ready_path, self.socket_path):
            if os.path.exists(stale):
                os.unlink(stale)
        self._ended = False
        with open(self.log_path, "ab") as log:
            log.write(f"---- start: {' '.join(self.args())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.args(), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT,
                                         env={**os.environ, **self.env})
        return self.proc

    def args(self) -> List[str]:
        """The command line that runs this daemon."""
        netns = ["ip", "netns", "exec", self.netns] if self.netns else []
        tuning = ((["--pollers", str(self.pollers)] if self.pollers else [])
                  + (["--slice-size", self.slice_size] if self.slice_size else []))
        return netns + [
            self.binary, "--config", self.config_path, "--node-id", self.name,
            "--listen", f"{self.host}:{self.port}", "--unix-socket", self.socket_path,
            "--ready-file", self.ready_path, *tuning, "--log-level", self.log_level,
            "--data-listen", f"{self.data_host}:0", "--transport", self.transport,
        ] + (["--require-rdma"] if self.transport == "verbs" else []) + self.extra_args

    def wait_ready(self, timeout: float = _READY_TIMEOUT_S) -> None:
        """After spawn(): waits for the ready file and reads it.

        Raises:
            AssertionError: it exited, or was not ready within `timeout` s.
        """
        # The daemon writes the file atomically (rename) once it serves; there
        # is nothing to block on, so poll it with a short period and a bound.
        deadline = time.monotonic() + timeout
        assert self.proc is not None
        while not os.path.exists(self.ready_path):
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"{self.name} exited with {self.proc.returncode} before it was ready\n"
                    + self.log_tail())
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} not ready after {timeout} s\n"
                                     + self.log_tail())
            time.sleep(_POLL_S)
        with open(self.ready_path) as f:
            self.info = json.load(f)
        assert self.info["pid"] == self.proc.pid, (self.info, self.proc.pid)

    def client(self, **kwargs: object) -> "xferd.Client":
        """A client over the unix socket, closed when the daemon stops."""
        import xferd

        c = xferd.Client(self.target, **kwargs)  # type: ignore[arg-type]
        self._clients.append(c)
        return c

    def _close_clients(self) -> None:
        for c in self._clients:
            c.close()
        self._clients.clear()

    def stop(self, timeout: float = _STOP_TIMEOUT_S) -> None:
        """SIGTERM, then checks exit code 0, no socket and no SHM file left.

        Raises:
            AssertionError: any of those checks fails (the process is killed
                if it did not exit in time).
        """
        self._close_clients()
        if self.proc is None or self._ended:
            return
        self.terminate()
        self.wait_stopped(timeout)

    def terminate(self) -> None:
        """Sends SIGTERM (clients stay open: they may watch the drain)."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.name} died before teardown (exit code "
                                 f"{self.proc.returncode})\n{self.log_tail()}")
        self.proc.send_signal(signal.SIGTERM)

    def wait_stopped(self, timeout: float = _STOP_TIMEOUT_S) -> None:
        """After terminate(): checks exit code 0, no socket and no SHM file left.

        Raises:
            AssertionError: any of those checks fails (the process is killed
                if it did not exit in time).
        """
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self._ended = True
            raise AssertionError(f"{self.name} ignored SIGTERM for {timeout} s\n"
                                 + self.log_tail())
        self._ended = True
        self._close_clients()
        assert code == 0, f"{self.name} exited with {code}\n{self.log_tail()}"
        for path in (self.socket_path, self.socket_path + ".local"):
            assert not os.path.exists(path), f"{self.name} left {path}"

    def kill(self) -> None:
        """SIGKILL (a crash); removes what the daemon could not clean up."""
        self._close_clients()
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()
        self._ended = True
        for path in (self.socket_path, self.socket_path + ".local", self.ready_path):
            if os.path.exists(path):
                os.unlink(path)

    def pause(self) -> None:
        """SIGSTOP: the daemon stops reading its sockets (a stalled peer).
        Returns once every thread is stopped: kill() only queues the signal,
        and the stop reaches the other threads after the one that takes it
        runs, which on a loaded host can be milliseconds while the pollers
        still serve."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while not self._all_threads_stopped():
            assert time.monotonic() < deadline, f"{self}: threads still running after SIGSTOP"
            time.sleep(0.001)

    def _all_threads_stopped(self) -> bool:
        """Every thread's state in /proc is T (stopped)."""
        assert self.proc is not None
        tasks = f"/proc/{self.proc.pid}/task"
        for tid in os.listdir(tasks):
            try:
                with open(f"{tasks}/{tid}/stat") as f:
                    # The state follows the command name's closing parenthesis.
                    if f.read().rsplit(")", 1)[1].split()[0] != "T":
                        return False
            except FileNotFoundError:  # the thread ended meanwhile
                continue
        return True

    def resume(self) -> None:
        """SIGCONT after pause()."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def log_tail(self) -> str:
        """The end of the daemon's log, for failure messages."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - _LOG_TAIL_BYTES))
                return f"---- {self.log_path} (tail)\n" + f.read().decode(errors="replace")
        except OSError as e:
            return f"(no log: {e})"


class Cluster:
    """Several daemons in one temporary directory; a context manager."""

    def __init__(self, names: Iterable[str],
                 each: Optional[Dict[str, Dict[str, object]]] = None,
                 **daemon_args: object) -> None:
        """Describes daemons called `names`; start() runs them.

        `daemon_args` go to every Daemon, `each[name]` to that one only.
        """
        self.workdir = _make_workdir()
        binary = daemon_binary()
        each = each or {}
        self.daemons: Dict[str, Daemon] = {
            name: Daemon(name, self.workdir, binary,
                         **{**daemon_args, **each.get(name, {})})  # type: ignore[arg-type]
            for name in names
        }

    def __getitem__(self, name: str) -> Daemon:
        return self.daemons[name]

    def start(self) -> "Cluster":
        """Starts every daemon (stopping those started if one fails)."""
        try:
            for daemon in self.daemons.values():
                daemon.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stops every daemon; raises one AssertionError naming all failures."""
        failures = []
        for daemon in self.daemons.values():
            try:
                daemon.stop()
            except AssertionError as e:
                failures.append(str(e))
        if failures:
            raise AssertionError("\n\n".join(failures))  # the logs stay in workdir
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
