#include "client/cpp/local_socket.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace xferd::client {
namespace {

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

std::string LocalSocketFor(const std::string& target) {
  constexpr absl::string_view kUnix = "unix:";
  if (!absl::StartsWith(target, kUnix)) return "";
  std::string path = target.substr(kUnix.size());
  if (absl::StartsWith(path, "//")) path = path.substr(2);
  // Beside the socket we reached, wherever it is mounted.
  return path + ".local";
}

absl::StatusOr<int> ConnectLocalSocket(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path too long: ", path));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const absl::Status s = Errno(absl::StrCat("connecting to the daemon's local socket ", path));
    ::close(fd);
    return s;
  }
  return fd;
}

absl::StatusOr<v1::LocalReply> LocalExchange(int socket, const v1::LocalRequest& request,
                                             std::vector<int>* fds) {
  const std::string bytes = request.SerializeAsString();
  if (::send(socket, bytes.data(), bytes.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(bytes.size())) {
    return Errno("sending to the daemon's local socket");
  }
  std::string packet(64 << 10, '\0');
  iovec iov{packet.data(), packet.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  if (n <= 0)
    return n == 0 ? absl::UnavailableError("the daemon closed the local socket")
                  : Errno("reading the daemon's local socket");
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds->push_back(fd);
    }
  }
  v1::LocalReply reply;
  if (!reply.ParseFromArray(packet.data(), static_cast<int>(n))) {
    return absl::InternalError("the daemon's local reply does not parse");
  }
  if (reply.has_error()) {
    return absl::Status(static_cast<absl::StatusCode>(reply.error().code()),
                        reply.error().message());
  }
  return reply;
}

}  // namespace xferd::client
