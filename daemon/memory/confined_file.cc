#include "daemon/memory/confined_file.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "daemon/base/status_macros.h"
#include "daemon/memory/errno_status.h"

namespace xferd::memory {
namespace {

absl::Status Denied(const FileConfinement& c, const std::string& path, absl::string_view why) {
  return absl::PermissionDeniedError(absl::StrCat(
      "file_path '", path, "' ", why, ": file regions must be regular files inside "
      "regions.file_dirs (", c.dirs.empty() ? "none configured" : absl::StrJoin(c.dirs, ", "),
      "), reached without symlinks"));
}

// The part of `path` below `dir`, or empty if `path` is not inside it.
absl::string_view Below(absl::string_view path, absl::string_view dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
  if (path.size() <= dir.size() + 1 || !absl::StartsWith(path, dir) || path[dir.size()] != '/') {
    return {};
  }
  return path.substr(dir.size() + 1);
}

// Lexically clean: no empty, "." or ".." component (the kernel refuses to
// leave the directory anyway; this gives the clearer message).
bool Clean(absl::string_view relative) {
  for (absl::string_view part : absl::StrSplit(relative, '/')) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return true;
}

int OpenBeneath(int dir_fd, const std::string& relative, int flags, mode_t mode) {
  open_how how{};
  // openat2 refuses O_PATH with any flag it ignores, O_NONBLOCK among them.
  const int nonblock = (flags & O_PATH) != 0 ? 0 : O_NONBLOCK;
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC | O_NOFOLLOW | nonblock);
  how.mode = (flags & O_CREAT) != 0 ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, dir_fd, relative.c_str(), &how, sizeof(how)));
}

// The configured directory `path` is inside, opened, and the rest of the
// path below it.
struct Located {
  UniqueFd dir;
  std::string relative;
};

absl::StatusOr<Located> Locate(const FileConfinement& confinement, const std::string& path) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "file_path '", path, "' must be an absolute path inside regions.file_dirs"));
  }
  // The kernel would see only the part before a NUL, not the path checked.
  if (path.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("file_path contains a NUL byte: pass a plain path");
  }
  for (const std::string& dir : confinement.dirs) {
    // The configured name, or the directory it resolves to (the
    // configuration is trusted; what a client names below it is not).
    absl::string_view relative = Below(path, dir);
    char resolved[PATH_MAX];
    if (relative.empty() && ::realpath(dir.c_str(), resolved) != nullptr) {
      relative = Below(path, resolved);
    }
    if (relative.empty()) continue;
    if (!Clean(relative)) return Denied(confinement, path, "has an empty, '.' or '..' component");
    UniqueFd dir_fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!dir_fd.valid()) {
      return ErrnoStatus(errno, absl::StrCat("regions.file_dirs: cannot open ", dir));
    }
    return Located{std::move(dir_fd), std::string(relative)};
  }
  return Denied(confinement, path, "is outside the data directories");
}

void RemoveIfStillOpen(const Located& at, int fd) {
  const size_t slash = at.relative.rfind('/');
  UniqueFd parent;
  if (slash != std::string::npos) {
    parent =
        UniqueFd(OpenBeneath(at.dir.get(), at.relative.substr(0, slash), O_PATH | O_DIRECTORY, 0));
    if (!parent.valid()) return;
  }
  const int parent_fd = parent.valid() ? parent.get() : at.dir.get();
  const std::string name = at.relative.substr(slash == std::string::npos ? 0 : slash + 1);
  struct stat ours, named;
  if (::fstat(fd, &ours) != 0 ||
      ::fstatat(parent_fd, name.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0 ||
      ours.st_dev != named.st_dev || ours.st_ino != named.st_ino) {
    return;
  }
  ::unlinkat(parent_fd, name.c_str(), 0);
}

}  // namespace

absl::StatusOr<UniqueFd> OpenConfined(const FileConfinement& confinement, const std::string& path,
                                      int flags, bool* created) {
  *created = false;
  ASSIGN_OR_RETURN(Located at, Locate(confinement, path));
  UniqueFd fd(OpenBeneath(at.dir.get(), at.relative, flags, confinement.create_mode));
  if (!fd.valid()) {
    switch (errno) {
      case ELOOP:
        return Denied(confinement, path, "goes through a symlink");
      case EXDEV:
        return Denied(confinement, path, "leads outside its directory");
      case EISDIR:
        return Denied(confinement, path, "is not a regular file");
      case ENOSYS:
        return absl::FailedPreconditionError(
            "file regions need openat2 (Linux 5.6 or later) to confine their paths");
      default:
        return ErrnoStatus(errno, absl::StrCat("cannot open ", path));
    }
  }
  *created = (flags & O_CREAT) != 0;
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, absl::StrCat("fstat ", path));
  if (!S_ISREG(st.st_mode)) return Denied(confinement, path, "is not a regular file");
  if (st.st_nlink != 1) {
    // A second name may live outside the directories (a hard link to a
    // file the daemon can write).
    return Denied(confinement, path, absl::StrCat("has ", st.st_nlink, " hard links"));
  }
  if (*created && ::fchmod(fd.get(), confinement.create_mode) != 0) {
    const int err = errno;
    RemoveIfStillOpen(at, fd.get());
    *created = false;
    return ErrnoStatus(err, absl::StrCat("cannot set the mode of ", path));
  }
  return fd;
}

void RemoveCreated(const FileConfinement& confinement, const std::string& path, int fd) {
  absl::StatusOr<Located> at = Locate(confinement, path);
  if (at.ok()) RemoveIfStillOpen(*at, fd);
}

}  // namespace xferd::memory
