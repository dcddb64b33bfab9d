#include "daemon/engine/transfer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
#include "daemon/engine/block_plan.h"
#include "daemon/engine/peer.h"
#include "tests/testing/fake_transport.h"

namespace xferd::engine {
namespace {

using xferd::testing::NullLink;

// Counts ends, and which of them were announced after the end was visible.
struct Counting : TransferListener {
  int finished = 0;
  int counted_late = 0;
  void OnTransferEnding(const Transfer& t, const TransferInfo& outcome) override {
    if (IsTerminal(t.state()) || !IsTerminal(outcome.state)) ++counted_late;
  }
  void OnTransferFinished(const Transfer& t, const TransferInfo&) override {
    EXPECT_TRUE(IsTerminal(t.state()));
    ++finished;
  }
};

class TransferTest : public ::testing::Test {
 protected:
  // Told of its end: `listener`, or listener_ if null.
  std::shared_ptr<Transfer> Make(uint64_t length, uint32_t slice,
                                 TransferListener* listener = nullptr,
                                 transport::OpKind kind = transport::OpKind::kWrite) {
    memory::RegionSpec spec;
    spec.name = "src";
    spec.size = 1 << 20;
    region_ = std::make_shared<memory::Region>(
        1, spec, *memory::MemoryBacking::Create({memory::Backing::kAnonymous, 1 << 20}));
    Transfer::Plan plan;
    plan.submitted_at = absl::Now();
    plan.id = 5;
    plan.kind = kind;
    plan.spec.direction = kind;
    plan.spec.length = length;
    plan.spec.src_offset = 100;
    plan.spec.dst_offset = 1000;
    plan.local = region_;
    auto link = std::make_shared<NullLink>();
    plan.peer = std::make_shared<Peer>(NodeIdentity{"peer", 1, "x"}, true, link,
                                       transport::TransportKind::kTcp, "", 1, 2);
    plan.link = link;
    plan.remote = transport::RemoteRegion{9, 1 << 20, 0, 0};
    plan.slice_size = slice;
    EXPECT_TRUE(AppendSplit(100, 1000, length, slice, &plan.blocks, "the range").ok());
    return std::make_shared<Transfer>(plan, listener != nullptr ? listener : &listener_);
  }
  std::shared_ptr<memory::Region> region_;
  Counting listener_;
};

TEST_F(TransferTest, SlicesAndOps) {
  auto t = Make(10000, 4096);
  EXPECT_EQ(t->ops(), 3u);
  EXPECT_EQ(t->bulk_ops(), 2u);
  transport::DataOp op;
  t->MakeOp(2, true, &op);
  EXPECT_EQ(op.kind, transport::OpKind::kWrite);
  EXPECT_EQ(op.length, 10000u - 8192u);
  ASSERT_EQ(op.block_count, 1u);
  EXPECT_EQ(op.blocks[0].remote_offset, 1000u + 8192u);
  EXPECT_EQ(op.blocks[0].local_offset, 100u + 8192u);
  EXPECT_EQ(op.local_base, region_->data());
  ASSERT_NE(op.notice, nullptr);
  EXPECT_EQ(op.notice->offset, 1000u);
  EXPECT_EQ(op.notice->length, 10000u);
  EXPECT_EQ(op.notice->blocks, 1u);  // the request's one range, not its 3 slices
  EXPECT_EQ(op.notice->bytes, 10000u);
  EXPECT_EQ(CookieTransfer(op.cookie), t.get());
  EXPECT_TRUE(CookieIsFinal(op.cookie));
  t->MakeOp(0, false, &op);
  EXPECT_EQ(op.notice, nullptr);
  EXPECT_FALSE(CookieIsFinal(op.cookie));
  EXPECT_EQ(region_->users(), 1u);
}

TEST_F(TransferTest, BulkThenFinal) {
  auto t = Make(3 * 4096, 4096);
  EXPECT_EQ(t->ClaimBulk(), 0u);
  EXPECT_EQ(t->ClaimBulk(), 1u);
  EXPECT_TRUE(t->BulkClaimedOut());
  EXPECT_FALSE(t->BulkComplete());
  t->OnBulkDone(4096);
  EXPECT_EQ(t->OnBulkDone(4096), 2u);
  EXPECT_TRUE(t->BulkComplete());
  EXPECT_TRUE(t->TryClaimFinal());
  EXPECT_FALSE(t->TryClaimFinal());
  t->MarkRunning();
  EXPECT_EQ(t->state(), TransferState::kRunning);
  t->OnFinalDone(4096);
  EXPECT_EQ(t->state(), TransferState::kDone);
  EXPECT_EQ(t->Info().bytes_done, 3u * 4096);
  EXPECT_EQ(listener_.finished, 1);
  EXPECT_EQ(listener_.counted_late, 0);
  EXPECT_EQ(region_->users(), 0u);
}

TEST_F(TransferTest, FirstOutcomeWinsAndObserversRunOnce) {
  auto t = Make(4096, 4096);
  int seen = 0;
  TransferState state{};
  ASSERT_TRUE(t->AddObserver([&](const TransferInfo& info) {
    ++seen;
    state = info.state;
  }));
  EXPECT_TRUE(t->Finish(TransferState::kCancelled, absl::CancelledError("stop")));
  EXPECT_FALSE(t->Finish(TransferState::kFailed, absl::InternalError("late")));
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(state, TransferState::kCancelled);
  EXPECT_EQ(t->Info().error.message(), "stop");
  EXPECT_FALSE(t->AddObserver([](const TransferInfo&) {}));
  EXPECT_EQ(listener_.finished, 1);
  EXPECT_EQ(listener_.counted_late, 0);
  EXPECT_NE(t->Info().finished_at, absl::InfinitePast());
}

// Info() is one consistent copy: a terminal state always comes with its
// error and end time, even while another thread is ending the transfer.
// (WatchTransfer sends the first terminal snapshot it sees as its last.)
TEST_F(TransferTest, InfoNeverShowsAnEndWithoutItsOutcome) {
  int torn = 0;
  for (int round = 0; round < 200; ++round) {
    auto t = Make(4096, 4096);
    std::atomic<bool> reading{false};
    TransferInfo seen;
    std::thread reader([&] {
      reading = true;
      do {
        seen = t->Info();
      } while (!IsTerminal(seen.state));
    });
    while (!reading) {
    }
    t->Finish(TransferState::kFailed, absl::UnavailableError("peer went away"));
    reader.join();
    if (seen.error.ok() || seen.finished_at == absl::InfinitePast()) ++torn;
  }
  EXPECT_EQ(torn, 0) << "snapshots showed FAILED without its error or end time";
}

// A client told a transfer ended (by its state or an observer) and then
// asking for the counters must find it counted; and a Finish that lost the
// race returns only once the winner's outcome is visible.
TEST_F(TransferTest, EndsAreCountedBeforeTheyAreVisible) {
  struct Blocking : TransferListener {
    std::atomic<bool> entered{false}, release{false};
    void OnTransferEnding(const Transfer& t, const TransferInfo&) override {
      EXPECT_FALSE(IsTerminal(t.state()));
      entered = true;
      while (!release) std::this_thread::yield();
    }
    void OnTransferFinished(const Transfer&, const TransferInfo&) override {}
  } blocking;
  auto held = Make(4096, 4096, &blocking);
  std::thread winner([&] { held->Finish(TransferState::kDone, absl::OkStatus()); });
  while (!blocking.entered) std::this_thread::yield();
  EXPECT_FALSE(IsTerminal(held->state())) << "visible before the listener counted it";
  std::atomic<bool> loser_returned{false};
  TransferState loser_saw{};
  std::thread loser([&] {
    EXPECT_FALSE(held->Finish(TransferState::kCancelled, absl::CancelledError("late")));
    loser_saw = held->state();
    loser_returned = true;
  });
  // A window for the loser to return too early, were it wrong: what must not
  // happen has no event to wait for.
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(loser_returned) << "the losing Finish returned before the outcome was visible";
  blocking.release = true;
  winner.join();
  loser.join();
  EXPECT_EQ(loser_saw, TransferState::kDone);
  EXPECT_EQ(held->Info().state, TransferState::kDone);
}

// A read raises its landed event only when it ends done: one cancelled (by a
// deregistration, a deadline, a dead peer) while its last op completes
// raises none, so no watcher sees a success the transfer does not report.
TEST_F(TransferTest, AReadEndedOtherwiseAsItsLastOpCompletesRaisesNoLandedEvent) {
  struct Blocking : TransferListener {
    std::atomic<bool> entered{false}, release{false};
    void OnTransferEnding(const Transfer&, const TransferInfo&) override {
      entered = true;
      while (!release) std::this_thread::yield();
    }
    void OnTransferFinished(const Transfer&, const TransferInfo&) override {}
  } blocking;
  auto read = Make(4096, 4096, &blocking, transport::OpKind::kRead);
  std::thread canceller(
      [&] { read->Finish(TransferState::kCancelled, absl::CancelledError("x")); });
  while (!blocking.entered) std::this_thread::yield();
  // The cancel has decided but is not visible yet: the last op completes now.
  std::thread last_op([&] { read->OnReadDone(); });
  // A window for the last op's Finish to publish an event, were it wrong.
  absl::SleepFor(absl::Milliseconds(20));
  blocking.release = true;
  canceller.join();
  last_op.join();
  EXPECT_EQ(read->Info().state, TransferState::kCancelled);
  EXPECT_EQ(region_->landed().published(), 0u) << "a landed event for a cancelled read";

  Counting counting;
  auto done = Make(4096, 4096, &counting, transport::OpKind::kRead);
  done->OnReadDone();
  EXPECT_EQ(done->Info().state, TransferState::kDone);
  ASSERT_EQ(region_->landed().published(), 1u);
}

TEST_F(TransferTest, TheOutcomeKeepsTheBytesDoneWhenItEnded) {
  auto t = Make(3 * 4096, 4096);
  t->OnBulkDone(4096);
  t->Finish(TransferState::kFailed, absl::UnavailableError("gone"));
  t->OnBulkDone(4096);  // a write in flight acknowledged afterwards
  EXPECT_EQ(t->Info().bytes_done, 4096u);
}

TEST_F(TransferTest, DroppedWithoutOutcomeReleasesItsSource) {
  Make(4096, 4096).reset();
  EXPECT_EQ(region_->users(), 0u);
}

}  // namespace
}  // namespace xferd::engine
