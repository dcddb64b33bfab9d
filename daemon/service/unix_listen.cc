#include "daemon/service/unix_listen.h"

#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace xferd::service {
namespace {

constexpr int kListenBacklog = 128;

absl::Status Unavailable(const char* what, const std::string& path, const char* call) {
  return absl::UnavailableError(
      absl::StrCat(what, " ", path, ": ", call, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<UniqueFd> ListenUnix(const std::string& path, int type, uint32_t mode,
                                    const char* what) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " path ", path, " is longer than ",
                                                   sizeof(addr.sun_path) - 1,
                                                   " bytes, too long for a unix socket"));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    const std::string dir = path.substr(0, slash);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return Unavailable(what, path, "mkdir of its directory");
    }
  }
  UniqueFd listener(::socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listener.valid()) return Unavailable(what, path, "socket");
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
    ::unlink(path.c_str());  // a previous run's
  }
  if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Unavailable(what, path, "bind");
  }
  // The mode is set before listen(): nobody connects under a wider one.
  if (::chmod(path.c_str(), mode) != 0 || ::listen(listener.get(), kListenBacklog) != 0) {
    const absl::Status s = Unavailable(what, path, "chmod/listen");
    ::unlink(path.c_str());
    return s;
  }
  return listener;
}

std::optional<ucred> PeerCredentials(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof(cred)) {
    return std::nullopt;
  }
  return cred;
}

}  // namespace xferd::service
