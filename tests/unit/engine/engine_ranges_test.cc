// The ranges of many-block transfers for regions with landed_ranges: a
// write's destination ranges staged on the receiver before its ops and
// attached to its landed event; a read's from its own plan; nothing for
// regions that did not ask.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "tests/unit/engine/engine_harness.h"

namespace xferd::testing {
namespace {

using engine::BlockSpec;
using engine::TransferState;
using transport::OpKind;

constexpr uint64_t kRegion = 1 << 20;
constexpr uint64_t kBlock = 4096;
constexpr uint64_t kBlocks = kRegion / kBlock;

// The request's destination blocks by offset, those side by side merged.
Ranges Expected(std::vector<uint64_t> dst_offsets, uint64_t length) {
  std::sort(dst_offsets.begin(), dst_offsets.end());
  Ranges out;
  for (uint64_t d : dst_offsets) {
    if (!out.empty() && out.back().first + out.back().second == d) {
      out.back().second += length;
    } else {
      out.emplace_back(d, length);
    }
  }
  return out;
}

class EngineRangesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = &h_.Add("a");
    b_ = &h_.Add("b");
    ASSERT_TRUE(h_.Connect(*a_, *b_).ok());
  }

  std::shared_ptr<memory::Region> Region(Node& node, const std::string& name, bool ranges) {
    memory::RegionSpec spec;
    spec.name = name;
    spec.size = kRegion;
    spec.access.remote_write = true;
    spec.access.remote_read = true;
    spec.landed_ranges = ranges;
    return *h_.Register(node, spec);
  }

  // Blocks of 4 KiB: block i of src goes to dst block perm[i].
  engine::TransferSpec Blocks(OpKind direction, const std::string& src, const std::string& dst,
                           const std::vector<uint64_t>& perm) {
    engine::TransferSpec w;
    w.direction = direction;
    w.peer = "b";
    w.src_region = src;
    w.dst_region = dst;
    w.blocks.form = BlockSpec::Form::kList;
    w.blocks.block_length = kBlock;
    for (uint64_t i = 0; i < perm.size(); ++i) {
      w.blocks.src_offsets.push_back(i * kBlock);
      w.blocks.dst_offsets.push_back(perm[i] * kBlock);
    }
    return w;
  }

  // A permutation with runs: pairs of neighbours, shuffled.
  static std::vector<uint64_t> Perm() {
    std::vector<uint64_t> pairs(kBlocks / 2);
    std::iota(pairs.begin(), pairs.end(), 0);
    std::shuffle(pairs.begin(), pairs.end(), std::mt19937_64(7));
    std::vector<uint64_t> perm;
    for (uint64_t p : pairs) {
      perm.push_back(2 * p);
      perm.push_back(2 * p + 1);
    }
    return perm;
  }

  memory::LandedEvent Run(const engine::TransferSpec& w, memory::Region& watched,
                          const memory::Region& src, const memory::Region& dst,
                          const std::vector<uint64_t>& perm) {
    LandedRecorder watcher(watched);
    auto submitted = h_.Submit(*a_, {w});
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    if (!submitted.ok()) return {};
    const engine::TransferInfo info = h_.Wait((*submitted)[0]);
    EXPECT_EQ(info.state, TransferState::kDone) << info.error;
    for (uint64_t i = 0; i < perm.size(); ++i) {
      EXPECT_EQ(std::memcmp(src.data() + i * kBlock, dst.data() + perm[i] * kBlock, kBlock), 0)
          << "block " << i;
    }
    std::vector<memory::LandedEvent> events = watcher.Take();
    EXPECT_EQ(events.size(), 1u);
    return events.empty() ? memory::LandedEvent{} : events[0];
  }

  EngineHarness h_{[] {
    EngineConfig config;
    config.pollers = 2;
    config.slice_size = 64 << 10;
    return config;
  }()};
  Node* a_ = nullptr;
  Node* b_ = nullptr;
};

TEST_F(EngineRangesTest, AWritesRangesReachTheReceiversEvent) {
  auto src = Region(*a_, "src", false);
  auto dst = Region(*b_, "dst", true);
  Fill(*src, 1);
  const std::vector<uint64_t> perm = Perm();
  const memory::LandedEvent e =
      Run(Blocks(OpKind::kWrite, "src", "dst", perm), *dst, *src, *dst, perm);
  EXPECT_EQ(e.blocks, kBlocks);
  ASSERT_NE(e.ranges, nullptr);
  EXPECT_FALSE(e.ranges_missing);
  std::vector<uint64_t> dst_offsets;
  for (uint64_t p : perm) dst_offsets.push_back(p * kBlock);
  const Ranges ranges = UnpackRanges(*e.ranges);
  EXPECT_EQ(ranges, Expected(dst_offsets, kBlock));
  // Shuffled, the blocks still cover the whole region: one range.
  EXPECT_EQ(ranges, (Ranges{{0, kRegion}}));
  // Held by the ring now, nothing left staged.
  EXPECT_EQ(dst->landed().range_bytes(), e.ranges->bytes());
}

