// Many-block writes and reads through the engine over the fake transport:
// every byte checked, refusals move nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "tests/unit/engine/engine_harness.h"

namespace xferd::testing {
namespace {

using engine::BlockSpec;
using engine::TransferState;
using transport::OpKind;

constexpr uint64_t kRegion = 4 << 20;
constexpr uint64_t kBlock = 4096;
constexpr uint64_t kBlocks = kRegion / kBlock;

class EngineBlocksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = &h_.Add("a");
    b_ = &h_.Add("b");
    local_ = Region(*a_, "local", false);
    remote_ = Region(*b_, "remote", true);
    ASSERT_TRUE(h_.Connect(*a_, *b_).ok());
  }

  std::shared_ptr<memory::Region> Region(Node& node, const std::string& name, bool remote) {
    memory::RegionSpec spec;
    spec.name = name;
    spec.size = kRegion;
    spec.access.remote_write = remote;
    spec.access.remote_read = remote;
    return *h_.Register(node, spec);
  }

  // A write (or read) of every 4 KiB block of one region to a random
  // permutation of the other's.
  engine::TransferSpec Permuted(OpKind direction, std::vector<uint64_t>* dst_block) {
    dst_block->resize(kBlocks);
    std::iota(dst_block->begin(), dst_block->end(), 0);
    std::shuffle(dst_block->begin(), dst_block->end(), std::mt19937_64(42));
    engine::TransferSpec w;
    w.direction = direction;
    w.peer = "b";
    w.src_region = direction == OpKind::kWrite ? "local" : "remote";
    w.dst_region = direction == OpKind::kWrite ? "remote" : "local";
    w.blocks.form = BlockSpec::Form::kList;
    w.blocks.block_length = kBlock;
    for (uint64_t i = 0; i < kBlocks; ++i) {
      w.blocks.src_offsets.push_back(i * kBlock);
      w.blocks.dst_offsets.push_back((*dst_block)[i] * kBlock);
    }
    return w;
  }

  static void ExpectPermuted(const memory::Region& src, const memory::Region& dst,
                             const std::vector<uint64_t>& dst_block) {
    for (uint64_t i = 0; i < kBlocks; ++i) {
      ASSERT_EQ(std::memcmp(src.data() + i * kBlock, dst.data() + dst_block[i] * kBlock, kBlock), 0)
          << "block " << i;
    }
  }

  static bool AllZero(const memory::Region& r) {
    return std::all_of(r.data(), r.data() + r.size(),
                       [](std::byte b) { return b == std::byte{0}; });
  }

  EngineHarness h_{[] {
    EngineConfig config;
    config.pollers = 2;
    config.slice_size = 1 << 20;
    config.lane_depth = 4;
    return config;
  }()};
  Node* a_ = nullptr;
  Node* b_ = nullptr;
  std::shared_ptr<memory::Region> local_, remote_;
};

TEST_F(EngineBlocksTest, PermutedWriteLandsEveryByteWithOneEvent) {
  Fill(*local_, 3);
  LandedRecorder watcher(*remote_);
  std::vector<uint64_t> perm;
  auto submitted = h_.Submit(*a_, {Permuted(OpKind::kWrite, &perm)});
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const engine::TransferInfo info = h_.Wait((*submitted)[0]);
  ASSERT_EQ(info.state, TransferState::kDone) << info.error;
  EXPECT_EQ(info.spec.request_blocks, kBlocks);
  EXPECT_EQ(info.spec.length, kRegion);
  EXPECT_EQ(info.bytes_done, kRegion);
  EXPECT_EQ(info.slices, kBlocks / transport::kMaxBlocksPerOp);
  ExpectPermuted(*local_, *remote_, perm);
  const std::vector<memory::LandedEvent> events = watcher.Take();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].blocks, kBlocks);
  EXPECT_EQ(events[0].bytes, kRegion);
  EXPECT_EQ(events[0].offset, 0u);
  EXPECT_EQ(events[0].length, kRegion);
  EXPECT_FALSE(events[0].read);
}

// A finished transfer lets go of its plan (24 bytes a block) by itself, even
// when no later transfer ends to sweep the table, once nobody holds it.
TEST_F(EngineBlocksTest, FinishedTransferReleasesItsPlanWhenIdle) {
  Fill(*local_, 4);
  std::vector<uint64_t> perm;
  auto submitted = h_.Submit(*a_, {Permuted(OpKind::kWrite, &perm)});
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_EQ(h_.Wait((*submitted)[0]).state, TransferState::kDone);
  const uint64_t id = (*submitted)[0]->id();
  std::weak_ptr<engine::Transfer> weak = (*submitted)[0];
  submitted->clear();
  EXPECT_TRUE(WaitUntil([&] { return weak.expired(); }))
      << "the transfer (and its block plan) is still held";
  const absl::StatusOr<engine::TransferInfo> info = a_->engine->GetTransfer(id);
  ASSERT_TRUE(info.ok()) << "its snapshot stays in the history: " << info.status();
  EXPECT_EQ(info->state, TransferState::kDone);
  ExpectPermuted(*local_, *remote_, perm);
}

