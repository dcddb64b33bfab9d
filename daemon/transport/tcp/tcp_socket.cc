#include "daemon/transport/tcp/tcp_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"

namespace xferd::transport::tcp {
namespace {

absl::Status SysError(absl::string_view what, int err) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(err)));
}

// Resolves `where` and gives each of its addresses, in order, a fresh
// close-on-exec, non-blocking stream socket and `use`, until `use` returns OK:
// that socket is the result. Otherwise the last error.
absl::StatusOr<UniqueFd> OpenFirstAddress(
    const HostPort& where, bool passive,
    absl::FunctionRef<absl::Status(int fd, const addrinfo& address)> use) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  const std::string port = std::to_string(where.port);
  const int rc =
      getaddrinfo(where.host.empty() ? nullptr : where.host.c_str(), port.c_str(), &hints, &result);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve '", where.host, "': ", gai_strerror(rc)));
  }
  const std::unique_ptr<addrinfo, void (*)(addrinfo*)> addresses(result, &freeaddrinfo);
  absl::Status last =
      absl::UnavailableError(absl::StrCat("'", where.host, "' resolves to no address"));
  for (const addrinfo* ai = addresses.get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) {
      last = SysError("socket", errno);
      continue;
    }
    last = use(fd.get(), *ai);
    if (last.ok()) return fd;
  }
  return last;
}

}  // namespace

absl::Status WaitFor(int fd, short events, absl::Time deadline) {
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return absl::DeadlineExceededError("timed out");
    pollfd pfd{fd, events, 0};
    const int rc = ::poll(&pfd, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (rc > 0) return absl::OkStatus();
    if (rc < 0 && errno != EINTR) return SysError("poll", errno);
  }
}

absl::StatusOr<UniqueFd> Listen(const HostPort& where, int backlog) {
  return OpenFirstAddress(where, /*passive=*/true, [&](int fd, const addrinfo& ai) {
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, ai.ai_addr, ai.ai_addrlen) != 0 || ::listen(fd, backlog) != 0) {
      return SysError(absl::StrCat("cannot listen on ", where.host, ":", where.port), errno);
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<uint16_t> LocalPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return SysError("getsockname", errno);
  }
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

std::string PeerAddress(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (addr.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
  } else {
    auto* in4 = reinterpret_cast<sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &in4->sin_addr, host, sizeof(host));
    port = ntohs(in4->sin_port);
  }
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<UniqueFd> Dial(const HostPort& where, absl::Time deadline) {
  const std::string what = absl::StrCat("connect to ", where.host, ":", where.port);
  return OpenFirstAddress(where, /*passive=*/false, [&](int fd, const addrinfo& ai) {
    if (::connect(fd, ai.ai_addr, ai.ai_addrlen) != 0 && errno != EINPROGRESS) {
      return SysError(what, errno);
    }
    if (absl::Status s = WaitFor(fd, POLLOUT, deadline); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
    }
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    return err == 0 ? absl::OkStatus() : SysError(what, err);
  });
}

absl::Status SendExactly(int fd, const void* data, size_t len, absl::Time deadline) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    const ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (absl::Status s = WaitFor(fd, POLLOUT, deadline); !s.ok()) return s;
    } else {
      return SysError("send", errno);
    }
  }
  return absl::OkStatus();
}

absl::Status RecvExactly(int fd, void* data, size_t len, absl::Time deadline) {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    const ssize_t n = ::recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
    } else if (n == 0) {
      return absl::UnavailableError("connection closed by peer");
    } else if (errno == EAGAIN || errno == EINTR) {
      if (absl::Status s = WaitFor(fd, POLLIN, deadline); !s.ok()) return s;
    } else {
      return SysError("recv", errno);
    }
  }
  return absl::OkStatus();
}

absl::Status ConfigureDataSocket(int fd, const DataSocketOptions& options) {
  const int one = 1;
  // Slices are whole frames handed over in one writev; Nagle would only add
  // latency to small writes and acknowledgements.
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return SysError("TCP_NODELAY", errno);
  }
  if (options.buffer_bytes > 0) {
    const int bytes = static_cast<int>(options.buffer_bytes);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  }
  // A peer that vanishes without a FIN/RST (power loss, partition) must still
  // break the lane in bounded time: keepalive for idle lanes, user timeout for
  // lanes with data in flight.
  const int idle = 5, interval = 2, count = 3;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  const unsigned timeout_ms =
      static_cast<unsigned>(absl::ToInt64Milliseconds(options.user_timeout));
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout_ms, sizeof(timeout_ms));
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return SysError("O_NONBLOCK", errno);
  }
  return absl::OkStatus();
}

}  // namespace xferd::transport::tcp
