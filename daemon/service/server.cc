#include "daemon/service/server.h"

#include <grpcpp/health_check_service_interface.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"

namespace xferd::service {
namespace {

// Control messages are small; transfers never travel through gRPC.
constexpr int kMaxMessageBytes = 16 << 20;

absl::Status PrepareUnixSocketPath(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    const std::string dir = path.substr(0, slash);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::UnavailableError(
          absl::StrCat("cannot create ", dir, " for the unix socket: ", std::strerror(errno)));
    }
  }
  // A socket file left by a previous run would make the bind fail.
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(path.c_str());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options,
                                                      std::vector<grpc::Service*> services) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  if (!options.listen.empty()) {
    builder.AddListeningPort(options.listen, options.tcp_credentials, &port);
  }
  if (!options.unix_socket.empty()) {
    absl::Status s = PrepareUnixSocketPath(options.unix_socket);
    if (!s.ok()) return s;
    // Local clients are trusted by file permission on the socket.
    builder.AddListeningPort("unix:" + options.unix_socket, grpc::InsecureServerCredentials());
  }
  for (grpc::Service* service : services) builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || (!options.listen.empty() && port == 0)) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve gRPC on ", options.listen.empty() ? "" : options.listen,
                     options.unix_socket.empty() ? "" : " unix:" + options.unix_socket,
                     " (address in use? permissions?)"));
  }
  if (!options.unix_socket.empty() &&
      ::chmod(options.unix_socket.c_str(), options.unix_socket_mode) != 0) {
    server->Shutdown();
    return absl::UnavailableError(
        absl::StrCat("cannot chmod ", options.unix_socket, ": ", std::strerror(errno)));
  }
  auto wrapped = std::unique_ptr<Server>(new Server(std::move(server), port, options.unix_socket));
  wrapped->SetServing(true);
  return wrapped;
}

Server::Server(std::unique_ptr<grpc::Server> server, int port, std::string unix_socket)
    : server_(std::move(server)), port_(port), unix_socket_(std::move(unix_socket)) {}

Server::~Server() {
  Shutdown(absl::Now());
  if (!unix_socket_.empty()) ::unlink(unix_socket_.c_str());
}

void Server::SetServing(bool serving) {
  if (auto* health = server_->GetHealthCheckService()) health->SetServingStatus(serving);
}

void Server::Shutdown(absl::Time deadline) {
  server_->Shutdown(absl::ToChronoTime(deadline));
  server_->Wait();
}

}  // namespace xferd::service
