#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "tests/unit/engine/engine_harness.h"

namespace xferd::testing {
namespace {

using engine::TransferState;

EngineConfig SmallSlices() {
  EngineConfig config;
  config.pollers = 2;
  config.slice_size = 4096;
  config.lane_depth = 4;
  config.max_inflight_transfers = 8;
  config.priorities.critical_reserve = 0;  // all 8 for the normal writes here
  return config;
}

class EngineTransfersTest : public TwoEngineTest {
 protected:
  EngineTransfersTest() : TwoEngineTest(SmallSlices()) {}
  void SetUp() override {
    TwoEngineTest::SetUp();
    Fill(*src_, 1);
  }

  absl::Status SubmitError(engine::TransferSpec spec) {
    return h_.Submit(*a_, {std::move(spec)}).status();
  }
};

TEST_F(EngineTransfersTest, MultiSliceWriteLandsWithOneLandedEvent) {
  LandedRecorder watcher(*dst_);
  auto submitted = h_.Submit(*a_, {Spec("src", "b", "dst", 100001, 7, 300)});
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const engine::TransferInfo info = h_.Wait((*submitted)[0]);
  EXPECT_EQ(info.state, TransferState::kDone) << info.error;
  EXPECT_EQ(info.bytes_done, 100001u);
  EXPECT_EQ(info.slices, 25u);  // ceil(100001 / 4096)
  EXPECT_EQ(info.peer_node, "b");
  EXPECT_EQ(std::memcmp(src_->data() + 7, dst_->data() + 300, 100001), 0);
  EXPECT_EQ(dst_->data()[299], std::byte{0});
  EXPECT_EQ(dst_->data()[300 + 100001], std::byte{0});
  const std::vector<memory::LandedEvent> events = watcher.Take();
  EXPECT_EQ(watcher.news, 1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].offset, 300u);
  EXPECT_EQ(events[0].length, 100001u);
  EXPECT_EQ(events[0].source_transfer_id, info.id);
}

// A transfer whose peer is the engine's own node id copies between two of
// its regions on the pollers: slices on both pollers, the landed event, a
// read back, and the peer checks (remote_write) on the own region.
TEST_F(EngineTransfersTest, WritesAndReadsToTheOwnNodeCopyOnThePollers) {
  memory::RegionSpec spec;
  spec.name = "own";
  spec.size = 1 << 20;
  spec.access.remote_write = spec.access.remote_read = true;
  absl::StatusOr<std::shared_ptr<memory::Region>> own_or = h_.Register(*a_, spec);
  ASSERT_TRUE(own_or.ok()) << own_or.status();
  std::shared_ptr<memory::Region> own = *own_or;
  std::shared_ptr<memory::Region> back = h_.RegisterOrDie(*a_, "back", 1 << 20, false);
  LandedRecorder watcher(*own);
  auto submitted = h_.Submit(*a_, {Spec("src", "a", "own", 100001, 7, 300)});
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  engine::TransferInfo info = h_.Wait((*submitted)[0]);
  EXPECT_EQ(info.state, TransferState::kDone) << info.error;
  EXPECT_EQ(info.peer_node, "a");
  EXPECT_EQ(info.bytes_done, 100001u);
  EXPECT_EQ(info.slices, 25u);
  EXPECT_EQ(std::memcmp(src_->data() + 7, own->data() + 300, 100001), 0);
  EXPECT_EQ(own->data()[299], std::byte{0});
  const std::vector<memory::LandedEvent> events = watcher.Take();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].source_transfer_id, info.id);
  EXPECT_EQ(events[0].source_node, "a");

  engine::TransferSpec read = Spec("own", "a", "back", 100001, 300, 0);
  read.direction = transport::OpKind::kRead;
  submitted = h_.Submit(*a_, {read});
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  info = h_.Wait((*submitted)[0]);
  EXPECT_EQ(info.state, TransferState::kDone) << info.error;
  EXPECT_EQ(std::memcmp(src_->data() + 7, back->data(), 100001), 0);

  read.src_region = "src";  // no remote_read
  EXPECT_EQ(SubmitError(read).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(SubmitError(Spec("src", "a", "back", 10)).code(),
            absl::StatusCode::kPermissionDenied);  // no remote_write
  EXPECT_EQ(SubmitError(Spec("src", "a", "own", 10, 0, 1 << 20)).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(a_->engine->ListPeers().size(), 1u);  // b only: the own node is not listed
}

// A destination key invalidated between its resolution and the write's
// admission (the peer deregistered a region just then) is the daemon's race,
// not the client's: the writes resolve again and go on, here to success as
// the region still exists, never UNAVAILABLE "retry". The invalidations come
// every millisecond, faster than a batch of 256 is planned under sanitizers
// on a loaded host: each batch must still get through, not resolve again
// until its deadline (an admission looks each key up once).
class EngineInvalidationTest : public TwoEngineTest {};  // room for 256 writes at once

TEST_F(EngineInvalidationTest, InvalidationsRacingSubmissionsAreResolvedAgain) {
  std::atomic<bool> stop{false};
  std::thread invalidations([&] {
    while (!stop) {
      EXPECT_TRUE(a_->engine->OnRegionInvalidated("b", 1, dst_->id(), "dst").ok());
      absl::SleepFor(absl::Milliseconds(1));
    }
  });
  constexpr uint64_t kWrites = 256, kPart = 4096;
  for (int round = 0; round < 20; ++round) {
    std::vector<engine::TransferSpec> batch;
    for (uint64_t i = 0; i < kWrites; ++i) {
      batch.push_back(Spec("src", "b", "dst", kPart, i * kPart, i * kPart));
    }
    auto submitted = h_.Submit(*a_, std::move(batch), /*batch=*/true);
    ASSERT_TRUE(submitted.ok()) << "round " << round << ": " << submitted.status();
    for (const auto& t : *submitted) ASSERT_EQ(h_.Wait(t).state, TransferState::kDone);
  }
  stop = true;
  invalidations.join();
}

TEST_F(EngineTransfersTest, FinalSliceIsPostedAfterEveryOther) {
  auto submitted = h_.Submit(*a_, {Spec("src", "b", "dst", 64 * 4096)});
  ASSERT_TRUE(submitted.ok());
  ASSERT_EQ(h_.Wait((*submitted)[0]).state, TransferState::kDone);
  const auto posted = a_->transport->posted();
  ASSERT_EQ(posted.size(), 64u);
  for (size_t i = 0; i + 1 < posted.size(); ++i) EXPECT_FALSE(posted[i].notice) << i;
  ASSERT_TRUE(posted.back().notice);
  ASSERT_EQ(posted.back().blocks.size(), 1u);
  EXPECT_EQ(posted.back().blocks[0].remote_offset, 63u * 4096);
}

TEST_F(EngineTransfersTest, SingleSliceWrite) {
  auto submitted = h_.Submit(*a_, {Spec("src", "b", "dst", 10)});
  ASSERT_TRUE(submitted.ok());
  EXPECT_EQ(h_.Wait((*submitted)[0]).state, TransferState::kDone);
  EXPECT_EQ(std::memcmp(src_->data(), dst_->data(), 10), 0);
}

TEST_F(EngineTransfersTest, ValidationErrorsSayWhatIsWrong) {
  struct Case {
    engine::TransferSpec spec;
    absl::StatusCode code;
    const char* fragment;
  };
  engine::TransferSpec bad_slice = Spec("src", "b", "dst", 4096);
  bad_slice.slice_size = 100;
  engine::TransferSpec zero_timeout = Spec("src", "b", "dst", 4096);
  zero_timeout.timeout = absl::ZeroDuration();
  const uint64_t max = ~uint64_t{0};
  const Case cases[] = {
      {Spec("nope", "b", "dst", 1), absl::StatusCode::kNotFound, "source region 'nope'"},
      {Spec("src", "b", "dst", 0), absl::StatusCode::kInvalidArgument, "length is 0"},
      {Spec("src", "b", "dst", (1 << 20) + 1), absl::StatusCode::kOutOfRange, "source range"},
      {Spec("src", "b", "dst", 2, max), absl::StatusCode::kOutOfRange, "source range"},
      {Spec("src", "b", "dst", 2, 0, max), absl::StatusCode::kOutOfRange, "destination range"},
      {Spec("src", "zz", "dst", 1), absl::StatusCode::kNotFound, "no peer 'zz'"},
      {Spec("src", "b", "missing", 1), absl::StatusCode::kNotFound, "'missing'"},
      {bad_slice, absl::StatusCode::kInvalidArgument, "slice_size"},
      {zero_timeout, absl::StatusCode::kInvalidArgument, "timeout"},
  };
  for (const Case& c : cases) {
    absl::Status s = SubmitError(c.spec);
    EXPECT_EQ(s.code(), c.code) << s;
    EXPECT_NE(s.message().find(c.fragment), absl::string_view::npos) << s;
  }
  EXPECT_EQ(a_->engine->Stats().transfers.submitted, 0u);
}

TEST_F(EngineTransfersTest, DestinationWithoutRemoteWriteIsPermissionDenied) {
  h_.RegisterOrDie(*b_, "readonly", 4096, false);
  absl::Status s = SubmitError(Spec("src", "b", "readonly", 4096));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("remote writes"), absl::string_view::npos);
}

