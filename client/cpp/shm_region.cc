#include "client/cpp/shm_region.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cpp/local_socket.h"

namespace xferd::client {

absl::StatusOr<std::unique_ptr<ShmRegion>> ShmRegion::Open(const std::string& local_socket,
                                                           const std::string& name) {
  absl::StatusOr<int> socket = ConnectLocalSocket(local_socket);
  if (!socket.ok()) return socket.status();
  v1::LocalRequest request;
  request.mutable_open_region()->set_region(name);
  std::vector<int> fds;
  absl::StatusOr<v1::LocalReply> reply = LocalExchange(*socket, request, &fds);
  ::close(*socket);  // the descriptor outlives the connection
  const int fd = fds.size() == 1 ? fds[0] : -1;
  if (fd < 0) {
    for (int f : fds) ::close(f);
    if (!reply.ok()) return reply.status();
    return absl::InternalError(absl::StrCat("the daemon sent no memory for region '", name, "'"));
  }
  if (!reply.ok()) {
    ::close(fd);
    return reply.status();
  }
  const uint64_t size = reply->region().size();
  void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    return absl::InternalError(
        absl::StrCat("cannot map region '", name, "' (", size, " bytes): ", std::strerror(err)));
  }
  return std::unique_ptr<ShmRegion>(new ShmRegion(name, fd, static_cast<uint8_t*>(data), size));
}

ShmRegion::~ShmRegion() {
  ::munmap(data_, size_);
  ::close(fd_);
}

}  // namespace xferd::client
