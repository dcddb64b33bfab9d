// StripedLane on fake device-pair lanes (PairLane), without an RDMA device:
// ops by rate and bytes in flight, a broken pair taking no new op and its
// ops moving to the others (counted as failovers), keys that only some pairs
// have, ops failing with the cause once no pair is left, and a rejoined pair
// taking the place of the broken one.
#include "daemon/transport/verbs/striped_lane.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace xferd::transport::verbs {
namespace {

constexpr uint32_t kOp = 64 << 10;  // bytes per op

// A link that only breaks: the striped link, or a device pair's own link.
class TestLink final : public Link {
 public:
  TestLink() : Link(PeerIdentity{"peer-b", 1}) {}
  absl::Status Connect(const PeerIdentity&, const LinkEndpoints&, absl::Time) override {
    return absl::OkStatus();
  }
  void Close(absl::Status reason) override { MarkBroken(std::move(reason)); }
  uint32_t lane_count() const override { return 0; }
  Lane& lane(uint32_t) override { std::abort(); }
  bool ready() const override { return true; }
};

// One device pair's lane: holds up to `depth` ops until the test completes
// them, in order; reaches the regions in `regions` (all when empty).
class FakePairLane final : public PairLane {
 public:
  FakePairLane(TestLink& owner, uint32_t depth) : owner_(owner), depth_(depth) {}
  uint32_t credits() const override {
    return broken() ? 0 : depth_ - static_cast<uint32_t>(held.size());
  }
  bool broken() const override { return owner_.broken(); }
  uint32_t Post(absl::Span<const DataOp> ops) override {
    uint32_t taken = 0;
    while (taken < ops.size() && credits() > 0) held.push_back(ops[taken++]);
    posted += taken;
    return taken;
  }
  bool Reaches(const RemoteRegion& remote) const override {
    return regions.empty() || regions.count(remote.region_id) > 0;
  }
  void set_reporter(OpReporter* reporter, uint32_t sub) override {
    reporter_ = reporter;
    sub_ = sub;
  }
  // Completes the oldest op it holds, with `error` (null: done).
  void Complete(CompletionSink& sink, const absl::Status* error = nullptr) {
    ASSERT_FALSE(held.empty());
    const DataOp op = held.front();
    held.pop_front();
    reporter_->OnLaneOpDone(sub_, OpCompletion{op.cookie, op.length, error}, sink);
  }

  std::deque<DataOp> held;
  uint64_t posted = 0;
  std::set<uint32_t> regions;

 private:
  TestLink& owner_;
  const uint32_t depth_;
  OpReporter* reporter_ = nullptr;
  uint32_t sub_ = 0;
};

struct Sink final : CompletionSink {
  void OnOpDone(const OpCompletion& c) override {
    done[c.cookie] += 1;
    if (c.error != nullptr) errors[c.cookie] = *c.error;
  }
  void OnLanded(Landing) override {}  // striping carries writes; landings are the receiver's
  std::map<uint64_t, int> done;  // completions per cookie
  std::map<uint64_t, absl::Status> errors;
};

struct Waiting final : WaitingLanes {
  void ListWaiting(StripedLane*, std::shared_ptr<Link>) override { ++listed; }
  int listed = 0;
};

class StripedLaneTest : public ::testing::Test {
 protected:
  // Two device pairs of `weights`, each lane holding `depth` ops.
  void Build(std::vector<uint64_t> weights, uint32_t depth = 64) {
    stripe_ = std::make_unique<StripedLane>(*link_, link_, waiting_, depth);
    for (uint64_t weight : weights) {
      owners_.push_back(std::make_shared<TestLink>());
      lanes_.push_back(std::make_unique<FakePairLane>(*owners_.back(), depth));
      failovers_.push_back(std::make_unique<std::atomic<uint64_t>>(0));
      stripe_->AddDevice(owners_.back(), lanes_.back().get(), failovers_.back().get(), weight);
    }
  }
  // `n` ops of kOp bytes to region `region`, cookies from next_cookie_.
  std::vector<DataOp> Ops(int n, const RemoteRegion* region = nullptr) {
    std::vector<DataOp> ops(n);
    for (DataOp& op : ops) {
      op.cookie = next_cookie_++;
      op.length = kOp;
      op.remote = region != nullptr ? region : &any_;
    }
    return ops;
  }
  void Post(const std::vector<DataOp>& ops) {
    ASSERT_EQ(stripe_->Post(absl::MakeConstSpan(ops)), ops.size());
  }

