#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/unit/engine/engine_harness.h"

namespace xferd::testing {
namespace {

using engine::TransferState;
using EngineTest = TwoEngineTest;

// The service reports regions and the transport through these, never
// through the registry or the transport themselves.
TEST_F(EngineTest, AnswersWhatTheServiceReports) {
  std::shared_ptr<memory::Region> dst = h_.RegisterOrDie(*a_, "dst", 4096, true);
  EXPECT_EQ(a_->engine->FindRegion("src"), src_);
  EXPECT_EQ(a_->engine->FindRegion("dst"), dst);
  EXPECT_EQ(a_->engine->FindRegion("nope"), nullptr);
  std::vector<std::string> names;
  for (const auto& region : a_->engine->ListRegions()) names.push_back(region->name());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"dst", "src"}));
  ASSERT_TRUE(a_->engine->DeregisterRegion("src", a_->engine->tenants().Default(), false).ok());
  EXPECT_EQ(a_->engine->FindRegion("src"), nullptr);
  EXPECT_EQ(a_->engine->ListRegions().size(), 1u);
  // FakeTransport stands in for TCP: no device, no RDMA port.
  EXPECT_EQ(a_->engine->transport_kind(), transport::TransportKind::kTcp);
  EXPECT_EQ(a_->engine->transport_device(), "");
  EXPECT_FALSE(a_->engine->rdma_port().has_value());
}

