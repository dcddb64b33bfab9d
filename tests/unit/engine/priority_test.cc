// Priority classes where bytes wait (docs/priorities.md): the order ops
// reach a lane, the bytes a lane holds for the classes below critical, the
// share by weight, the critical reserve of admission, and the per-class
// counters.
#include "daemon/engine/priority.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "tests/testing/wait_until.h"
#include "tests/unit/engine/engine_harness.h"

namespace xferd::testing {
namespace {

using engine::Priority;
using engine::TransferState;

constexpr uint64_t kSlice = 4096;

EngineConfig Config(uint32_t lane_depth, uint64_t lane_bytes) {
  EngineConfig config;
  config.slice_size = kSlice;
  config.lane_depth = lane_depth;
  config.priorities.lane_bytes = lane_bytes;
  return config;
}

engine::TransferSpec Classed(engine::TransferSpec spec, Priority priority) {
  spec.priority = priority;
  return spec;
}

// Ops of the posted log whose destination starts inside [from, to).
bool Into(const PostedOp& op, uint64_t from, uint64_t to) {
  return !op.blocks.empty() && op.blocks[0].remote_offset >= from &&
         op.blocks[0].remote_offset < to;
}

// How many of the ops `fake` has posted so far go Into [from, to).
uint64_t PostedInto(const FakeTransport& fake, uint64_t from, uint64_t to) {
  const std::vector<PostedOp> posted = fake.posted();
  return static_cast<uint64_t>(std::count_if(
      posted.begin(), posted.end(), [&](const PostedOp& op) { return Into(op, from, to); }));
}

class LaneBytesTest : public TwoEngineTest {
 protected:
  LaneBytesTest() : TwoEngineTest(Config(64, 2 * kSlice)) {}
};

// A bulk transfer queued first holds at most lane_bytes on each lane when a
// critical one arrives: the critical one's ops go next and it ends first.
TEST_F(LaneBytesTest, ACriticalTransferOvertakesAQueuedBulkOne) {
  Fill(*src_, 5);
  FakeTransport& fake = *a_->transport;
  fake.HoldCompletions(true);
  constexpr uint64_t kBulk = 512 << 10, kCritical = 64 << 10;
  auto bulk = h_.Submit(*a_, {Classed(Spec("src", "b", "dst", kBulk), Priority::kBulk)});
  ASSERT_TRUE(bulk.ok()) << bulk.status();
  ASSERT_TRUE(WaitUntil([&] { return fake.posted().size() >= 2; }));
  auto critical = h_.Submit(
      *a_, {Classed(Spec("src", "b", "dst", kCritical, kBulk, kBulk), Priority::kCritical)});
  ASSERT_TRUE(critical.ok()) << critical.status();
  const uint64_t critical_ops = kCritical / kSlice;
  ASSERT_TRUE(WaitUntil([&] {
    // every bulk op of it (the final waits for them)
    return PostedInto(fake, kBulk, kBulk + kCritical) + 1 >= critical_ops;
  })) << "the critical transfer's ops did not reach the lanes past the held bulk ones";
  // Meanwhile the bulk transfer stayed within lane_bytes on each of 2 lanes.
  EXPECT_LE(PostedInto(fake, 0, kBulk), 2 * 2u) << "bulk ops went past lane_bytes";

  fake.HoldCompletions(false);
  const engine::TransferInfo c = h_.Wait((*critical)[0]);
  const engine::TransferInfo b = h_.Wait((*bulk)[0]);
  ASSERT_EQ(c.state, TransferState::kDone);
  ASSERT_EQ(b.state, TransferState::kDone);
  EXPECT_EQ(c.spec.priority, Priority::kCritical);
  EXPECT_NE(c.started_at, absl::InfinitePast());
  EXPECT_EQ(std::memcmp(src_->data(), dst_->data(), kBulk), 0);
  EXPECT_EQ(std::memcmp(src_->data(), dst_->data() + kBulk, kCritical), 0);

  const engine::TransferCounters counters = a_->engine->Stats().transfers;
  const engine::PriorityCounters& cc = counters.by_priority[PriorityIndex(Priority::kCritical)];
  const engine::PriorityCounters& bc = counters.by_priority[PriorityIndex(Priority::kBulk)];
  EXPECT_EQ(cc.submitted, 1u);
  EXPECT_EQ(cc.done, 1u);
  EXPECT_EQ(cc.bytes, kCritical);
  EXPECT_EQ(cc.started, 1u);
  EXPECT_EQ(bc.done, 1u);
  EXPECT_EQ(bc.bytes, kBulk);
  EXPECT_EQ(counters.by_priority[PriorityIndex(Priority::kNormal)].submitted, 0u);
}

EngineConfig OnePoller(uint32_t lane_depth, uint64_t lane_bytes) {
  EngineConfig config = Config(lane_depth, lane_bytes);
  config.pollers = 1;
  return config;
}

class OneLaneTest : public TwoEngineTest {
 protected:
  OneLaneTest() : TwoEngineTest(OnePoller(64, 2 * kSlice)) {}
};

// A critical burst's bytes count against lane_bytes too: a bulk transfer
// that comes while the lane holds them keeps one op on the lane (none
// starves), not the two lane_bytes would allow it alone, and the rest waits
// until the burst has drained.
TEST_F(OneLaneTest, BulkKeepsOneOpOnALaneACriticalBurstFills) {
  Fill(*src_, 7);
  FakeTransport& fake = *a_->transport;
  fake.HoldCompletions(true);
  constexpr uint64_t kCritical = 4 * kSlice, kBulk = 64 << 10;
  auto critical =
      h_.Submit(*a_, {Classed(Spec("src", "b", "dst", kCritical), Priority::kCritical)});
  ASSERT_TRUE(critical.ok()) << critical.status();
  ASSERT_TRUE(WaitUntil([&] { return PostedInto(fake, 0, kCritical) + 1 >= kCritical / kSlice; }));
  auto bulk = h_.Submit(
      *a_, {Classed(Spec("src", "b", "dst", kBulk, kCritical, kCritical), Priority::kBulk)});
  ASSERT_TRUE(bulk.ok()) << bulk.status();
  ASSERT_TRUE(WaitUntil([&] { return PostedInto(fake, kCritical, kCritical + kBulk) >= 1; }))
      << "the bulk transfer got no op onto a lane the critical one filled";
  // A second critical transfer, taken on a later pass than the bulk op's:
  // once its op is posted, the bulk one has had its chance to post more.
  constexpr uint64_t kSecond = kCritical + kBulk;
  auto second = h_.Submit(
      *a_, {Classed(Spec("src", "b", "dst", 2 * kSlice, kSecond, kSecond), Priority::kCritical)});
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(WaitUntil([&] { return PostedInto(fake, kSecond, kSecond + 2 * kSlice) >= 1; }));
  EXPECT_EQ(PostedInto(fake, kCritical, kCritical + kBulk), 1u)
      << "bulk ops joined a lane holding a critical burst past lane_bytes";

  fake.HoldCompletions(false);
  for (const auto* ids : {&*critical, &*bulk, &*second}) {
    ASSERT_EQ(h_.Wait((*ids)[0]).state, TransferState::kDone);
  }
  EXPECT_EQ(std::memcmp(src_->data(), dst_->data(), kSecond + 2 * kSlice), 0);
}

class ShallowLanesTest : public TwoEngineTest {
 protected:
  ShallowLanesTest() : TwoEngineTest(Config(4, 2 * kSlice)) {}
};

// Critical ops never take a lane's last credit: a background read moves on
// while critical reads keep every other credit busy, and ends long before
// them. All reads: no final op waits for the others, so the classes meet
// only at the lanes' credits. Each has a destination of its own: copies
// racing into the same bytes would be a race of the test.
TEST_F(ShallowLanesTest, BackgroundProgressesUnderContinuousCriticalLoad) {
  memory::RegionSpec readable;
  readable.name = "readable";
  readable.size = 1 << 20;
  readable.access.remote_read = true;
  auto peer_src = h_.Register(*b_, readable);
  ASSERT_TRUE(peer_src.ok()) << peer_src.status();
  Fill(**peer_src, 6);
  FakeTransport& fake = *a_->transport;
  constexpr uint64_t kEach = 64 << 10;  // 16 slices
  constexpr int kCriticals = 15;        // 240 slices, behind which 16 would starve
  fake.HoldCompletions(true);           // all of it queued before anything moves
  std::vector<engine::TransferSpec> criticals;
  for (int i = 1; i <= kCriticals; ++i) {
    engine::TransferSpec read = Spec("readable", "b", "src", kEach, i * kEach, i * kEach);
    read.direction = transport::OpKind::kRead;
    criticals.push_back(Classed(read, Priority::kCritical));
  }
  auto critical = h_.Submit(*a_, criticals, /*batch=*/true);
  ASSERT_TRUE(critical.ok()) << critical.status();
  engine::TransferSpec back = Spec("readable", "b", "src", kEach);
  back.direction = transport::OpKind::kRead;
  auto background = h_.Submit(*a_, {Classed(back, Priority::kBackground)});
  ASSERT_TRUE(background.ok()) << background.status();
  fake.HoldCompletions(false);

  ASSERT_EQ(h_.Wait((*background)[0]).state, TransferState::kDone);
  for (const auto& t : *critical) ASSERT_EQ(h_.Wait(t).state, TransferState::kDone);
  // In the order ops reached the lanes: the background read's 16 among the
  // first of the 256, not after the critical ones' 240.
  const std::vector<PostedOp> posted = fake.posted();
  size_t last_critical = 0;
  for (size_t i = 0; i < posted.size(); ++i) {
    if (!Into(posted[i], 0, kEach)) last_critical = i;
  }
  uint64_t background_before = 0;
  for (size_t i = 0; i < last_critical; ++i) background_before += Into(posted[i], 0, kEach) ? 1 : 0;
  // All 16 but for a poller descheduled at the wrong moment (seen: 15 of 16
  // once in 40 runs); starved, it gets none or one through.
  EXPECT_GE(background_before, 12u)
      << "the background read waited for the critical ones: " << background_before << " of 16";
  EXPECT_EQ(std::memcmp((*peer_src)->data(), src_->data(), (kCriticals + 1) * kEach), 0);
}

class OneSliceLanesTest : public TwoEngineTest {
 protected:
  OneSliceLanesTest() : TwoEngineTest(Config(64, 2 * kSlice)) {}
};

// Normal (weight 8) and background (weight 1) both waiting on the same
// lanes: while both have ops left, a lane takes 8 of normal's per one of
// background's.
TEST_F(OneSliceLanesTest, ClassesShareALaneByWeight) {
  Fill(*src_, 7);
  FakeTransport& fake = *a_->transport;
  constexpr uint64_t kEach = 512 << 10;
  fake.HoldCompletions(true);
  auto ts = h_.Submit(*a_,
                      {Classed(Spec("src", "b", "dst", kEach, 0, 0), Priority::kBackground),
                       Classed(Spec("src", "b", "dst", kEach, 0, kEach), Priority::kNormal)},
                      /*batch=*/true);
  ASSERT_TRUE(ts.ok()) << ts.status();
  fake.HoldCompletions(false);
  for (const auto& t : *ts) ASSERT_EQ(h_.Wait(t).state, TransferState::kDone);
  EXPECT_EQ(std::memcmp(src_->data(), dst_->data(), kEach), 0);
  EXPECT_EQ(std::memcmp(src_->data(), dst_->data() + kEach, kEach), 0);

  // From normal's first op (the one that reached its pollers first posts
  // alone until the other arrives) while normal had many ops left (its
  // final one waits for the others to complete): both were waiting.
  const std::vector<PostedOp> posted = fake.posted();
  uint64_t normal = 0, background = 0;
  for (size_t i = 0; i < posted.size() && normal < 100; ++i) {
    normal += Into(posted[i], kEach, 2 * kEach) ? 1 : 0;
    background += normal > 0 && Into(posted[i], 0, kEach) ? 1 : 0;
  }
  ASSERT_GT(background, 0u) << "background starved";
  const double ratio = static_cast<double>(normal) / static_cast<double>(background);
  EXPECT_GT(ratio, 8 * 0.75) << normal << " normal ops to " << background << " background";
  EXPECT_LT(ratio, 8 * 1.25) << normal << " normal ops to " << background << " background";
}

EngineConfig FourInFlight() {
  EngineConfig config;
  config.max_inflight_transfers = 4;
  config.priorities.critical_reserve = 2;
  return config;
}

class CriticalReserveTest : public TwoEngineTest {
 protected:
  CriticalReserveTest() : TwoEngineTest(FourInFlight()) {}
};

TEST_F(CriticalReserveTest, OnlyCriticalTransfersTakeTheReserve) {
  Fill(*src_, 8);
  FakeTransport& fake = *a_->transport;
  fake.HoldCompletions(true);
  std::vector<std::shared_ptr<engine::Transfer>> admitted;
  uint64_t next = 0;  // each its own bytes (copies racing into the same ones: a test race)
  auto submit = [&](Priority p) {
    const uint64_t at = 4096 * next++;
    auto t = h_.Submit(*a_, {Classed(Spec("src", "b", "dst", 4096, at, at), p)});
    if (t.ok()) admitted.push_back((*t)[0]);
    return t.status();
  };
  EXPECT_TRUE(submit(Priority::kBulk).ok());
  EXPECT_TRUE(submit(Priority::kNormal).ok());
  const absl::Status refused = submit(Priority::kBackground);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("2 of 2 below critical priority"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("priorities.critical_reserve=2"), std::string::npos) << refused;
  EXPECT_TRUE(submit(Priority::kCritical).ok());
  EXPECT_TRUE(submit(Priority::kCritical).ok());
  const absl::Status full = submit(Priority::kCritical);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_NE(full.message().find("engine.max_inflight_transfers=4"), std::string::npos) << full;

  const engine::TransferCounters counters = a_->engine->Stats().transfers;
  EXPECT_EQ(counters.by_priority[PriorityIndex(Priority::kBackground)].refused, 1u);
  EXPECT_EQ(counters.by_priority[PriorityIndex(Priority::kCritical)].refused, 1u);
  EXPECT_EQ(counters.by_priority[PriorityIndex(Priority::kCritical)].in_flight, 2u);
  fake.HoldCompletions(false);
  for (const auto& t : admitted) {
    EXPECT_EQ(h_.Wait(t).state, TransferState::kDone);
    const uint64_t at = t->plan().spec.dst_offset;
    EXPECT_EQ(std::memcmp(src_->data() + at, dst_->data() + at, 4096), 0);
  }
}

}  // namespace
}  // namespace xferd::testing
