#include "daemon/memory/memory_backing.h"

#include <fcntl.h>
#include <linux/mempolicy.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace xferd::memory {
namespace {

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// A file region's spec, confined to the test's directory (regions.file_dirs).
BackingSpec FileSpec(uint64_t size) {
  BackingSpec spec{Backing::kFile, size};
  spec.file_confinement.dirs = {TempDir()};
  return spec;
}

TEST(MemoryBackingTest, AnonymousIsZeroedAndWritable) {
  auto backing = MemoryBacking::Create(BackingSpec{Backing::kAnonymous, 1 << 20});
  ASSERT_TRUE(backing.ok()) << backing.status();
  EXPECT_EQ((*backing)->size(), 1u << 20);
  EXPECT_EQ((*backing)->data()[12345], std::byte{0});
  std::memset((*backing)->data(), 0xab, 1 << 20);
  EXPECT_EQ((*backing)->data()[(1 << 20) - 1], std::byte{0xab});
}

// The kB of the mapping at `addr` that /proc/self/smaps says are `field`.
long SmapsKb(const void* addr, const std::string& field) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2) {
      const auto a = reinterpret_cast<uintptr_t>(addr);
      inside = begin <= a && a < end;
    } else if (inside && line.rfind(field + ":", 0) == 0) {
      return std::strtol(line.c_str() + field.size() + 1, nullptr, 10);
    }
  }
  return -1;
}

TEST(MemoryBackingTest, AnonymousIsResidentAndOnHugePagesWhereTheKernelAllows) {
  constexpr uint64_t kSize = 64 << 20;
  auto backing = MemoryBacking::Create(BackingSpec{Backing::kAnonymous, kSize});
  ASSERT_TRUE(backing.ok()) << backing.status();
  // Populated at registration, as MAP_POPULATE would: resident before use.
  EXPECT_GE(SmapsKb((*backing)->data(), "Rss"), static_cast<long>(kSize >> 10));
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(thp, mode);
  if (mode.find("[never]") != std::string::npos || mode.empty()) {
    GTEST_SKIP() << "transparent huge pages are off on this kernel: " << mode;
  }
  // "madvise" or "always": at least half of it on 2 MiB pages (the ends of an
  // unaligned mapping may not be).
  EXPECT_GE(SmapsKb((*backing)->data(), "AnonHugePages"), static_cast<long>(kSize >> 11));
}

TEST(MemoryBackingTest, BoundToANumaNodeBeforeItsPagesExist) {
  for (const Backing kind : {Backing::kAnonymous, Backing::kShm}) {
    BackingSpec spec{kind, 8 << 20};
    spec.numa_node = 0;  // every Linux host has node 0
    spec.shm_name = "numa-shm";
    auto backing = MemoryBacking::Create(spec);
    ASSERT_TRUE(backing.ok()) << backing.status();
    std::byte* data = (*backing)->data();
    int mode = -1;
    unsigned long nodes[16] = {};
    ASSERT_EQ(::syscall(SYS_get_mempolicy, &mode, nodes, 1024, data, MPOL_F_ADDR), 0)
        << std::strerror(errno);
    EXPECT_EQ(mode, MPOL_BIND);
    EXPECT_EQ(nodes[0], 1ul);  // node 0 only
    for (uint64_t offset : {uint64_t{0}, uint64_t{4 << 20}, uint64_t{(8 << 20) - 1}}) {
      int node = -1;
      ASSERT_EQ(::syscall(SYS_get_mempolicy, &node, nullptr, 0, data + offset,
                          MPOL_F_NODE | MPOL_F_ADDR),
                0);
      EXPECT_EQ(node, 0) << "page at " << offset;
    }
    EXPECT_GE(SmapsKb(data, "Rss"), 8 << 10);  // populated after binding
  }
  BackingSpec missing{Backing::kAnonymous, 1 << 20};
  missing.numa_node = 999;
  auto refused = MemoryBacking::Create(missing);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("numa_node 999 does not exist: this host has nodes"),
            std::string::npos)
      << refused.status();
}