TEST_F(EngineRangesTest, ARangeLongerThanASliceIsOneRange) {
  auto src = Region(*a_, "src", false);
  auto dst = Region(*b_, "dst", true);
  Fill(*src, 2);
  engine::TransferSpec w = Blocks(OpKind::kWrite, "src", "dst", {});
  w.blocks.form = BlockSpec::Form::kStrided;
  // Two runs of 4 blocks of 64 KiB: one contiguous 256 KiB range each,
  // planned as 4 slices each.
  w.blocks.runs = {{0, 512 << 10, 64 << 10, 64 << 10, 64 << 10, 4},
                   {256 << 10, 0, 64 << 10, 64 << 10, 64 << 10, 4}};
  LandedRecorder watcher(*dst);
  auto submitted = h_.Submit(*a_, {w});
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_EQ(h_.Wait((*submitted)[0]).state, TransferState::kDone);
  EXPECT_EQ(std::memcmp(src->data(), dst->data() + (512 << 10), 256 << 10), 0);
  EXPECT_EQ(std::memcmp(src->data() + (256 << 10), dst->data(), 256 << 10), 0);
  std::vector<memory::LandedEvent> events = watcher.Take();
  ASSERT_EQ(events.size(), 1u);
  ASSERT_NE(events[0].ranges, nullptr);
  EXPECT_EQ(UnpackRanges(*events[0].ranges), (Ranges{{0, 256 << 10}, {512 << 10, 256 << 10}}));
}

TEST_F(EngineRangesTest, AReadsRangesComeFromItsOwnPlan) {
  auto src = Region(*b_, "src", false);
  auto dst = Region(*a_, "dst", true);
  Fill(*src, 3);
  const std::vector<uint64_t> perm = Perm();
  const memory::LandedEvent e =
      Run(Blocks(OpKind::kRead, "src", "dst", perm), *dst, *src, *dst, perm);
  EXPECT_TRUE(e.read);
  ASSERT_NE(e.ranges, nullptr);
  std::vector<uint64_t> dst_offsets;
  for (uint64_t p : perm) dst_offsets.push_back(p * kBlock);
  EXPECT_EQ(UnpackRanges(*e.ranges), Expected(dst_offsets, kBlock));
  EXPECT_EQ(UnpackRanges(*e.ranges), (Ranges{{0, kRegion}}));
}

TEST_F(EngineRangesTest, RegionsThatDidNotAskGetAndHoldNothing) {
  auto src = Region(*a_, "src", false);
  auto dst = Region(*b_, "dst", false);
  Fill(*src, 4);
  const std::vector<uint64_t> perm = Perm();
  const memory::LandedEvent e =
      Run(Blocks(OpKind::kWrite, "src", "dst", perm), *dst, *src, *dst, perm);
  EXPECT_EQ(e.blocks, kBlocks);
  EXPECT_EQ(e.ranges, nullptr);
  EXPECT_FALSE(e.ranges_missing);
  EXPECT_EQ(dst->landed().range_bytes(), 0u);
  // And such a region refuses ranges sent to it anyway.
  engine::StagedRanges staged;
  staged.region_id = dst->id();
  staged.region = "dst";
  staged.transfer_id = 99;
  staged.offsets = staged.lengths = std::string(8, '\0');
  EXPECT_EQ(b_->engine->OnStageRanges("a", a_->engine->self().incarnation, staged).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(EngineRangesTest, StagingChecksTheCallerAndTheRegion) {
  auto dst = Region(*b_, "dst", true);
  engine::StagedRanges staged;
  staged.region_id = dst->id();
  staged.region = "dst";
  staged.transfer_id = 1;
  staged.offsets = staged.lengths = std::string(8, '\0');
  const uint64_t incarnation = a_->engine->self().incarnation;
  EXPECT_EQ(b_->engine->OnStageRanges("nobody", incarnation, staged).code(),
            absl::StatusCode::kFailedPrecondition);
  staged.region_id += 1;  // a region of that name, but not the one resolved
  EXPECT_EQ(b_->engine->OnStageRanges("a", incarnation, staged).code(),
            absl::StatusCode::kNotFound);
  staged.region_id -= 1;
  EXPECT_TRUE(b_->engine->OnStageRanges("a", incarnation, staged).ok());
  EXPECT_EQ(dst->landed().range_bytes(), 16u);
}

}  // namespace
}  // namespace xferd::testing
