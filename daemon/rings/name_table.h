// The names one session's submission entries refer to by handle (regions,
// layouts, peers, labels): interned over the local socket, looked up by the
// poller serving the session's ring. A handle is never reused within the
// session; 0 is never a handle. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/base/mutex.h"

namespace xferd::rings {

inline constexpr uint32_t kMaxNames = 65535;
inline constexpr size_t kMaxNameBytes = 255;

class NameTable {
 public:
  // The handle of `name`, interning it if new. INVALID_ARGUMENT for an empty
  // or too long name, RESOURCE_EXHAUSTED once kMaxNames are interned.
  absl::StatusOr<uint32_t> Intern(absl::string_view name);
  // The name of `handle` (a copy), or INVALID_ARGUMENT naming `field` when
  // the session interned no such handle.
  absl::StatusOr<std::string> Lookup(uint32_t handle, absl::string_view field) const;
  uint32_t size() const;

 private:
  mutable Mutex mu_;
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);  // handle h at h - 1
  absl::flat_hash_map<std::string, uint32_t> handles_ ABSL_GUARDED_BY(mu_);
};

}  // namespace xferd::rings
