#include "daemon/memory/sealed_memfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/base/units.h"
#include "daemon/memory/errno_status.h"

namespace xferd::memory {

absl::Status ReserveBlocks(int fd, uint64_t size, absl::string_view what) {
  const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(size));
  if (err == 0 || err == EOPNOTSUPP) return absl::OkStatus();
  return ErrnoStatus(err, absl::StrCat("cannot reserve ", FormatBytes(size), " for ", what));
}

absl::StatusOr<UniqueFd> CreateSealedMemfd(absl::string_view name, uint64_t size, bool reserve) {
  const std::string label(name);
  UniqueFd fd(::memfd_create(label.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return ErrnoStatus(errno, absl::StrCat("memfd_create for ", label));
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot size ", label, " to ", FormatBytes(size)));
  }
  if (reserve) RETURN_IF_ERROR(ReserveBlocks(fd.get(), size, label));
  // Before the descriptor leaves this process: a holder that could shrink
  // it would turn the daemon's next access to a lost page into a SIGBUS (and
  // over verbs leave pinned pages the file no longer has); F_SEAL_SEAL keeps
  // a holder from adding a write seal that would stop the others mapping it.
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot seal ", label));
  }
  return fd;
}

}  // namespace xferd::memory
