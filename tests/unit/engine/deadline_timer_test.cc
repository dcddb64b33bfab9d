#include "daemon/engine/deadline_timer.h"

#include <gtest/gtest.h>

#include "daemon/engine/peer.h"
#include "tests/unit/engine/fake_transport.h"

namespace xferd::engine {
namespace {

using xferd::testing::NullLink;

std::shared_ptr<Transfer> WithTimeout(absl::Duration timeout) {
  static auto region = std::make_shared<memory::Region>(
      1, memory::RegionSpec{"r", 4096},
      *memory::MemoryBacking::Create({memory::Backing::kAnonymous, 4096}));
  Transfer::Plan plan;
  plan.submitted_at = absl::Now();
  plan.spec.length = 4096;
  plan.spec.timeout = timeout;
  plan.local = region;
  plan.blocks = {transport::Block{0, 0, 4096}};
  auto link = std::make_shared<NullLink>();
  plan.peer = std::make_shared<Peer>(NodeIdentity{"peer", 1, "x"}, true, link,
                                     transport::TransportKind::kTcp, "");
  plan.link = link;
  plan.slice_size = 4096;
  return std::make_shared<Transfer>(plan, nullptr);
}

void WaitTerminal(const std::shared_ptr<Transfer>& t) {
  for (int i = 0; i < 2000 && !IsTerminal(t->state()); ++i) absl::SleepFor(absl::Milliseconds(1));
}

TEST(DeadlineTimerTest, ExpiresInDeadlineOrder) {
  DeadlineTimer timer;
  auto late = WithTimeout(absl::Milliseconds(200));
  auto early = WithTimeout(absl::Milliseconds(20));
  timer.Add(late);
  timer.Add(early);  // earlier than what the timer sleeps towards
  WaitTerminal(early);
  EXPECT_EQ(early->state(), TransferState::kFailed);
  EXPECT_EQ(early->Info().error.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(IsTerminal(late->state()));
  WaitTerminal(late);
  EXPECT_EQ(late->state(), TransferState::kFailed);
}

TEST(DeadlineTimerTest, LeavesFinishedTransfersAlone) {
  DeadlineTimer timer;
  auto t = WithTimeout(absl::Milliseconds(10));
  timer.Add(t);
  t->Finish(TransferState::kDone, absl::OkStatus());
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(t->state(), TransferState::kDone);
}

TEST(DeadlineTimerTest, ForgetsTransfersThatAreGone) {
  DeadlineTimer timer;
  timer.Add(WithTimeout(absl::Milliseconds(5)));  // dropped at once
  absl::SleepFor(absl::Milliseconds(30));
  timer.Stop();
}

}  // namespace
}  // namespace xferd::engine
