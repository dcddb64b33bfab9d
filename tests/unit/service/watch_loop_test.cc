#include "daemon/service/watch_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "absl/time/clock.h"
#include "tests/testing/wait_until.h"

namespace xferd::service {
namespace {

// Counts its runs; asks to run again at `again` after each (or only when
// notified); can be held inside Run to stand for a slow watch.
struct CountingTask : WatchTask {
  absl::Time Run(absl::Time now) override {
    runs.fetch_add(1);
    while (hold.load()) std::this_thread::yield();
    return again == absl::ZeroDuration() ? absl::InfiniteFuture() : now + again;
  }
  std::atomic<int> runs{0};
  std::atomic<bool> hold{false};
  absl::Duration again = absl::ZeroDuration();
};

using testing::WaitUntil;

// An idle daemon must not wake this thread: without tasks, or with tasks
// that wait to be notified, it sleeps.
TEST(WatchLoopTest, SleepsWhileNothingIsDue) {
  WatchLoop loop;
  // Windows in which nothing may happen: there is no event to wait for.
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(loop.passes(), 0u);
  CountingTask task;
  std::shared_ptr<WatchHandle> handle = loop.Add(&task);
  ASSERT_TRUE(WaitUntil([&] { return task.runs == 1; })) << "a new task runs once at once";
  const uint64_t passes = loop.passes();
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(task.runs, 1);
  EXPECT_EQ(loop.passes(), passes) << "the loop woke with nothing to do";
  handle->Detach();
}

TEST(WatchLoopTest, RunsATaskWhenNotifiedAndWhenDue) {
  WatchLoop loop;
  CountingTask notified, ticking;
  ticking.again = absl::Milliseconds(5);
  std::shared_ptr<WatchHandle> a = loop.Add(&notified);
  std::shared_ptr<WatchHandle> b = loop.Add(&ticking);
  ASSERT_TRUE(WaitUntil([&] { return notified.runs == 1; }));
  a->Notify();
  ASSERT_TRUE(WaitUntil([&] { return notified.runs == 2; }));
  ASSERT_TRUE(WaitUntil([&] { return ticking.runs >= 5; })) << "a due task was not run";
  a->Detach();
  b->Detach();
}

TEST(WatchLoopTest, ADetachedTaskNeverRunsAgainAndTheLoopLetsGoOfIt) {
  WatchLoop loop;
  auto task = std::make_unique<CountingTask>();
  task->again = absl::Milliseconds(1);
  std::shared_ptr<WatchHandle> handle = loop.Add(task.get());
  ASSERT_TRUE(WaitUntil([&] { return task->runs >= 1; }));
  handle->Detach();
  const int runs = task->runs;
  task.reset();  // a run after Detach would touch freed memory (ASan)
  handle->Notify();
  ASSERT_TRUE(WaitUntil([&] { return handle.use_count() == 1; })) << "the loop kept the handle";
  EXPECT_GE(runs, 1);
}

// A reply that waits for transfers is a one-shot task the loop owns: once it
// says it is done the loop deletes it and never runs it again.
TEST(WatchLoopTest, AnOwnedTaskIsDeletedOnceDone) {
  struct OneShot : WatchTask {
    OneShot(std::atomic<int>* runs, std::atomic<bool>* deleted) : runs(runs), deleted(deleted) {}
    ~OneShot() override { *deleted = true; }
    absl::Time Run(absl::Time) override { return ++*runs == 2 ? kDone : absl::InfiniteFuture(); }
    std::atomic<int>* const runs;
    std::atomic<bool>* const deleted;
  };
  std::atomic<int> runs{0};
  std::atomic<bool> deleted{false};
  WatchLoop loop;
  std::shared_ptr<WatchHandle> handle = loop.Add(std::make_unique<OneShot>(&runs, &deleted));
  ASSERT_TRUE(WaitUntil([&] { return runs == 1; }));
  EXPECT_FALSE(deleted);
  handle->Notify();
  ASSERT_TRUE(WaitUntil([&] { return deleted.load(); })) << "the loop kept a task that was done";
  handle->Notify();  // harmless now
  ASSERT_TRUE(WaitUntil([&] { return handle.use_count() == 1; }));
  EXPECT_EQ(runs, 2);
}

// Notify is what a poller calls: it must never wait for the watch thread,
// even while that thread is stuck in a slow task.
TEST(WatchLoopTest, NotifyNeverWaitsForABusyWatchThread) {
  WatchLoop loop;
  CountingTask slow, other;
  std::shared_ptr<WatchHandle> s = loop.Add(&slow);
  std::shared_ptr<WatchHandle> o = loop.Add(&other);
  ASSERT_TRUE(WaitUntil([&] { return slow.runs == 1 && other.runs == 1; }));
  slow.hold = true;
  s->Notify();
  ASSERT_TRUE(WaitUntil([&] { return slow.runs == 2; }));  // now stuck inside Run
  std::thread poller([&] {
    for (int i = 0; i < 100000; ++i) {
      o->Notify();
      s->Notify();
    }
  });
  poller.join();  // would hang here if Notify waited for the stuck task
  EXPECT_EQ(other.runs, 1) << "the watch thread is stuck: nothing else ran";
  slow.hold = false;
  ASSERT_TRUE(WaitUntil([&] { return other.runs == 2; }))
      << "notifications during the stall were lost";
  s->Detach();
  o->Detach();
}

// Notifying a handle after its loop is gone (a transfer that ends after the
// service stopped) is harmless: the loop let go of the handle, and the task
// never runs again (nor from within Notify).
TEST(WatchLoopTest, HandlesOutliveTheirLoop) {
  CountingTask task;
  std::shared_ptr<WatchHandle> handle;
  {
    WatchLoop loop;
    handle = loop.Add(&task);
    ASSERT_TRUE(WaitUntil([&] { return task.runs == 1; })) << "a new task runs once at once";
  }
  EXPECT_EQ(handle.use_count(), 1) << "the loop is gone but still holds the handle";
  handle->Notify();
  EXPECT_EQ(task.runs, 1) << "a notified task ran without its loop";
  handle->Detach();
  handle->Notify();
  EXPECT_EQ(task.runs, 1);
}

}  // namespace
}  // namespace xferd::service
