// PackRanges and ChunkRanges: the ranges a watcher of a landed_ranges region
// gets, whatever the order of the request's blocks.
#include "daemon/engine/landed_ranges.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "tests/testing/landed_recorder.h"

namespace xferd::engine {
namespace {

using testing::Ranges;
using testing::UnpackRanges;

// Blocks of `length` bytes, block i from local i * length to remote
// perm[i] * length.
std::vector<transport::Block> Blocks(const std::vector<uint64_t>& perm, uint32_t length) {
  std::vector<transport::Block> blocks;
  for (uint64_t i = 0; i < perm.size(); ++i) {
    blocks.push_back({i * length, perm[i] * length, length});
  }
  return blocks;
}

TEST(LandedRangesTest, AShuffledWriteOverAWholeRegionIsOneRange) {
  // 16,384 blocks of 4 KiB in random order cover 64 MiB: one range, not
  // the 16,382 of merging in request order only.
  std::vector<uint64_t> perm(16384);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(11));
  const std::vector<transport::Block> blocks = Blocks(perm, 4096);
  EXPECT_EQ(UnpackRanges(*PackRanges(blocks, /*remote=*/true)), (Ranges{{0, 64 << 20}}));
  // The local side is in order: one range too.
  EXPECT_EQ(UnpackRanges(*PackRanges(blocks, /*remote=*/false)), (Ranges{{0, 64 << 20}}));
}

TEST(LandedRangesTest, HolesSplitRangesSortedByOffset) {
  // Destination blocks 7, 2, 3, 9, 8 (block 4-6 left alone): [2,4) and [7,10).
  const std::vector<transport::Block> blocks = Blocks({7, 2, 3, 9, 8}, 100);
  EXPECT_EQ(UnpackRanges(*PackRanges(blocks, /*remote=*/true)), (Ranges{{200, 200}, {700, 300}}));
}

TEST(LandedRangesTest, PiecesCutAtTheSliceSizeJoinAgain) {
  // One 3 MiB block planned as three 1 MiB pieces, and a separate one.
  const std::vector<transport::Block> blocks = {
      {0, 8 << 20, 1 << 20}, {1 << 20, 9 << 20, 1 << 20}, {2 << 20, 10 << 20, 1 << 20},
      {3 << 20, 0, 4096}};
  EXPECT_EQ(UnpackRanges(*PackRanges(blocks, /*remote=*/true)),
            (Ranges{{0, 4096}, {8 << 20, 3 << 20}}));
  EXPECT_TRUE(PackRanges({}, true)->offsets.empty());
}

TEST(LandedRangesTest, ChunksHoldAtMostAMessageOfRanges) {
  std::vector<uint64_t> apart(kRangesPerChunk + 5);
  for (uint64_t i = 0; i < apart.size(); ++i) apart[i] = 2 * i;  // no neighbours
  const auto ranges = PackRanges(Blocks(apart, 16), /*remote=*/true);
  const std::vector<memory::LandedRanges> chunks = ChunkRanges(*ranges);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].offsets.size(), 8 * kRangesPerChunk);
  EXPECT_EQ(UnpackRanges(chunks[1]), (Ranges{{2 * 16 * kRangesPerChunk, 16},
                                       {2 * 16 * (kRangesPerChunk + 1), 16},
                                       {2 * 16 * (kRangesPerChunk + 2), 16},
                                       {2 * 16 * (kRangesPerChunk + 3), 16},
                                       {2 * 16 * (kRangesPerChunk + 4), 16}}));
  EXPECT_EQ(ChunkRanges(memory::LandedRanges{}).size(), 1u);  // the first message always goes
}

}  // namespace
}  // namespace xferd::engine
