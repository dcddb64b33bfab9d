// Blocking-with-deadline socket helpers for the TCP transport's control steps
// (listen, dial, HELLO exchange) and the options every data socket gets.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/common/host_port.h"
#include "daemon/common/unique_fd.h"

namespace xferd::transport::tcp {

// A listening socket (SO_REUSEADDR, close-on-exec, non-blocking).
absl::StatusOr<UniqueFd> Listen(const HostPort& where, int backlog);
// The port a bound socket got (for port 0).
absl::StatusOr<uint16_t> LocalPort(int fd);
// "ip:port" of the remote end, for logs.
std::string PeerAddress(int fd);

// Connects by the deadline. UNAVAILABLE / DEADLINE_EXCEEDED.
absl::StatusOr<UniqueFd> Dial(const HostPort& where, absl::Time deadline);
// Waits until `fd` is ready for poll `events` (POLLIN, POLLOUT) or the
// deadline passes: DEADLINE_EXCEEDED.
absl::Status WaitFor(int fd, short events, absl::Time deadline);
// Exactly `len` bytes, or UNAVAILABLE / DEADLINE_EXCEEDED.
absl::Status SendExactly(int fd, const void* data, size_t len, absl::Time deadline);
absl::Status RecvExactly(int fd, void* data, size_t len, absl::Time deadline);

struct DataSocketOptions {
  // SO_SNDBUF/SO_RCVBUF; 0 keeps the kernel's autotuning.
  uint64_t buffer_bytes = 0;
  // Unacknowledged data older than this breaks the connection
  // (TCP_USER_TIMEOUT); idle connections are probed by keepalive.
  absl::Duration user_timeout = absl::Seconds(10);
};

// TCP_NODELAY, buffers, keepalive, user timeout, O_NONBLOCK.
absl::Status ConfigureDataSocket(int fd, const DataSocketOptions& options);

}  // namespace xferd::transport::tcp
