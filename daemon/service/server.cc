#include "daemon/service/server.h"

#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/service/unix_acceptor.h"

namespace xferd::service {
namespace {

// Control messages are small; transfers never travel through gRPC.
constexpr int kMaxMessageBytes = 16 << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options,
                                                      std::vector<grpc::Service*> services) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  if (!options.listen.empty()) {
    builder.AddListeningPort(options.listen, options.tcp_credentials, &port);
  }
  for (grpc::Service* service : services) builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || (!options.listen.empty() && port == 0)) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve gRPC on ", options.listen, " (address in use? permissions?)"));
  }
  // Local clients are trusted by the socket's file mode, and told apart by
  // their credentials (caller.h).
  std::unique_ptr<UnixAcceptor> unix_acceptor;
  if (!options.unix_socket.empty()) {
    absl::StatusOr<std::unique_ptr<UnixAcceptor>> acceptor =
        UnixAcceptor::Start(options.unix_socket, options.unix_socket_mode, server.get());
    if (!acceptor.ok()) {
      server->Shutdown();
      return acceptor.status();
    }
    unix_acceptor = *std::move(acceptor);
  }
  auto wrapped =
      std::unique_ptr<Server>(new Server(std::move(server), port, std::move(unix_acceptor)));
  wrapped->SetServing(true);
  return wrapped;
}

Server::Server(std::unique_ptr<grpc::Server> server, int port,
               std::unique_ptr<UnixAcceptor> unix_acceptor)
    : server_(std::move(server)), port_(port), unix_acceptor_(std::move(unix_acceptor)) {}

Server::~Server() { Shutdown(absl::Now()); }

void Server::SetServing(bool serving) {
  if (auto* health = server_->GetHealthCheckService()) health->SetServingStatus(serving);
}

void Server::Shutdown(absl::Time deadline) {
  if (unix_acceptor_ != nullptr) unix_acceptor_->Stop();  // no new connections
  server_->Shutdown(absl::ToChronoTime(deadline));
  server_->Wait();
}

}  // namespace xferd::service
