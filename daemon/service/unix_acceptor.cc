#include "daemon/service/unix_acceptor.h"

#include <grpcpp/server_posix.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/service/unix_listen.h"

namespace xferd::service {

absl::StatusOr<std::unique_ptr<UnixAcceptor>> UnixAcceptor::Start(const std::string& path,
                                                                  uint32_t mode,
                                                                  grpc::Server* server) {
  absl::StatusOr<UniqueFd> listener = ListenUnix(path, SOCK_STREAM, mode, "unix socket");
  if (!listener.ok()) return listener.status();
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) {
    return absl::UnavailableError(absl::StrCat("unix socket: eventfd: ", std::strerror(errno)));
  }
  auto acceptor = std::unique_ptr<UnixAcceptor>(
      new UnixAcceptor(path, *std::move(listener), std::move(wake), server));
  acceptor->thread_ = std::thread([a = acceptor.get()] {
    pthread_setname_np(pthread_self(), "xferd-unix");
    a->Run();
  });
  return acceptor;
}

UnixAcceptor::UnixAcceptor(std::string path, UniqueFd listener, UniqueFd wake, grpc::Server* server)
    : path_(std::move(path)),
      listener_(std::move(listener)),
      wake_(std::move(wake)),
      server_(server) {}

UnixAcceptor::~UnixAcceptor() { Stop(); }

void UnixAcceptor::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
  thread_.join();
  ::unlink(path_.c_str());
}

void UnixAcceptor::Run() {
  pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
  while (!stop_.load()) {
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) {
      spdlog::error("unix socket {}: poll: {}", path_, std::strerror(errno));
      return;
    }
    while (!stop_.load()) {
      // Non-blocking, as gRPC's own endpoints are.
      const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE) {
          spdlog::warn("unix socket {}: accept: {}", path_, std::strerror(errno));
          ::poll(nullptr, 0, 100);  // until a descriptor is free again
        }
        break;  // EAGAIN: all taken
      }
      // The server owns it from here, and closes it with the connection.
      grpc::AddInsecureChannelFromFd(server_, fd);
    }
  }
}

}  // namespace xferd::service
