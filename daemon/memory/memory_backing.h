// Where a region's bytes live: anonymous memory (optionally hugepages), a
// sealed memfd local clients map (its descriptor handed over the local
// socket), or a mapped file. A backing owns its mapping and descriptor, and
// unmaps and closes them on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/common/unique_fd.h"
#include "daemon/memory/confined_file.h"

namespace xferd::memory {

enum class Backing { kAnonymous, kShm, kFile };

struct BackingSpec {
  Backing kind = Backing::kAnonymous;
  uint64_t size = 0;
  // kAnonymous: map on hugepages.
  bool hugepages = false;
  // kAnonymous, kShm: bind the pages to this NUMA node before they are
  // populated; -1: no binding.
  int32_t numa_node = -1;
  // kShm: the memfd's name, for /proc/<pid>/fd and the logs.
  std::string shm_name;
  // kFile: the file, whether to create/grow it, and whether it must be
  // writable (a destination). A source is opened read-write if the file
  // allows it, else read-only (see read_only()).
  std::string file_path;
  bool create = false;
  bool writable = true;
  // kFile: where file_path may be, and the mode of a created file.
  FileConfinement file_confinement;
};

class MemoryBacking {
 public:
  // Maps the memory. Errors: INVALID_ARGUMENT (size/path), NOT_FOUND (file),
  // PERMISSION_DENIED, RESOURCE_EXHAUSTED (no memory, hugepages or disk space).
  static absl::StatusOr<std::unique_ptr<MemoryBacking>> Create(const BackingSpec& spec);
  ~MemoryBacking();

  MemoryBacking(const MemoryBacking&) = delete;
  MemoryBacking& operator=(const MemoryBacking&) = delete;

  std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }
  Backing kind() const { return spec_.kind; }
  // True for a file mapped read-only because it is not writable by the daemon.
  bool read_only() const { return read_only_; }
  const BackingSpec& spec() const { return spec_; }

  // Why an access to the memory faulted, for a message: a file shorter
  // than the region ("its file was truncated by another process (now N of
  // M bytes)"), else pages the kernel could not read. Calls fstat.
  std::string DescribeLoss() const;
  // kFile: whether the file is now shorter than the region. Calls fstat.
  bool FileShrunk() const;

  // kShm: the sealed memfd (sealed_memfd.h) that the local socket hands to
  // clients (they dup it, the backing keeps it); -1 for other backings.
  int shm_fd() const { return spec_.kind == Backing::kShm ? fd_.get() : -1; }

 private:
  // kFile: the file's bytes when fewer than the region's; calls fstat.
  std::optional<uint64_t> ShrunkFileBytes() const;

  MemoryBacking(BackingSpec spec, UniqueFd fd, std::byte* data, uint64_t mapped_size,
                bool read_only);

  BackingSpec spec_;
  UniqueFd fd_;
  std::byte* data_;
  uint64_t size_;
  uint64_t mapped_size_;  // size rounded up to the hugepage size
  bool read_only_;
};

}  // namespace xferd::memory
