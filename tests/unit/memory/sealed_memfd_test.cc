#include "daemon/memory/sealed_memfd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace xferd::memory {
namespace {

TEST(SealedMemfdTest, SizedAndSealedBeforeItIsReturned) {
  absl::StatusOr<UniqueFd> fd = CreateSealedMemfd("sealed-test", 3 * 4096, /*reserve=*/true);
  ASSERT_TRUE(fd.ok()) << fd.status();
  struct stat st;
  ASSERT_EQ(::fstat(fd->get(), &st), 0);
  EXPECT_EQ(st.st_size, 3 * 4096);
  EXPECT_GE(st.st_blocks * 512, 3 * 4096) << "reserve allocated no pages";
  EXPECT_EQ(::fcntl(fd->get(), F_GET_SEALS), F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  EXPECT_NE(::fcntl(fd->get(), F_GETFD) & FD_CLOEXEC, 0);
  // Whoever holds it: no shrinking, no growing (by ftruncate or fallocate),
  // no new seals; reads and writes through a shared mapping work.
  for (off_t size : {off_t{0}, off_t{4096}, off_t{1 << 20}}) {
    EXPECT_EQ(::ftruncate(fd->get(), size), -1) << size;
    EXPECT_EQ(errno, EPERM) << size;
  }
  EXPECT_EQ(::fallocate(fd->get(), 0, 0, 1 << 20), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(::fcntl(fd->get(), F_ADD_SEALS, F_SEAL_WRITE), -1);
  EXPECT_EQ(errno, EPERM);
  void* map = ::mmap(nullptr, 3 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd->get(), 0);
  ASSERT_NE(map, MAP_FAILED);
  std::memcpy(static_cast<char*>(map) + 3 * 4096 - 2, "ok", 2);
  ::munmap(map, 3 * 4096);
}

TEST(SealedMemfdTest, UnreservedHasNoPagesYet) {
  absl::StatusOr<UniqueFd> fd = CreateSealedMemfd("lazy-test", 1 << 20, /*reserve=*/false);
  ASSERT_TRUE(fd.ok()) << fd.status();
  struct stat st;
  ASSERT_EQ(::fstat(fd->get(), &st), 0);
  EXPECT_EQ(st.st_size, 1 << 20);
  EXPECT_EQ(st.st_blocks, 0);
}

TEST(SealedMemfdTest, ASizeBeyondTheFileLimitSaysWhichStepFailed) {
  absl::StatusOr<UniqueFd> fd = CreateSealedMemfd("huge-test", uint64_t{1} << 63, false);
  ASSERT_FALSE(fd.ok());
  EXPECT_NE(fd.status().message().find("cannot size huge-test"), std::string::npos) << fd.status();
}

}  // namespace
}  // namespace xferd::memory