TEST_F(EngineTest, DeregisterRefusesBusyRegionsAndForceCancels) {
  a_->transport->HoldCompletions(true);
  auto t = (*h_.Submit(*a_, {Spec("src", "b", "dst", 1 << 20)}))[0];
  absl::Status busy =
      a_->engine->DeregisterRegion("src", a_->engine->tenants().Default(), false).status();
  EXPECT_EQ(busy.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(busy.message().find("in flight"), absl::string_view::npos);
  auto forced = a_->engine->DeregisterRegion("src", a_->engine->tenants().Default(), true);
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(*forced, 1u);
  EXPECT_EQ(h_.Wait(t).state, TransferState::kCancelled);
  a_->transport->HoldCompletions(false);
  EXPECT_EQ(
      a_->engine->DeregisterRegion("src", a_->engine->tenants().Default(), false).status().code(),
      absl::StatusCode::kNotFound);
}

TEST_F(EngineTest, PeersForgetKeysOfDeregisteredRegions) {
  auto t = (*h_.Submit(*a_, {Spec("src", "b", "dst", 8192)}))[0];
  EXPECT_EQ(h_.Wait(t).state, TransferState::kDone);
  ASSERT_TRUE(b_->engine->DeregisterRegion("dst", b_->engine->tenants().Default(), false).ok());
  // The invalidation is sent from b's executor; a resolves afresh and fails.
  absl::Status s;
  WaitUntil([&] {
    s = h_.Submit(*a_, {Spec("src", "b", "dst", 8192)}).status();
    return !s.ok();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  // Re-registered under the same name: a new id, and writes work again.
  h_.RegisterOrDie(*b_, "dst", 8192, true);
  auto again = h_.Submit(*a_, {Spec("src", "b", "dst", 8192)});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(h_.Wait((*again)[0]).state, TransferState::kDone);
}

TEST_F(EngineTest, StatsCountBytesTransfersAndErrors) {
  auto t = (*h_.Submit(*a_, {Spec("src", "b", "dst", 1 << 20)}))[0];
  h_.Wait(t);
  a_->transport->HoldCompletions(true);
  auto c = (*h_.Submit(*a_, {Spec("src", "b", "dst", 4096)}))[0];
  ASSERT_TRUE(a_->engine->CancelTransfer(c->id()).ok());
  a_->transport->HoldCompletions(false);
  const engine::EngineStats stats = a_->engine->Stats();
  EXPECT_EQ(stats.transfers.submitted, 2u);
  EXPECT_EQ(stats.transfers.done, 1u);
  EXPECT_EQ(stats.transfers.cancelled, 1u);
  EXPECT_EQ(stats.transfers.errors.at("CANCELLED"), 1u);
  EXPECT_EQ(stats.regions, 1u);
  EXPECT_EQ(stats.registered_bytes, 1u << 20);
  EXPECT_EQ(stats.peers, 1u);
  EXPECT_EQ(stats.pollers.size(), 2u);
}

TEST_F(EngineTest, FailAllEndsEverythingInFlight) {
  a_->transport->HoldCompletions(true);
  // Disjoint destinations: the two writes may be placed at once, by two
  // pollers (the same bytes written by both would be a race in the test).
  auto ts = *h_.Submit(
      *a_, {Spec("src", "b", "dst", 4096), Spec("src", "b", "dst", 4096, 4096, 4096)}, true);
  EXPECT_FALSE(a_->engine->WaitIdle(absl::Now() + absl::Milliseconds(20)));
  EXPECT_EQ(a_->engine->FailAll(absl::UnavailableError("going down")), 2u);
  for (const auto& t : ts) EXPECT_EQ(h_.Wait(t).error.message(), "going down");
  EXPECT_TRUE(a_->engine->WaitIdle(absl::Now() + absl::Seconds(1)));
  a_->transport->HoldCompletions(false);
}

TEST_F(EngineTest, PeerTrafficOutlivesLinks) {
  EXPECT_EQ(Write(8192).state, TransferState::kDone);
  EXPECT_EQ(a_->engine->Stats().traffic.at("b").bytes_sent, 8192u);
  // Disconnected: the peer is gone, its bytes stay counted.
  ASSERT_TRUE(a_->engine->DisconnectPeer("b", a_->engine->tenants().Default()).ok());
  engine::EngineStats stats = a_->engine->Stats();
  EXPECT_EQ(stats.peers, 0u);
  EXPECT_EQ(stats.traffic.at("b").bytes_sent, 8192u);
  EXPECT_EQ(stats.bytes_sent, 8192u);
  // A new link adds to them.
  ASSERT_TRUE(h_.Connect(*a_, *b_).ok());
  EXPECT_EQ(Write(4096).state, TransferState::kDone);
  stats = a_->engine->Stats();
  EXPECT_EQ(stats.traffic.at("b").bytes_sent, 8192u + 4096u);
  EXPECT_EQ(stats.bytes_sent, 8192u + 4096u);
  EXPECT_EQ(stats.traffic.size(), 1u);
}

TEST_F(EngineTest, RecorderIsToldOfEveryEndOnce) {
  // A slow recorder: the cancel's end is still being noted when Stop()
  // begins, and Stop() must wait for it before the recorder may be cleared.
  struct Recorder : engine::TransferRecorder {
    void RecordTransfer(const engine::TransferInfo& info) override {
      absl::SleepFor(absl::Milliseconds(100));
      MutexLock lock(&mu);
      ended.push_back(info);
    }
    Mutex mu;
    std::vector<engine::TransferInfo> ended;
  } recorder;
  a_->engine->SetTransferRecorder(&recorder);
  EXPECT_EQ(Write(1 << 20).state, TransferState::kDone);
  a_->transport->HoldCompletions(true);
  auto cancelled = (*h_.Submit(*a_, {Spec("src", "b", "dst", 4096)}))[0];
  ASSERT_TRUE(a_->engine->CancelTransfer(cancelled->id()).ok());
  ASSERT_TRUE(a_->engine->CancelTransfer(cancelled->id()).ok());  // already ended: no news
  a_->transport->HoldCompletions(false);
  a_->engine->Stop();
  a_->engine->SetTransferRecorder(nullptr);
  MutexLock lock(&recorder.mu);
  ASSERT_EQ(recorder.ended.size(), 2u);
  EXPECT_EQ(recorder.ended[0].state, TransferState::kDone);
  EXPECT_EQ(recorder.ended[0].peer_node, "b");
  EXPECT_GE(recorder.ended[0].finished_at, recorder.ended[0].submitted_at);
  EXPECT_EQ(recorder.ended[1].id, cancelled->id());
  EXPECT_EQ(recorder.ended[1].state, TransferState::kCancelled);
}

}  // namespace
}  // namespace xferd::testing
