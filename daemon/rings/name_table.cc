#include "daemon/rings/name_table.h"

#include "absl/strings/str_cat.h"

namespace xferd::rings {

absl::StatusOr<uint32_t> NameTable::Intern(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a name of ", name.size(),
                                                   " bytes: names are 1 to ", kMaxNameBytes,
                                                   " bytes"));
  }
  MutexLock lock(&mu_);
  if (auto it = handles_.find(name); it != handles_.end()) return it->second;
  if (names_.size() >= kMaxNames) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this session has interned ", kMaxNames,
                     " names, the most it may: open another session for more"));
  }
  names_.emplace_back(name);
  const uint32_t handle = static_cast<uint32_t>(names_.size());
  handles_.emplace(name, handle);
  return handle;
}

absl::StatusOr<std::string> NameTable::Lookup(uint32_t handle, absl::string_view field) const {
  MutexLock lock(&mu_);
  if (handle == 0 || handle > names_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " is handle ", handle, ", which this session never interned (", names_.size(),
        " names so far): intern the name on the local socket first"));
  }
  return names_[handle - 1];
}

uint32_t NameTable::size() const {
  MutexLock lock(&mu_);
  return static_cast<uint32_t>(names_.size());
}

}  // namespace xferd::rings
