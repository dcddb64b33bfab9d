#include "daemon/engine/block_plan.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace xferd::transport {
bool operator==(const Block& a, const Block& b) {
  return a.local_offset == b.local_offset && a.remote_offset == b.remote_offset &&
         a.length == b.length;
}
}  // namespace xferd::transport

namespace xferd::engine {
namespace {

using transport::Block;

const RegionSide kSrc{"src", "", 1 << 20};
const RegionSide kDst{"dst", "b", 1 << 20};

BlockSpec List(std::vector<uint64_t> src, std::vector<uint64_t> dst, uint64_t block_length) {
  BlockSpec s;
  s.form = BlockSpec::Form::kList;
  s.src_offsets = std::move(src);
  s.dst_offsets = std::move(dst);
  s.block_length = block_length;
  return s;
}

absl::StatusOr<std::vector<Block>> Plan(const BlockSpec& s, uint32_t slice = 65536) {
  return PlanBlocks(s, kSrc, kDst, /*src_is_local=*/true, slice);
}

TEST(BlockPlanTest, MergesBlocksContiguousOnBothSidesOnly) {
  // 0->100 and 10->110 are contiguous on both sides; 20->200 is not.
  auto blocks = Plan(List({0, 10, 20, 30}, {100, 110, 200, 210}, 10));
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_EQ(*blocks, (std::vector<Block>{{0, 100, 20}, {20, 200, 20}}));
}

TEST(BlockPlanTest, SplitsMergedRunsAtTheSlice) {
  BlockSpec s;
  s.form = BlockSpec::Form::kStrided;
  s.runs = {StridedRun{0, 4096, 4096, 4096, 4096, 5}};  // 20 KiB, contiguous
  auto blocks = Plan(s, 8192);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_EQ(*blocks,
            (std::vector<Block>{{0, 4096, 8192}, {8192, 12288, 8192}, {16384, 20480, 4096}}));
}

TEST(BlockPlanTest, ReadsPutTheDestinationOnTheLocalSide) {
  auto blocks = PlanBlocks(List({4096}, {0}, 100), kDst, kSrc, /*src_is_local=*/false, 65536);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_EQ(*blocks, (std::vector<Block>{{0, 4096, 100}}));
}

TEST(BlockPlanTest, OutOfRangeNamesTheBlockTheRegionAndThePeer) {
  std::vector<uint64_t> src(1000), dst(1000);
  for (uint64_t i = 0; i < 1000; ++i) src[i] = dst[i] = i * 1024;
  dst[731] = (1 << 20) - 100;
  auto blocks = Plan(List(src, dst, 1024));
  EXPECT_EQ(blocks.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(blocks.status().message(),
            "block #731: destination range [1048476, 1048476+1024) exceeds region 'dst' on peer "
            "'b' of 1048576 bytes");
  src[731] = 1 << 20;
  blocks = Plan(List(src, dst, 1024));
  EXPECT_EQ(blocks.status().message(),
            "block #731: source range [1048576, 1048576+1024) exceeds region 'src' of 1048576 "
            "bytes");
}

TEST(BlockPlanTest, ZeroLengthBlockIsRefused) {
  BlockSpec s = List({0, 10}, {0, 10}, 0);
  s.lengths = {10, 0};
  auto blocks = Plan(s);
  EXPECT_EQ(blocks.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(blocks.status().message(),
            "block #1: length is 0: every block must be at least 1 byte");
}

TEST(BlockPlanTest, OverlappingDestinationsNameBothBlocks) {
  // Unsorted, so the sorted-index path finds it.
  auto blocks = Plan(List({0, 8192, 4096}, {8192, 0, 4000}, 4096));
  EXPECT_EQ(blocks.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(blocks.status().message(),
            "blocks #1 and #2: destination ranges [0, 0+4096) and [4000, 4000+4096) overlap: "
            "every destination byte may be written by one block only");
  // Sorted: the single pass finds it.
  blocks = Plan(List({0, 4096}, {0, 10}, 4096));
  EXPECT_EQ(blocks.status().message(),
            "blocks #0 and #1: destination ranges [0, 0+4096) and [10, 10+4096) overlap: every "
            "destination byte may be written by one block only");
  // Sources may overlap: they are only read.
  EXPECT_TRUE(Plan(List({0, 0}, {0, 4096}, 4096)).ok());
}

TEST(BlockPlanTest, ShapeErrorsSayWhatToFix) {
  EXPECT_EQ(Plan(List({0, 1}, {0}, 1)).status().message(),
            "blocks.list: 2 src_offsets but 1 dst_offsets: give one of each per block");
  EXPECT_EQ(Plan(List({}, {}, 1)).status().message(),
            "no blocks given: a request needs at least 1");
  BlockSpec s;
  s.form = BlockSpec::Form::kStrided;
  s.runs = {StridedRun{0, 0, 1, 1, 1, kMaxRequestBlocks + 1}};
  EXPECT_EQ(Plan(s).status().message(), "4194305 blocks in one request; at most 4194304: split it");
}

TEST(BlockPlanTest, PiecesPerTransferAreBoundedBeforeAllocating) {
  // One block of a 1 TiB region at a 4 KiB slice would be 2^28 pieces (6 GiB
  // of plan): refused with the slice that would fit.
  const RegionSide huge_src{"src", "", 1ull << 40};
  const RegionSide huge_dst{"dst", "b", 1ull << 40};
  auto blocks = PlanBlocks(List({4096, 0}, {0, 1ull << 39}, 1ull << 39), huge_src, huge_dst,
                           /*src_is_local=*/true, 4096);
  EXPECT_EQ(blocks.status().message(),
            "block #0: 549755813888 bytes at slice_size 4096 would be cut into more than 4194304 "
            "pieces per transfer: set slice_size to at least 131072 or split it into several "
            "transfers");
  // The budget counts what earlier runs planned: the second block overflows it.
  // (2^21 pieces each: two fill it exactly).
  blocks = PlanBlocks(List({0, 1ull << 36}, {0, 1ull << 36}, 1ull << 34), huge_src, huge_dst,
                      /*src_is_local=*/true, 8192);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_EQ(blocks->size(), kMaxPlannedBlocks);
  blocks = PlanBlocks(List({0, 1ull << 36, 1ull << 37}, {0, 1ull << 36, 1ull << 37}, 1ull << 34),
                      huge_src, huge_dst, /*src_is_local=*/true, 8192);
  EXPECT_EQ(blocks.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(blocks.status().message(), "block #2: ")) << blocks.status();
  // Exactly at the bound plans.
  std::vector<Block> out;
  EXPECT_TRUE(AppendSplit(0, 0, kMaxPlannedBlocks * 4096, 4096, &out, "the range").ok());
  EXPECT_EQ(out.size(), kMaxPlannedBlocks);
  // A range no slice can fit says to split it, and appends nothing.
  out.clear();
  absl::Status st = AppendSplit(0, 0, 1ull << 50, 4096, &out, "the range");
  EXPECT_EQ(st.message(),
            "the range: 1125899906842624 bytes at slice_size 4096 would be cut into more than "
            "4194304 pieces per transfer: split it into several transfers");
  EXPECT_TRUE(out.empty());
}

TEST(BlockPlanTest, StridedOverflowIsOutOfRange) {
  BlockSpec s;
  s.form = BlockSpec::Form::kStrided;
  s.runs = {StridedRun{0, 0, 16, 1ull << 63, 16, 3}};
  EXPECT_EQ(Plan(s).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(BlockPlanTest, LayoutIndicesAreChecked) {
  auto src = std::make_shared<Layout>();
  src->name = "pages";
  src->block_length = 4096;
  src->count = 4;
  src->stride = 4096;
  BlockSpec s;
  s.form = BlockSpec::Form::kLayout;
  s.src_layout = s.dst_layout = "pages";
  s.src_layout_ref = s.dst_layout_ref = src;
  s.src_indices = {3, 0};
  s.dst_indices = {0, 4};
  EXPECT_EQ(Plan(s).status().message(),
            "block #1: destination index 4 is outside layout 'pages' of 4 blocks");
  s.dst_indices = {0, 1};
  auto blocks = Plan(s);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_EQ(*blocks, (std::vector<Block>{{12288, 0, 4096}, {0, 4096, 4096}}));
}

TEST(BlockPlanTest, GroupsOpsByBlockCountAndSlice) {
  std::vector<Block> blocks(130, Block{0, 0, 100});
  EXPECT_EQ(GroupOps(blocks, 1 << 20), (std::vector<uint32_t>{0, 64, 128, 130}));
  blocks = {{0, 0, 3000}, {0, 0, 3000}, {0, 0, 1000}, {0, 0, 4096}};
  EXPECT_EQ(GroupOps(blocks, 4096), (std::vector<uint32_t>{0, 1, 3, 4}));
}

TEST(BlockPlanTest, PermutedBlocksPlanWhole) {
  constexpr uint64_t kBlocks = 200000;
  std::vector<uint64_t> src(kBlocks), dst(kBlocks);
  std::iota(src.begin(), src.end(), 0);
  dst = src;
  std::shuffle(dst.begin(), dst.end(), std::mt19937_64(7));
  for (uint64_t i = 0; i < kBlocks; ++i) {
    src[i] *= 64;
    dst[i] *= 64;
  }
  const RegionSide side{"r", "", kBlocks * 64};
  const absl::Time start = absl::Now();
  auto blocks = PlanBlocks(List(src, dst, 64), side, side, true, 1 << 20);
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  // A shuffle leaves a few neighbours in order: those merge, nothing else.
  EXPECT_LE(blocks->size(), kBlocks);
  EXPECT_GE(blocks->size(), kBlocks - 100);
  uint64_t bytes = 0;
  for (const Block& b : *blocks) bytes += b.length;
  EXPECT_EQ(bytes, kBlocks * 64);
  std::printf("planned %llu permuted blocks in %s (%.0f ns/block, unoptimised build)\n",
              static_cast<unsigned long long>(kBlocks), absl::FormatDuration(took).c_str(),
              absl::ToDoubleNanoseconds(took) / kBlocks);
}

}  // namespace
}  // namespace xferd::engine
