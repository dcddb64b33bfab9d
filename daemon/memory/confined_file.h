// Opens a file region's file only inside the directories the configuration
// allows (regions.file_dirs), so a client cannot turn the daemon into a
// deputy that exposes any file it can write (its own configuration, a
// credential) to remote writes. The kernel resolves the path beneath the
// directory with no symlink anywhere in it (openat2 RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS), so nothing swapped in between a check and the open
// can lead outside; the result must be a regular file with one link.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/common/unique_fd.h"

namespace xferd::memory {

struct FileConfinement {
  // Absolute directories; empty: file regions are refused.
  std::vector<std::string> dirs;
  // Mode of files a registration creates (before the umask is removed).
  mode_t create_mode = 0640;
};

// Opens `path` (absolute, inside one of confinement.dirs) with `flags`
// (O_RDWR / O_RDONLY, O_CREAT | O_EXCL to create; O_CLOEXEC and O_NOFOLLOW
// are added). On failure errno-style statuses carry the path; a path outside
// the directories, through a symlink, or not a regular single-link file is
// PERMISSION_DENIED naming regions.file_dirs. *created says whether this
// call created the file (then the caller removes it if it fails later).
absl::StatusOr<UniqueFd> OpenConfined(const FileConfinement& confinement, const std::string& path,
                                      int flags, bool* created);

// Undoes a creation by OpenConfined when the registration fails after it:
// removes `path` only if, reached the same way (beneath its directory, no
// symlink), that name still is the file `fd` is open on. Unlinking by path
// would follow a directory swapped for a symlink in between and delete a
// file elsewhere. Best effort: the registration's own error is the one to
// report.
void RemoveCreated(const FileConfinement& confinement, const std::string& path, int fd);

}  // namespace xferd::memory