TEST_F(EngineBlocksTest, PermutedReadPlacesEveryByteAndRaisesALocalEvent) {
  Fill(*remote_, 5);
  LandedRecorder watcher(*local_);
  std::vector<uint64_t> perm;
  auto submitted = h_.Submit(*a_, {Permuted(OpKind::kRead, &perm)});
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const engine::TransferInfo info = h_.Wait((*submitted)[0]);
  ASSERT_EQ(info.state, TransferState::kDone) << info.error;
  EXPECT_EQ(info.bytes_done, kRegion);
  ExpectPermuted(*remote_, *local_, perm);
  const std::vector<memory::LandedEvent> events = watcher.Take();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].read);
  EXPECT_EQ(events[0].source_node, "b");
  EXPECT_EQ(events[0].blocks, kBlocks);
  EXPECT_EQ(events[0].bytes, kRegion);
}

TEST_F(EngineBlocksTest, OutOfRangeBlockMovesNothing) {
  Fill(*local_, 3);
  std::vector<uint64_t> perm;
  engine::TransferSpec w = Permuted(OpKind::kWrite, &perm);
  w.blocks.dst_offsets[731] = kRegion - 10;
  auto submitted = h_.Submit(*a_, {w});
  EXPECT_EQ(submitted.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(submitted.status().message(),
            "block #731: destination range [4194294, 4194294+4096) exceeds region 'remote' on "
            "peer 'b' of 4194304 bytes");
  EXPECT_TRUE(AllZero(*remote_));
  // Refusals are counted by code, and start no transfer.
  w.peer = "nobody";
  EXPECT_EQ(h_.Submit(*a_, {w}).status().code(), absl::StatusCode::kNotFound);
  const engine::TransferCounters counters = a_->engine->Stats().transfers;
  EXPECT_EQ(counters.refused, (std::map<std::string, uint64_t>{{"OUT_OF_RANGE", 1},
                                                               {"NOT_FOUND", 1}}));
  EXPECT_EQ(counters.submitted, 0u);
}

TEST_F(EngineBlocksTest, ReadWithoutRemoteReadIsDenied) {
  memory::RegionSpec spec;
  spec.name = "private";
  spec.size = kRegion;
  spec.access.remote_write = true;
  Fill(**h_.Register(*b_, spec), 9);
  std::vector<uint64_t> perm;
  engine::TransferSpec w = Permuted(OpKind::kRead, &perm);
  w.src_region = "private";
  auto submitted = h_.Submit(*a_, {w});
  EXPECT_EQ(submitted.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(submitted.status().message(),
            "region 'private' on peer 'b' does not allow remote reads: register it there with "
            "remote_read");
  EXPECT_TRUE(AllZero(*local_));
}

TEST_F(EngineBlocksTest, PreparedLayoutsWriteAndReadPages) {
  Fill(*local_, 11);
  engine::Layout pages;
  pages.name = "pages";
  pages.region = "local";
  pages.block_length = kBlock;
  pages.count = kBlocks;
  pages.stride = kBlock;
  ASSERT_TRUE(a_->engine->PrepareLayout(pages, a_->engine->tenants().Default()).ok());
  engine::Layout remote_pages = pages;
  remote_pages.name = "remote-pages";
  remote_pages.region = "remote";
  remote_pages.peer = "b";
  ASSERT_TRUE(a_->engine->PrepareLayout(remote_pages, a_->engine->tenants().Default()).ok());
  EXPECT_EQ(a_->engine->PrepareLayout(pages, a_->engine->tenants().Default()).status().code(),
            absl::StatusCode::kAlreadyExists);

  engine::TransferSpec w;
  w.peer = "b";
  w.blocks.form = BlockSpec::Form::kLayout;
  w.blocks.src_layout = "pages";
  w.blocks.dst_layout = "remote-pages";
  w.blocks.src_indices = {1, 2, 7};
  w.blocks.dst_indices = {900, 3, 4};
  auto written = h_.Submit(*a_, {w});
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_EQ(h_.Wait((*written)[0]).state, TransferState::kDone);
  EXPECT_EQ(std::memcmp(local_->data() + kBlock, remote_->data() + 900 * kBlock, kBlock), 0);
  EXPECT_EQ(std::memcmp(local_->data() + 7 * kBlock, remote_->data() + 4 * kBlock, kBlock), 0);

  // Read page 900 back into local page 0.
  engine::TransferSpec r;
  r.direction = OpKind::kRead;
  r.peer = "b";
  r.blocks.form = BlockSpec::Form::kLayout;
  r.blocks.src_layout = "remote-pages";
  r.blocks.dst_layout = "pages";
  r.blocks.src_indices = {900};
  r.blocks.dst_indices = {0};
  auto read = h_.Submit(*a_, {r});
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(h_.Wait((*read)[0]).state, TransferState::kDone);
  EXPECT_EQ(std::memcmp(local_->data(), local_->data() + kBlock, kBlock), 0);

  // A layout of the wrong side is refused; a local layout is checked now.
  w.blocks.dst_layout = "pages";
  EXPECT_EQ(h_.Submit(*a_, {w}).status().code(), absl::StatusCode::kInvalidArgument);
  pages.name = "too-far";
  pages.start = 1;
  EXPECT_EQ(a_->engine->PrepareLayout(pages, a_->engine->tenants().Default()).status().message(),
            "layout 'too-far' block #1023: range [4190209, 4190209+4096) exceeds region 'local' "
            "of 4194304 bytes");
  EXPECT_TRUE(a_->engine->DeleteLayout("pages", a_->engine->tenants().Default()).ok());
  EXPECT_EQ(a_->engine->ListLayouts().size(), 1u);
}

}  // namespace
}  // namespace xferd::testing