TEST_F(EngineTransfersTest, BatchIsAllOrNothing) {
  auto result = h_.Submit(*a_, {Spec("src", "b", "dst", 4096), Spec("src", "b", "dst", 0)},
                          /*batch=*/true);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("write #1"), absl::string_view::npos);
  EXPECT_EQ(a_->engine->Stats().transfers.submitted, 0u);
  EXPECT_EQ(dst_->data()[0], std::byte{0});
  auto ok =
      h_.Submit(*a_, {Spec("src", "b", "dst", 4096), Spec("src", "b", "dst", 4096, 0, 8192)}, true);
  ASSERT_TRUE(ok.ok());
  EXPECT_NE((*ok)[0]->plan().batch_id, 0u);
  EXPECT_EQ((*ok)[0]->plan().batch_id, (*ok)[1]->plan().batch_id);
  for (const auto& t : *ok) EXPECT_EQ(h_.Wait(t).state, TransferState::kDone);
}

TEST_F(EngineTransfersTest, AdmissionIsBounded) {
  a_->transport->HoldCompletions(true);
  std::vector<engine::TransferSpec> eight;  // disjoint ranges: concurrent writes
  for (uint64_t i = 0; i < 8; ++i) eight.push_back(Spec("src", "b", "dst", 4096, 0, i * 4096));
  auto held = h_.Submit(*a_, eight, true);
  ASSERT_TRUE(held.ok());
  absl::Status s = SubmitError(Spec("src", "b", "dst", 4096));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("max_inflight_transfers"), absl::string_view::npos);
  a_->transport->HoldCompletions(false);
  for (const auto& t : *held) EXPECT_EQ(h_.Wait(t).state, TransferState::kDone);
  EXPECT_TRUE(h_.Submit(*a_, {Spec("src", "b", "dst", 4096)}).ok());
}

