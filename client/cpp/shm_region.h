// An SHM region's memory mapped into this process, to fill or read in place
// with no copies. The daemon hands the region's sealed memfd over its local
// socket (local_socket.h); nobody can shrink or grow it, so the mapping stays
// valid as long as this object lives, even after the region is deregistered
// (then it is no longer the region's memory). Thread-compatible.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace xferd::client {

class ShmRegion {
 public:
  // Asks the daemon listening at `local_socket` for SHM region `name` and
  // maps it read-write. Errors: UNAVAILABLE (no local socket there), the
  // daemon's NOT_FOUND (no such region) or FAILED_PRECONDITION (not SHM),
  // INTERNAL (no descriptor came, or mmap failed: the message says why).
  static absl::StatusOr<std::unique_ptr<ShmRegion>> Open(const std::string& local_socket,
                                                         const std::string& name);
  ~ShmRegion();  // unmaps and closes the descriptor

  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;

  const std::string& name() const { return name_; }
  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  // The memfd, for callers that map it again or hand it on; owned here.
  int fd() const { return fd_; }

 private:
  ShmRegion(std::string name, int fd, uint8_t* data, uint64_t size)
      : name_(std::move(name)), fd_(fd), data_(data), size_(size) {}

  const std::string name_;
  const int fd_;
  uint8_t* const data_;
  const uint64_t size_;
};

}  // namespace xferd::client