  RemoteRegion any_{1, 1 << 30};
  std::shared_ptr<TestLink> link_ = std::make_shared<TestLink>();
  Waiting waiting_;
  Sink sink_;
  std::unique_ptr<StripedLane> stripe_;
  std::vector<std::shared_ptr<TestLink>> owners_;
  std::vector<std::unique_ptr<FakePairLane>> lanes_;
  std::vector<std::unique_ptr<std::atomic<uint64_t>>> failovers_;
  uint64_t next_cookie_ = 1;
};

// Weights are the pairs' rates: a pair three times as fast gets three ops
// of every four, op for op, while nothing completes.
TEST_F(StripedLaneTest, OpsFollowThePairsRates) {
  Build({1, 3}, /*depth=*/400);
  Post(Ops(400));
  EXPECT_EQ(lanes_[0]->held.size(), 100u);
  EXPECT_EQ(lanes_[1]->held.size(), 300u);
  EXPECT_EQ(stripe_->credits(), 400u);  // 800 held at most, 400 held
}

// Bytes in flight, not bytes so far: a pair that drained gets the next ops
// until the two carry as much again.
TEST_F(StripedLaneTest, ThePairWithFewerBytesInFlightGetsTheNextOps) {
  Build({1, 1});
  Post(Ops(10));
  ASSERT_EQ(lanes_[0]->held.size(), 5u);
  ASSERT_EQ(lanes_[1]->held.size(), 5u);
  for (int i = 0; i < 5; ++i) lanes_[0]->Complete(sink_);
  Post(Ops(4));
  EXPECT_EQ(lanes_[0]->held.size(), 4u) << "the drained pair did not get the new ops";
  EXPECT_EQ(lanes_[1]->held.size(), 5u);
  EXPECT_EQ(sink_.done.size(), 5u);
  EXPECT_TRUE(sink_.errors.empty());
}

// A broken pair takes no new op; its ops come back with errors and move to
// the live pair, counted as failovers, and the engine hears of each op once,
// when it is done there.
TEST_F(StripedLaneTest, ABrokenPairsOpsMoveToTheLivePair) {
  Build({1, 1});
  const std::vector<DataOp> first = Ops(4);
  Post(first);
  ASSERT_EQ(lanes_[1]->held.size(), 2u);
  owners_[1]->Close(absl::UnavailableError("port down"));
  Post(Ops(4));
  EXPECT_EQ(lanes_[1]->posted, 2u) << "a broken pair got new ops";
  EXPECT_EQ(lanes_[0]->held.size(), 6u);
  const absl::Status flushed = absl::UnavailableError("flushed");
  lanes_[1]->Complete(sink_, &flushed);
  lanes_[1]->Complete(sink_, &flushed);
  EXPECT_EQ(failovers_[1]->load(), 2u);
  EXPECT_EQ(failovers_[0]->load(), 0u);
  EXPECT_TRUE(sink_.done.empty()) << "a moved op was reported before it was done";
  EXPECT_EQ(waiting_.listed, 1);
  EXPECT_FALSE(stripe_->ServiceWaiting(sink_)) << "ops still wait with room on the live pair";
  ASSERT_EQ(lanes_[0]->held.size(), 8u);
  while (!lanes_[0]->held.empty()) lanes_[0]->Complete(sink_);
  EXPECT_EQ(sink_.done.size(), 8u);
  for (const auto& [cookie, times] : sink_.done) EXPECT_EQ(times, 1) << "op " << cookie;
  EXPECT_TRUE(sink_.errors.empty());
  EXPECT_FALSE(stripe_->broken());
}

// Keys a region has on one pair only (its grant bound on that pair's queue
// pairs) keep its ops there; when that pair breaks they have nowhere to go
// and fail with its error, nothing moved.
TEST_F(StripedLaneTest, OpsGoOnlyToPairsTheirKeysWorkOn) {
  Build({1, 1});
  lanes_[1]->regions = {8};  // pair 1 has keys of region 8 only
  const RemoteRegion seven{7, 1 << 30}, eight{8, 1 << 30};
  Post(Ops(6, &seven));
  EXPECT_EQ(lanes_[0]->held.size(), 6u);
  EXPECT_EQ(lanes_[1]->held.size(), 0u);
  Post(Ops(2, &eight));
  EXPECT_EQ(lanes_[1]->held.size(), 2u) << "the idle pair did not get the ops it can carry";
  owners_[0]->Close(absl::UnavailableError("port down"));
  const absl::Status flushed = absl::UnavailableError("flushed");
  const uint64_t cookie = lanes_[0]->held.front().cookie;
  lanes_[0]->Complete(sink_, &flushed);
  ASSERT_EQ(sink_.errors.count(cookie), 1u);
  EXPECT_EQ(sink_.errors[cookie], flushed);
  EXPECT_EQ(failovers_[0]->load(), 0u);
}

// An op waiting to move when every pair broke fails with the reason the
// striped link is about to close with, before it has: the last pair's,
// with its payloads, from which the engine reads the cause (a dead peer's
// NIC refusing access).
TEST_F(StripedLaneTest, AWaitingOpFailsWithTheLastPairsReasonWhenEveryPairBroke) {
  Build({1, 1});
  Post(Ops(2));
  owners_[0]->Close(absl::UnavailableError("port down"));
  const absl::Status flushed = absl::UnavailableError("flushed");
  lanes_[0]->Complete(sink_, &flushed);  // moves: pair 1 still reaches it
  EXPECT_EQ(failovers_[0]->load(), 1u);
  absl::Status refused = absl::UnavailableError("peer peer-b refused the RDMA write");
  refused.SetPayload(kAccessRefused, absl::Cord("remote access error"));
  owners_[1]->Close(refused);
  ASSERT_FALSE(link_->broken());
  EXPECT_FALSE(stripe_->ServiceWaiting(sink_));
  ASSERT_EQ(sink_.errors.size(), 1u);
  const absl::Status& error = sink_.errors.begin()->second;
  EXPECT_EQ(error.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(error.message(),
            "no RDMA device reaches peer peer-b any more; the last one: peer peer-b refused the "
            "RDMA write");
  EXPECT_TRUE(IsAccessRefused(error)) << "the cause was lost: " << error;
}

// An op waiting to move when the pairs that reach its region broke, and
// only pairs without its keys are left, fails saying so.
TEST_F(StripedLaneTest, AWaitingOpNoLivePairReachesFailsSayingSo) {
  Build({1, 1, 1});
  lanes_[2]->regions = {8};  // pair 2 has keys of region 8 only
  const RemoteRegion seven{7, 1 << 30};
  Post(Ops(2, &seven));
  ASSERT_EQ(lanes_[0]->held.size(), 1u);
  owners_[0]->Close(absl::UnavailableError("port down"));
  const absl::Status flushed = absl::UnavailableError("flushed");
  lanes_[0]->Complete(sink_, &flushed);  // moves: pair 1 still reaches it
  owners_[1]->Close(absl::UnavailableError("port down"));
  EXPECT_FALSE(stripe_->ServiceWaiting(sink_));
  ASSERT_EQ(sink_.errors.size(), 1u);
  const absl::Status& error = sink_.errors.begin()->second;
  EXPECT_EQ(error.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(error.message(), "no RDMA device of this daemon reaches region id 7 on peer peer-b");
}

// A rejoined pair takes its place once the broken lane gave back every op
// it took (completions pair with ops in order), and then carries its share.
TEST_F(StripedLaneTest, ARejoinedPairTakesOverOnceTheBrokenOneDrained) {
  Build({1, 1});
  Post(Ops(4));
  owners_[1]->Close(absl::UnavailableError("port down"));
  auto fresh_owner = std::make_shared<TestLink>();
  FakePairLane fresh(*fresh_owner, 64);
  stripe_->Rejoin(1, fresh_owner, &fresh, 1);
  Post(Ops(2));
  EXPECT_EQ(fresh.posted, 0u) << "the fresh lane took ops before the broken one drained";
  const absl::Status flushed = absl::UnavailableError("flushed");
  lanes_[1]->Complete(sink_, &flushed);
  lanes_[1]->Complete(sink_, &flushed);
  stripe_->ServiceWaiting(sink_);  // the moved ops
  Post(Ops(8));
  EXPECT_GE(fresh.posted, 4u) << "the rejoined pair carries no share";
  EXPECT_EQ(lanes_[1]->posted, 2u);
  // Its completions reach the striped lane as pair 1's.
  while (!fresh.held.empty()) fresh.Complete(sink_);
  while (!lanes_[0]->held.empty()) lanes_[0]->Complete(sink_);
  EXPECT_EQ(sink_.done.size(), 14u);
  EXPECT_TRUE(sink_.errors.empty());
}

// A broken striped link takes nothing and offers no credit.
TEST_F(StripedLaneTest, ABrokenLinkTakesNoOps) {
  Build({1, 1});
  EXPECT_EQ(stripe_->credits(), 128u);
  link_->Close(absl::UnavailableError("peer gone"));
  EXPECT_TRUE(stripe_->broken());
  EXPECT_EQ(stripe_->credits(), 0u);
  const std::vector<DataOp> ops = Ops(2);
  EXPECT_EQ(stripe_->Post(absl::MakeConstSpan(ops)), 0u);
  EXPECT_EQ(lanes_[0]->posted + lanes_[1]->posted, 0u);
}

}  // namespace
}  // namespace xferd::transport::verbs