TEST_F(EngineTransfersTest, CancelEndsATransfer) {
  a_->transport->HoldCompletions(true);
  auto t = (*h_.Submit(*a_, {Spec("src", "b", "dst", 1 << 20)}))[0];
  auto cancelled = a_->engine->CancelTransfer(t->id());
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->state, TransferState::kCancelled);
  EXPECT_EQ(cancelled->error.code(), absl::StatusCode::kCancelled);
  a_->transport->HoldCompletions(false);
  EXPECT_EQ(h_.Wait(t).state, TransferState::kCancelled);  // stays cancelled
  EXPECT_EQ(a_->engine->CancelTransfer(424242).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(a_->engine->Stats().transfers.cancelled, 1u);
}

TEST_F(EngineTransfersTest, DeadlineFailsAStalledTransfer) {
  a_->transport->HoldCompletions(true);
  engine::TransferSpec spec = Spec("src", "b", "dst", 1 << 20);
  spec.timeout = absl::Milliseconds(50);
  auto t = (*h_.Submit(*a_, {spec}))[0];
  const absl::Time start = absl::Now();
  const engine::TransferInfo info = h_.Wait(t, absl::Seconds(5));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(info.state, TransferState::kFailed);
  EXPECT_EQ(info.error.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(info.error.message().find("timeout"), absl::string_view::npos);
  a_->transport->HoldCompletions(false);
}

// A poller holding a stalled transfer (its lane has no credits left: the
// ops wait for completions) falls asleep. When the transfer ends elsewhere
// (here a cancel, on this thread) the poller must still let go of it, or the
// transfer, its block plan and its region's memory stay until that poller's
// next work, which a dead link never brings.
TEST_F(EngineTransfersTest, PollersLetGoOfATransferEndedElsewhere) {
  a_->transport->HoldCompletions(true);
  auto t = (*h_.Submit(*a_, {Spec("src", "b", "dst", 1 << 20)}))[0];  // 256 ops of 4 KiB
  const auto all_asleep = [&] {
    for (const engine::PollerStats& p : a_->engine->Stats().pollers) {
      if (!p.sleeping) return false;
    }
    return true;
  };
  ASSERT_TRUE(WaitUntil([&] { return t->holders() != 0 && all_asleep(); }))
      << "no poller held the stalled transfer asleep";
  ASSERT_TRUE(a_->engine->CancelTransfer(t->id()).ok());
  EXPECT_TRUE(WaitUntil([&] { return t->holders() == 0; }, absl::Seconds(2)))
      << "pollers still hold the ended transfer: " << t->holders();
  a_->transport->HoldCompletions(false);
  EXPECT_EQ(h_.Wait(t).state, TransferState::kCancelled);
}

// A failure the transport cannot explain alone (verbs: the peer's NIC refused
// access) is looked into: a peer that still answers as the same process
// refused (its region went, or our keys); one that no longer answers died or
// reset, and the transfer says so, not that a region was deregistered.
TEST_F(EngineTransfersTest, AnUnexplainedRefusalAsksThePeer) {
  absl::Status refused = absl::UnavailableError(
      "peer b refused the RDMA write (remote access error): its region was deregistered or our "
      "keys revoked, or the range is outside it; the link is reset");
  refused.SetPayload(transport::kAccessRefused, absl::Cord("remote access error"));
  auto fail_one = [&] {
    a_->transport->HoldCompletions(true);
    auto t = (*h_.Submit(*a_, {Spec("src", "b", "dst", 1 << 20)}))[0];
    a_->transport->CloseLinks(refused);
    a_->transport->HoldCompletions(false);
    return h_.Wait(t);
  };
  const engine::TransferInfo alive = fail_one();
  EXPECT_EQ(alive.state, TransferState::kFailed);
  EXPECT_EQ(alive.error, absl::Status(refused.code(), refused.message())) << alive.error;
  EXPECT_FALSE(transport::IsAccessRefused(alive.error)) << "looked into, yet still marked";

  h_.rpc().SetPingsUnanswered(true);
  const engine::TransferInfo dead = fail_one();
  EXPECT_EQ(dead.state, TransferState::kFailed);
  EXPECT_EQ(dead.error.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(dead.error.message(),
            "peer b died or reset during the transfer: it no longer answers at addr-b (failed "
            "to connect to all addresses); its NIC refused our RDMA access (remote access "
            "error) as the process went; the link is reset");
  h_.rpc().SetPingsUnanswered(false);
}

TEST_F(EngineTransfersTest, ObserversHearTheEndOnce) {
  auto t = (*h_.Submit(*a_, {Spec("src", "b", "dst", 1 << 20)}))[0];
  std::atomic<int> calls{0};
  if (!t->AddObserver([&](const engine::TransferInfo&) { ++calls; })) ++calls;
  h_.Wait(t);
  // Observers hear of the end after it is visible: wait for the call.
  ASSERT_TRUE(WaitUntil([&] { return calls.load() >= 1; }));
  EXPECT_EQ(calls.load(), 1);
  EXPECT_FALSE(t->AddObserver([](const engine::TransferInfo&) {}));
}

TEST_F(EngineTransfersTest, DrainingRefusesNewWrites) {
  a_->engine->BeginDrain();
  absl::Status s = SubmitError(Spec("src", "b", "dst", 4096));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("shutting down"), absl::string_view::npos);
  EXPECT_TRUE(a_->engine->WaitIdle(absl::Now() + absl::Seconds(1)));
}

TEST_F(EngineTransfersTest, ListingAndLookup) {
  auto t = (*h_.Submit(*a_, {Spec("src", "b", "dst", 4096)}))[0];
  h_.Wait(t);
  EXPECT_EQ(a_->engine->GetTransfer(t->id())->state, TransferState::kDone);
  EXPECT_EQ(a_->engine->GetTransfer(4242).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(a_->engine->ListTransfers(engine::TransferFilter{false, 0, 10}).empty());
  auto all = a_->engine->ListTransfers(engine::TransferFilter{true, 0, 10});
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].state, TransferState::kDone);
}

}  // namespace
}  // namespace xferd::testing
