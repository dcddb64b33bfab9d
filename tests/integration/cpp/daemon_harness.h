// Test harness for integration tests: runs real xferd daemons as child
// processes (posix_spawn) on 127.0.0.1:0 with unix sockets in a short /tmp
// directory, waits for their ready file, and stops them with SIGTERM. Also
// maps SHM-backed regions so tests can fill and check bytes themselves.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace xferd::integration {

// The transport every daemon must use: $XFERD_TEST_TRANSPORT ("tcp" by
// default; "verbs" in the Soft-RoCE suite). Daemons get it explicitly, with
// require_rdma for verbs, so a suite never runs over another transport than
// it claims.
std::string TestTransport();

// Path of a data dependency of the running test:
// $TEST_SRCDIR/$TEST_WORKSPACE/<path>.
std::string RunfilePath(const std::string& path);

// A fresh directory under /tmp (short enough for unix socket paths), removed
// with its contents on destruction. Not thread-safe.
class ScratchDir {
 public:
  // Errors: INTERNAL if mkdtemp fails.
  static absl::StatusOr<std::unique_ptr<ScratchDir>> Create();
  ~ScratchDir();
  const std::string& path() const { return path_; }

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  const std::string path_;
};

struct DaemonOptions {
  std::string node_id;
  // Appended to the command line (e.g. {"--pollers", "4"}).
  std::vector<std::string> extra_args;
  // How long the daemon may take to write its ready file.
  absl::Duration ready_timeout = absl::Seconds(20);
  // Run it as pid 1 of a new PID namespace (through unshare), as in a
  // container or Bazel's sandbox: /dev/shm stays shared with the host.
  bool own_pid_namespace = false;
};

// Whether this process may create PID namespaces (own_pid_namespace).
bool PidNamespacesWork();

// One xferd child process. If the test process crashes (abort, segfault),
// every running Daemon gets SIGTERM, so none outlives the test or leaves its
// SHM files behind. Its files (empty config, socket, ready file, log)
// live in the directory given to Start. Not thread-safe.
class Daemon {
 public:
  // Spawns `binary` and waits for its ready file. Errors: INTERNAL (spawn
  // failed), UNAVAILABLE (exited or not ready in time; the message carries
  // the end of its log).
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const std::string& binary,
                                                       const std::string& dir,
                                                       const DaemonOptions& options);
  // Kills the process (SIGKILL) if Stop was not called or did not finish.
  ~Daemon();

  // Sends SIGTERM and reaps the process within `timeout`; returns its exit
  // code. Errors: DEADLINE_EXCEEDED (still running: it is then killed),
  // ABORTED (killed by a signal), FAILED_PRECONDITION (already stopped).
  absl::StatusOr<int> Stop(absl::Duration timeout = absl::Seconds(15));

  // SIGSTOP / SIGCONT: a stalled daemon (its sockets fill up, nothing is
  // read), to hold a transfer in flight on purpose. Pause returns once every
  // thread of it is stopped.
  void Pause();
  void Resume();

  const std::string& node_id() const { return node_id_; }
  // "127.0.0.1:<port>": what peers and TCP clients use.
  const std::string& grpc_address() const { return grpc_address_; }
  // "unix:<dir>/<node>.sock": what local clients use.
  std::string unix_target() const { return "unix:" + socket_path_; }
  // The child process: the daemon itself unless it runs in its own PID
  // namespace (then unshare, whose exit code is the daemon's).
  pid_t pid() const { return pid_; }
  // The daemon's stdout and stderr so far (for failure messages).
  std::string Log() const;

 private:
  Daemon(pid_t pid, std::string node_id, std::string socket_path, std::string log_path);
  absl::Status AwaitReady(const std::string& ready_file, absl::Duration timeout);
  // The child was reaped: forget its pids.
  void Reaped();

  pid_t pid_;         // the child: the daemon, or unshare running it
  pid_t daemon_pid_;  // the daemon itself (== pid_ without a PID namespace)
  const std::string node_id_;
  const std::string socket_path_;
  const std::string log_path_;
  std::string grpc_address_;
};

// Deterministic bytes for `seed` (different seeds give different streams).
void FillPattern(uint8_t* data, size_t size, uint64_t seed);

}  // namespace xferd::integration
