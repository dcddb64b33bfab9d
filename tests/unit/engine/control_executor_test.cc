#include "daemon/engine/control_executor.h"

#include <gtest/gtest.h>

#include <atomic>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace xferd::engine {
namespace {

TEST(ControlExecutorTest, RunsJobsConcurrently) {
  ControlExecutor executor(2);
  absl::Notification first_started, release;
  std::atomic<int> done{0};
  executor.Run([&] {
    first_started.Notify();
    release.WaitForNotification();
    ++done;
  });
  first_started.WaitForNotification();
  absl::Notification second;
  executor.Run([&] { second.Notify(); });  // not stuck behind the first
  EXPECT_TRUE(second.WaitForNotificationWithTimeout(absl::Seconds(5)));
  release.Notify();
  executor.Stop();
  EXPECT_EQ(done.load(), 1);
}

TEST(ControlExecutorTest, StopDrainsQueueAndLaterJobsRunInline) {
  std::atomic<int> ran{0};
  ControlExecutor executor(1);
  for (int i = 0; i < 50; ++i) executor.Run([&] { ++ran; });
  executor.Stop();
  EXPECT_EQ(ran.load(), 50);
  executor.Run([&] { ++ran; });
  EXPECT_EQ(ran.load(), 51);
}

}  // namespace
}  // namespace xferd::engine
