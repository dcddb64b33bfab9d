#include "daemon/service/transfer_watch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "absl/time/clock.h"

namespace xferd::service {
namespace {

// The ticker drops the handles of watches that ended. It must not destroy a
// handle (and so its mutex) while it still holds that mutex.
TEST(WatchTickerTest, DropsAnEndedWatchOnlyAfterUnlockingIt) {
  std::atomic<bool> destroyed{false};
  std::atomic<bool> destroyed_while_locked{false};
  WatchTicker ticker;
  // reactor stays null: the watch has ended. The deleter runs on whichever
  // thread drops the last reference, here the ticker's.
  ticker.Add(std::shared_ptr<TransferWatchHandle>(
      new TransferWatchHandle, [&](TransferWatchHandle* handle) {
        if (handle->mu.TryLock()) {
          handle->mu.Unlock();
        } else {
          destroyed_while_locked = true;
        }
        delete handle;
        destroyed = true;
      }));
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!destroyed && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_TRUE(destroyed) << "the ticker kept an ended watch";
  EXPECT_FALSE(destroyed_while_locked) << "the handle was destroyed with its mutex held";
}

}  // namespace
}  // namespace xferd::service