TEST(MemoryBackingTest, ShmIsASealedMemfdSharedWithAnotherMapping) {
  BackingSpec spec{Backing::kShm, 8192};
  spec.shm_name = "shm-backing-test";
  auto backing = MemoryBacking::Create(spec);
  ASSERT_TRUE(backing.ok()) << backing.status();
  const int fd = (*backing)->shm_fd();
  ASSERT_GE(fd, 0);
  struct stat st;
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, 8192);
  EXPECT_EQ(::fcntl(fd, F_GET_SEALS), F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  // A client gets its own descriptor (the local socket's SCM_RIGHTS is a
  // dup), maps it and fills it; the daemon's mapping sees it.
  const int client_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  void* client = ::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, client_fd, 0);
  ASSERT_NE(client, MAP_FAILED);
  std::memcpy(client, "hello", 5);
  EXPECT_EQ(std::memcmp((*backing)->data(), "hello", 5), 0);
  // Nothing the client does changes its size, or the seals.
  EXPECT_EQ(::ftruncate(client_fd, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(::ftruncate(client_fd, 1 << 20), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::fallocate(client_fd, 0, 0, 1 << 20), 0);
  EXPECT_EQ(::fcntl(client_fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
  EXPECT_EQ((*backing)->data()[8191], std::byte{0});  // still mapped, still there
  // The daemon lets go: the client's mapping and data stay.
  backing->reset();
  EXPECT_EQ(std::memcmp(client, "hello", 5), 0);
  ::munmap(client, 8192);
  ::close(client_fd);
}

TEST(MemoryBackingTest, OnlyShmHasADescriptorToHandOut) {
  auto anonymous = MemoryBacking::Create(BackingSpec{Backing::kAnonymous, 4096});
  ASSERT_TRUE(anonymous.ok()) << anonymous.status();
  EXPECT_EQ((*anonymous)->shm_fd(), -1);
}

TEST(MemoryBackingTest, FileCreateGrowAndUseExistingSize) {
  const std::string path = TempDir() + "/file-backing-test";
  ::unlink(path.c_str());
  BackingSpec spec = FileSpec(4096);
  spec.file_path = path;
  EXPECT_EQ(MemoryBacking::Create(spec).status().code(), absl::StatusCode::kNotFound);
  spec.create = true;
  {
    auto backing = MemoryBacking::Create(spec);
    ASSERT_TRUE(backing.ok()) << backing.status();
    std::memcpy((*backing)->data() + 4090, "tail!", 5);
  }
  BackingSpec existing = FileSpec(0);
  existing.file_path = path;
  existing.writable = false;
  auto reopened = MemoryBacking::Create(existing);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->size(), 4096u);
  EXPECT_EQ(std::memcmp((*reopened)->data() + 4090, "tail!", 5), 0);
  // Larger than the file without create: refused with the fix in the message.
  BackingSpec bigger = FileSpec(8192);
  bigger.file_path = path;
  absl::Status s = MemoryBacking::Create(bigger).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("create"), absl::string_view::npos);
}

// A file size limit makes growing fail as a full disk would (EFBIG instead
// of ENOSPC): the file must be left as it was found.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of a signal
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit saved_;
  void (*old_handler_)(int);
};

TEST(MemoryBackingTest, FailedRegistrationLeavesTheFileAsItWas) {
  const std::string path = TempDir() + "/file-undo-test";
  ::unlink(path.c_str());
  BackingSpec spec = FileSpec(1 << 20);
  spec.file_path = path;
  spec.create = true;
  {
    FileSizeLimit limit(64 << 10);
    absl::Status s = MemoryBacking::Create(spec).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  }
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << "a file it created is removed";

  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_EQ(::ftruncate(fd, 4096), 0);
  ::close(fd);
  {
    FileSizeLimit limit(64 << 10);
    EXPECT_FALSE(MemoryBacking::Create(spec).ok());
  }
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0) << "an existing file is kept";
  EXPECT_EQ(st.st_size, 4096) << "and shrunk back to its size";
  ::unlink(path.c_str());
}

TEST(MemoryBackingTest, CreateInAMissingDirectorySaysSo) {
  BackingSpec spec = FileSpec(4096);
  spec.file_path = TempDir() + "/no-such-dir/file";
  spec.create = true;
  absl::Status s = MemoryBacking::Create(spec).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("directory"), absl::string_view::npos) << s;
}

TEST(MemoryBackingTest, FileErrors) {
  BackingSpec relative = FileSpec(0);
  relative.file_path = "relative/path";
  EXPECT_EQ(MemoryBacking::Create(relative).status().code(), absl::StatusCode::kInvalidArgument);
  BackingSpec dir = FileSpec(0);
  dir.file_path = TempDir();
  EXPECT_FALSE(MemoryBacking::Create(dir).ok());
}

TEST(MemoryBackingTest, HugepagesWithoutReservationIsResourceExhausted) {
  BackingSpec spec{Backing::kAnonymous, 2 << 20};
  spec.hugepages = true;
  auto backing = MemoryBacking::Create(spec);
  if (backing.ok()) GTEST_SKIP() << "this machine has hugepages reserved";
  EXPECT_EQ(backing.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(backing.status().message().find("nr_hugepages"), absl::string_view::npos);
}

}  // namespace
}  // namespace xferd::memory
