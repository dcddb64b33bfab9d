#include "daemon/memory/memory_backing.h"

#include <fcntl.h>
#include <linux/mempolicy.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/base/units.h"
#include "daemon/memory/confined_file.h"
#include "daemon/memory/errno_status.h"
#include "daemon/memory/sealed_memfd.h"

namespace xferd::memory {
namespace {

constexpr uint64_t kHugePageSize = 2 << 20;

// What OpenFile did to the file, so that a registration failing after it
// leaves the file as it found it (a full disk must not leave a sparse file).
struct FileChange {
  bool created = false;
  bool grown = false;
  uint64_t old_size = 0;
};

void UndoFileChange(int fd, const BackingSpec& spec, const FileChange& change) {
  if (change.created) {
    RemoveCreated(spec.file_confinement, spec.file_path, fd);
  } else if (change.grown) {
    // Best effort: the registration's own error is the one to report.
    if (::ftruncate(fd, static_cast<off_t>(change.old_size)) != 0) return;
  }
}

absl::StatusOr<uint64_t> SizeFile(const BackingSpec& spec, int fd, FileChange* change) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, "fstat " + spec.file_path);
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(spec.file_path, " is not a regular file"));
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  const uint64_t size = spec.size == 0 ? file_size : spec.size;
  if (size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec.file_path, " is empty: give a size (with create) to grow it"));
  }
  if (size > file_size) {
    if (!spec.create) {
      return absl::InvalidArgumentError(
          absl::StrCat(spec.file_path, " has ", file_size, " bytes but the region needs ", size,
                       "; set create to grow the file, or size 0 to use the file's size"));
    }
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
      return ErrnoStatus(errno, "cannot grow " + spec.file_path);
    }
    change->grown = true;
    change->old_size = file_size;
  }
  if (spec.writable) RETURN_IF_ERROR(ReserveBlocks(fd, size, spec.file_path));
  return size;
}

// Opens (and with create, makes or grows) the file; returns the region size.
// A file only read from is still opened read-write when it allows it:
// RDMA cannot register a read-only file mapping (the kernel refuses to pin
// its pages), so read-only is the fall-back, reported in `read_only`.
absl::StatusOr<uint64_t> OpenFile(const BackingSpec& spec, UniqueFd& fd, bool* read_only,
                                  FileChange* change) {
  auto open = [&](int flags, bool* created) -> absl::Status {
    ASSIGN_OR_RETURN(fd, OpenConfined(spec.file_confinement, spec.file_path, flags, created));
    return absl::OkStatus();
  };
  bool created = false;
  absl::Status opened = absl::NotFoundError("");
  if (spec.create) {
    opened = open(O_RDWR | O_CREAT | O_EXCL, &created);
    change->created = created;
  }
  if (!opened.ok() && (!spec.create || absl::IsAlreadyExists(opened))) {
    opened = open(O_RDWR, &created);
  }
  *read_only = false;
  // Denied read-write (file permissions, a read-only mount): a source can
  // still be read. A confinement refusal is refused again, as it should be.
  if (!opened.ok() && !spec.writable && absl::IsPermissionDenied(opened)) {
    opened = open(O_RDONLY, &created);
    *read_only = opened.ok();
  }
  if (absl::IsNotFound(opened)) {
    return absl::NotFoundError(absl::StrCat(
        opened.message(),
        spec.create ? " (its directory does not exist)" : " (set create to make it)"));
  }
  RETURN_IF_ERROR(opened);
  absl::StatusOr<uint64_t> size = SizeFile(spec, fd.get(), change);
  if (!size.ok()) UndoFileChange(fd.get(), spec, *change);
  return size;
}

// Every page of [addr, addr + size) from NUMA node `node` only (MPOL_BIND).
// INVALID_ARGUMENT for a node this host does not have.
absl::Status BindToNode(void* addr, uint64_t size, int32_t node) {
  constexpr int kMaxNodes = 1024;
  if (node >= kMaxNodes || ::access(absl::StrCat("/sys/devices/system/node/node", node).c_str(),
                                    F_OK) != 0) {
    std::ifstream online("/sys/devices/system/node/online");
    std::string nodes;
    std::getline(online, nodes);
    return absl::InvalidArgumentError(absl::StrCat("numa_node ", node,
                                                   " does not exist: this host has nodes ",
                                                   nodes.empty() ? "0" : nodes));
  }
  unsigned long mask[kMaxNodes / (8 * sizeof(unsigned long))] = {};
  mask[node / (8 * sizeof(unsigned long))] = 1ul << (node % (8 * sizeof(unsigned long)));
  if (::syscall(SYS_mbind, addr, size, MPOL_BIND, mask, kMaxNodes, MPOL_MF_STRICT) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot bind the region to NUMA node ", node));
  }
  return absl::OkStatus();
}

