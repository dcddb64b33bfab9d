// The local socket (proto/xferd/v1/local.proto, docs/local-socket.md): a
// SOCK_SEQPACKET unix socket beside the gRPC one, where clients of this host
// ask for what gRPC cannot carry, descriptors: SHM regions' sealed memfds and
// their request rings (docs/local-rings.md). One thread (xferd-local)
// accepts, answers each client's requests in order and hands descriptors over
// with SCM_RIGHTS. A client's connection is its session: when it closes (or
// its process dies) the session's rings close and its transfers in flight
// end, but those submitted detached. Authenticated as the gRPC socket is: by
// its file mode, with each client's credentials (SO_PEERCRED) logged.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "daemon/common/unique_fd.h"
#include "daemon/engine/engine.h"
#include "daemon/rings/ring_session.h"
#include "xferd/v1/local.pb.h"

namespace xferd::service {

struct LocalSocketOptions {
  std::string path;            // "<unix_socket>.local"
  uint32_t mode = 0660;        // as the gRPC socket's
  uint32_t max_sessions = 1024;
  bool rings = true;  // server.local_rings: false refuses open_rings
};

// The local socket's path for a gRPC unix socket's.
std::string LocalSocketPath(const std::string& unix_socket);

class LocalSocket {
 public:
  // Binds (replacing a stale socket file), sets the mode, starts the thread.
  // `engine` outlives the socket. UNAVAILABLE when it cannot bind.
  static absl::StatusOr<std::unique_ptr<LocalSocket>> Start(const LocalSocketOptions& options,
                                                            engine::Engine& engine);
  ~LocalSocket();  // Stop()

  // Stops accepting, closes every session, joins, removes the socket file.
  // Idempotent; any thread but its own.
  void Stop();

  // Sessions open now (any thread).
  uint32_t sessions() const { return sessions_.load(std::memory_order_relaxed); }

 private:
  struct Connection {
    UniqueFd fd;
    rings::LocalClient client;
    std::shared_ptr<rings::RingSession> session;
  };

  LocalSocket(LocalSocketOptions options, engine::Engine& engine, UniqueFd listener,
              UniqueFd epoll, UniqueFd wake);
  void Run();
  void Accept();
  // Reads one request and answers it; false once the connection is done.
  bool Serve(Connection& c);
  // `keep` owns the descriptors in `fds` until the reply is sent.
  v1::LocalReply Handle(Connection& c, const v1::LocalRequest& request, std::vector<int>* fds,
                        std::shared_ptr<const void>* keep);
  absl::Status OpenRings(Connection& c, const v1::OpenRingsRequest& r, v1::LocalReply* reply,
                         std::vector<int>* fds);
  // NOT_FOUND, FAILED_PRECONDITION (not shm), INVALID_ARGUMENT (no name).
  absl::Status OpenRegion(const Connection& c, const v1::OpenRegionRequest& r,
                          v1::LocalReply* reply, std::vector<int>* fds,
                          std::shared_ptr<const void>* keep);
  void Drop(int fd);

  const LocalSocketOptions options_;
  engine::Engine& engine_;
  const UniqueFd listener_;
  const UniqueFd epoll_;
  const UniqueFd wake_;  // eventfd: Stop() ends the loop
  std::atomic<bool> stop_{false};
  std::atomic<uint32_t> sessions_{0};
  uint64_t next_session_ = 1;  // the thread's
  absl::flat_hash_map<int, std::unique_ptr<Connection>> connections_;  // the thread's
  std::thread thread_;
};

}  // namespace xferd::service
