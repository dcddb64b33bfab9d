// The daemon's gRPC server: the client service, the peer service and the
// standard grpc.health.v1 service, on a TCP address and a unix socket (whose
// connections UnixAcceptor accepts).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/service/unix_acceptor.h"

namespace xferd::service {

struct ServerOptions {
  std::string listen;       // "host:port"; "" for none
  std::string unix_socket;  // path; "" for none
  uint32_t unix_socket_mode = 0660;
  std::shared_ptr<grpc::ServerCredentials> tcp_credentials;
};

class Server {
 public:
  // Binds and starts serving. UNAVAILABLE if an address cannot be bound.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options,
                                                       std::vector<grpc::Service*> services);
  ~Server();

  // The bound TCP port (0 if none).
  int port() const { return port_; }
  // Health: SERVING until draining starts.
  void SetServing(bool serving);
  // Stops accepting calls; calls still running after `deadline` are cancelled.
  void Shutdown(absl::Time deadline);

 private:
  Server(std::unique_ptr<grpc::Server> server, int port,
         std::unique_ptr<UnixAcceptor> unix_acceptor);

  std::unique_ptr<grpc::Server> server_;
  const int port_;
  std::unique_ptr<UnixAcceptor> unix_acceptor_;  // null without a unix socket
};

}  // namespace xferd::service
