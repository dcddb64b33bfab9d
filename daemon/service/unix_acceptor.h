// The gRPC unix socket, accepted by the daemon itself. gRPC's own unix
// listener keeps the connection from the handlers, so nothing could tell
// one local client from another; here each accepted connection is handed
// to the server as a channel of its own (grpc::AddInsecureChannelFromFd),
// whose peer string names the descriptor ("fd:N"). While a call runs its
// connection is open, so that descriptor is the caller's and its
// SO_PEERCRED says who called (caller.h). One thread, xferd-unix.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "daemon/common/unique_fd.h"

namespace xferd::service {

class UnixAcceptor {
 public:
  // Listens at `path` with `mode` and hands each connection to `server`
  // (started, outliving the acceptor). UNAVAILABLE when it cannot bind.
  static absl::StatusOr<std::unique_ptr<UnixAcceptor>> Start(const std::string& path, uint32_t mode,
                                                             grpc::Server* server);
  ~UnixAcceptor();  // Stop()

  // Stops accepting (connections already handed over stay the server's),
  // joins, removes the socket file. Idempotent.
  void Stop();

 private:
  UnixAcceptor(std::string path, UniqueFd listener, UniqueFd wake, grpc::Server* server);
  void Run();

  const std::string path_;
  const UniqueFd listener_;
  const UniqueFd wake_;  // eventfd: Stop() ends the loop
  grpc::Server* const server_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace xferd::service
