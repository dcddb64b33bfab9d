#include "daemon/engine/deadline_timer.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "daemon/engine/peer.h"
#include "tests/testing/fake_transport.h"
#include "tests/testing/wait_until.h"

namespace xferd::engine {
namespace {

using xferd::testing::NullLink;

// The transfers that ended, in the order they ended.
struct EndRecorder : TransferListener {
  void OnTransferEnding(const Transfer&, TransferState, absl::StatusCode) override {}
  void OnTransferEnded(Transfer& t) override {
    MutexLock lock(&mu);
    ended.push_back(t.id());
  }
  std::vector<uint64_t> Ended() {
    MutexLock lock(&mu);
    return ended;
  }
  Mutex mu;
  std::vector<uint64_t> ended ABSL_GUARDED_BY(mu);
};

std::shared_ptr<Transfer> WithTimeout(absl::Duration timeout, uint64_t id,
                                      TransferListener* listener) {
  static auto region = std::make_shared<memory::Region>(
      1, memory::RegionSpec{"r", 4096},
      *memory::MemoryBacking::Create({memory::Backing::kAnonymous, 4096}));
  Transfer::Plan plan;
  plan.id = id;
  plan.submitted_at = absl::Now();
  plan.spec.length = 4096;
  plan.spec.timeout = timeout;
  plan.local = region;
  plan.blocks = {transport::Block{0, 0, 4096}};
  auto link = std::make_shared<NullLink>();
  plan.peer = std::make_shared<Peer>(NodeIdentity{"peer", 1, "x"}, true, link,
                                     transport::TransportKind::kTcp, "", 1, 2);
  plan.link = link;
  plan.slice_size = 4096;
  return std::make_shared<Transfer>(plan, listener);
}

void WaitTerminal(const std::shared_ptr<Transfer>& t) {
  testing::WaitUntil([&] { return IsTerminal(t->state()); });
}

// Failed by the timer: DEADLINE_EXCEEDED, saying which timeout, and not
// before the deadline.
void ExpectExpired(const std::shared_ptr<Transfer>& t, const std::string& timeout) {
  const TransferInfo info = t->Info();
  EXPECT_EQ(info.state, TransferState::kFailed);
  EXPECT_EQ(info.error.code(), absl::StatusCode::kDeadlineExceeded) << info.error;
  EXPECT_NE(info.error.message().find("within its timeout of " + timeout), absl::string_view::npos)
      << info.error;
  EXPECT_GE(info.finished_at, t->deadline());
}

TEST(DeadlineTimerTest, ExpiresInDeadlineOrder) {
  EndRecorder ended;
  DeadlineTimer timer;
  auto late = WithTimeout(absl::Milliseconds(500), 2, &ended);
  auto early = WithTimeout(absl::Milliseconds(20), 1, &ended);
  timer.Add(late);
  timer.Add(early);  // earlier than what the timer sleeps towards: it wakes for it
  WaitTerminal(early);
  ExpectExpired(early, "20ms");
  EXPECT_LT(early->Info().finished_at, late->deadline());
  EXPECT_FALSE(IsTerminal(late->state()));
  WaitTerminal(late);
  ExpectExpired(late, "500ms");
  EXPECT_EQ(ended.Ended(), (std::vector<uint64_t>{1, 2}));
}

TEST(DeadlineTimerTest, FinishedTransfersKeepTheirOutcomeAndHoldNothingUp) {
  EndRecorder ended;
  DeadlineTimer timer;
  auto done = WithTimeout(absl::Milliseconds(10), 1, &ended);
  auto stalled = WithTimeout(absl::Milliseconds(40), 2, &ended);
  timer.Add(done);
  timer.Add(stalled);
  ASSERT_TRUE(done->Finish(TransferState::kDone, absl::OkStatus()));
  WaitTerminal(stalled);
  ExpectExpired(stalled, "40ms");
  const TransferInfo info = done->Info();
  EXPECT_EQ(info.state, TransferState::kDone);
  EXPECT_TRUE(info.error.ok()) << info.error;
  EXPECT_LT(info.finished_at, done->deadline());
  EXPECT_EQ(ended.Ended(), (std::vector<uint64_t>{1, 2}));  // each ended once
}

TEST(DeadlineTimerTest, ForgetsTransfersThatAreGone) {
  EndRecorder ended;
  DeadlineTimer timer;
  std::weak_ptr<Transfer> gone;
  {
    auto t = WithTimeout(absl::Hours(1), 1, &ended);
    gone = t;
    timer.Add(t);
    timer.Add(WithTimeout(absl::Milliseconds(5), 2, &ended));
  }
  EXPECT_TRUE(gone.expired()) << "the timer keeps a transfer alive";
  // Dropped entries neither fire nor stop the timer from expiring others.
  auto live = WithTimeout(absl::Milliseconds(30), 3, &ended);
  timer.Add(live);
  WaitTerminal(live);
  ExpectExpired(live, "30ms");
  EXPECT_EQ(ended.Ended(), (std::vector<uint64_t>{3}));
  // Stop does not wait for the hour-long deadline still queued.
  const absl::Time start = absl::Now();
  timer.Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

// Delayed jobs run on the timer's thread in time order, not before their
// time, and never once the timer stopped.
TEST(DeadlineTimerTest, RunsJobsInTimeOrderAndNoneAfterStop) {
  DeadlineTimer timer;
  Mutex mu;
  std::vector<int> ran;
  const absl::Time start = absl::Now();
  absl::Time first_at;
  timer.RunAt(start + absl::Milliseconds(40), [&] {
    MutexLock lock(&mu);
    ran.push_back(2);
  });
  timer.RunAt(start + absl::Milliseconds(20), [&] {
    MutexLock lock(&mu);
    first_at = absl::Now();
    ran.push_back(1);
  });
  timer.RunAt(start + absl::Hours(1), [&] {
    MutexLock lock(&mu);
    ran.push_back(3);
  });
  testing::WaitUntil([&] {
    MutexLock lock(&mu);
    return ran.size() == 2;
  });
  timer.Stop();
  MutexLock lock(&mu);
  EXPECT_EQ(ran, (std::vector<int>{1, 2}));
  EXPECT_GE(first_at, start + absl::Milliseconds(20));
}

}  // namespace
}  // namespace xferd::engine
