#include "daemon/memory/guarded_copy.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace xferd::memory {
namespace {

TEST(GuardedCopyTest, CopiesBetweenPieceLists) {
  char a[] = "hello ";
  char b[] = "world";
  char out1[4] = {};
  char out2[16] = {};
  const iovec from[] = {{a, 6}, {b, 5}};
  const iovec to[] = {{out1, 4}, {out2, 7}};
  ASSERT_EQ(GuardedCopy(to, 2, from, 2), 11);
  EXPECT_EQ(std::string(out1, 4) + std::string(out2, 7), "hello world");
}

// A shared mapping of a file that another descriptor truncates: what a file
// region is after another process cut its file. A load there is SIGBUS; a
// guarded copy stops short, or fails with EFAULT, and the test lives.
class TruncatedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    page_ = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    FILE* f = std::tmpfile();
    ASSERT_NE(f, nullptr);
    fd_ = ::dup(::fileno(f));
    std::fclose(f);
    ASSERT_EQ(::ftruncate(fd_, static_cast<off_t>(4 * page_)), 0);
    map_ = static_cast<char*>(
        ::mmap(nullptr, 4 * page_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0));
    ASSERT_NE(map_, MAP_FAILED);
    std::memset(map_, 'x', 4 * page_);
    ASSERT_EQ(::ftruncate(fd_, static_cast<off_t>(page_)), 0);  // pages 1..3 go
  }
  void TearDown() override {
    ::munmap(map_, 4 * page_);
    ::close(fd_);
  }
  size_t page_ = 0;
  int fd_ = -1;
  char* map_ = nullptr;
};

TEST_F(TruncatedFileTest, ReadingStopsWhereThePagesAreGone) {
  std::vector<char> out(2 * page_, 0);
  const iovec from{map_, 2 * page_};
  const iovec to{out.data(), out.size()};
  EXPECT_EQ(GuardedCopy(&to, 1, &from, 1), static_cast<ssize_t>(page_));
  EXPECT_EQ(out[page_ - 1], 'x');
  const iovec gone{map_ + page_, page_};
  errno = 0;
  EXPECT_EQ(GuardedCopy(&to, 1, &gone, 1), -1);
  EXPECT_EQ(errno, EFAULT);
}

TEST_F(TruncatedFileTest, WritingStopsWhereThePagesAreGone) {
  std::vector<char> in(2 * page_, 'y');
  const iovec from{in.data(), in.size()};
  const iovec to{map_, 2 * page_};
  const ssize_t copied = GuardedCopy(&to, 1, &from, 1);
  EXPECT_GE(copied, 0);
  EXPECT_LE(copied, static_cast<ssize_t>(page_));
  const iovec gone{map_ + 2 * page_, page_};
  errno = 0;
  EXPECT_EQ(GuardedCopy(&gone, 1, &from, 1), -1);
  EXPECT_EQ(errno, EFAULT);
}

}  // namespace
}  // namespace xferd::memory
