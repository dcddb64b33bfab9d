#include "daemon/common/process_stats.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

namespace xferd {
namespace {

TEST(ProcessStatsTest, SeesOpenDescriptorsAndMemory) {
  const ProcessStats before = ReadProcessStats();
  EXPECT_GT(before.resident_bytes, 0u);
  EXPECT_GE(before.peak_resident_bytes, before.resident_bytes);
  EXPECT_GE(before.threads, 1u);
  const int fd = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(ReadProcessStats().open_fds, before.open_fds + 1);
  ::close(fd);
  EXPECT_EQ(ReadProcessStats().open_fds, before.open_fds);
}

}  // namespace
}  // namespace xferd