// What MAP_POPULATE does, after the mapping got its advice: every page
// present and writable, so no fault lands on the receive path.
void PopulateWritable(std::byte* addr, uint64_t size) {
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels refuse it (EINVAL)
#endif
  if (::madvise(addr, size, MADV_POPULATE_WRITE) == 0) return;
  const long page = ::sysconf(_SC_PAGESIZE);
  for (uint64_t offset = 0; offset < size; offset += static_cast<uint64_t>(page)) {
    // A fresh anonymous page reads as zero: writing zero keeps it so.
    reinterpret_cast<volatile std::byte*>(addr)[offset] = std::byte{0};
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<MemoryBacking>> MemoryBacking::Create(const BackingSpec& spec) {
  BackingSpec resolved = spec;
  UniqueFd fd;
  FileChange file_change;
  bool read_only = false;
  int prot = PROT_READ | PROT_WRITE;
  int flags = MAP_SHARED;
  switch (spec.kind) {
    case Backing::kAnonymous:
      flags = MAP_PRIVATE | MAP_ANONYMOUS | (spec.hugepages ? MAP_HUGETLB : 0);
      break;
    case Backing::kShm: {
      ASSIGN_OR_RETURN(fd, CreateSealedMemfd(spec.shm_name, spec.size, /*reserve=*/true));
      break;
    }
    case Backing::kFile: {
      ASSIGN_OR_RETURN(resolved.size, OpenFile(spec, fd, &read_only, &file_change));
      if (read_only) prot = PROT_READ;
      break;
    }
  }
  if (resolved.size == 0) return absl::InvalidArgumentError("region size must be > 0");
  const uint64_t mapped_size =
      spec.hugepages ? (resolved.size + kHugePageSize - 1) / kHugePageSize * kHugePageSize
                     : resolved.size;
  // Registered memory is meant to be resident (RDMA pins it anyway), and
  // pre-faulting keeps page faults out of the receive path.
  // Anonymous memory on transparent huge pages where the kernel allows them
  // (THP "madvise" mode needs the advice before the first touch): the
  // kernel's copies into and out of a large region then walk one TLB entry
  // per 2 MiB instead of per 4 KiB. A NUMA binding, too, must come before
  // the pages exist.
  const bool thp = spec.kind == Backing::kAnonymous && !spec.hugepages;
  const bool bind = spec.numa_node >= 0;
  const bool populate_later = thp || bind;
  void* addr =
      ::mmap(nullptr, mapped_size, prot, flags | (populate_later ? 0 : MAP_POPULATE), fd.get(), 0);
  absl::Status bound;
  if (addr != MAP_FAILED && populate_later) {
    if (thp) ::madvise(addr, mapped_size, MADV_HUGEPAGE);
    if (bind) bound = BindToNode(addr, mapped_size, spec.numa_node);
    if (bound.ok()) PopulateWritable(static_cast<std::byte*>(addr), mapped_size);
  }
  if (!bound.ok()) {
    ::munmap(addr, mapped_size);
    return bound;
  }
  if (addr == MAP_FAILED) {
    const int err = errno;
    if (spec.kind == Backing::kFile) UndoFileChange(fd.get(), spec, file_change);
    if (spec.hugepages) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot map ", FormatBytes(mapped_size), " on hugepages (", std::strerror(err),
          "): reserve more with sysctl vm.nr_hugepages or register without hugepages"));
    }
    return ErrnoStatus(err, absl::StrCat("cannot map ", FormatBytes(mapped_size)));
  }
  return std::unique_ptr<MemoryBacking>(new MemoryBacking(
      std::move(resolved), std::move(fd), static_cast<std::byte*>(addr), mapped_size, read_only));
}

MemoryBacking::MemoryBacking(BackingSpec spec, UniqueFd fd, std::byte* data, uint64_t mapped_size,
                             bool read_only)
    : spec_(std::move(spec)),
      fd_(std::move(fd)),
      data_(data),
      size_(spec_.size),
      mapped_size_(mapped_size),
      read_only_(read_only) {}

std::optional<uint64_t> MemoryBacking::ShrunkFileBytes() const {
  struct stat st;
  if (spec_.kind != Backing::kFile || ::fstat(fd_.get(), &st) != 0 ||
      static_cast<uint64_t>(st.st_size) >= size_) {
    return std::nullopt;
  }
  return static_cast<uint64_t>(st.st_size);
}

bool MemoryBacking::FileShrunk() const { return ShrunkFileBytes().has_value(); }

std::string MemoryBacking::DescribeLoss() const {
  if (const std::optional<uint64_t> bytes = ShrunkFileBytes()) {
    return absl::StrCat("its file was truncated by another process (it has ", *bytes,
                        " of the region's ", size_, " bytes)");
  }
  return absl::StrCat("a page of its ", spec_.kind == Backing::kFile ? "file" : "memory",
                      " could not be read or written (I/O error?)");
}

// Clients that mapped an SHM region keep their mappings (and the memfd's
// pages) after the daemon lets go of it.
MemoryBacking::~MemoryBacking() { ::munmap(data_, mapped_size_); }

}  // namespace xferd::memory
