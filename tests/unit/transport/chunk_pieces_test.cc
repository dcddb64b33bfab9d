// The cut of blocks into work requests at memory-registration chunks, which
// the verbs lane uses both to count an op's requests (to know whether it
// fits the send queue) and to build them.
#include "daemon/transport/verbs/chunk_pieces.h"

#include <cstdint>
#include <random>
#include <vector>

#include "daemon/transport/verbs/remote_region_check.h"
#include "daemon/transport/verbs/verbs_constants.h"
#include "gtest/gtest.h"

namespace xferd::transport::verbs {
namespace {

struct Piece {
  uint64_t local = 0;
  uint64_t remote = 0;
  uint32_t length = 0;
};

std::vector<Piece> Pieces(uint64_t local, uint64_t local_chunk, uint64_t remote,
                          uint64_t remote_chunk, uint32_t length) {
  std::vector<Piece> pieces;
  ForEachPiece(local, local_chunk, remote, remote_chunk, length,
               [&](uint64_t l, uint64_t r, uint32_t n) {
                 pieces.push_back({l, r, n});
               });
  return pieces;
}

// The pieces cover the block in order, each inside one chunk on both sides,
// and CountPieces agrees with them.
void ExpectValidCut(uint64_t local, uint64_t local_chunk, uint64_t remote, uint64_t remote_chunk,
                    uint32_t length) {
  const std::vector<Piece> pieces = Pieces(local, local_chunk, remote, remote_chunk, length);
  uint64_t l = local, r = remote, total = 0;
  for (const Piece& p : pieces) {
    ASSERT_GT(p.length, 0u);
    EXPECT_EQ(p.local, l);
    EXPECT_EQ(p.remote, r);
    EXPECT_EQ(p.local / local_chunk, (p.local + p.length - 1) / local_chunk);
    EXPECT_EQ(p.remote / remote_chunk, (p.remote + p.length - 1) / remote_chunk);
    l += p.length;
    r += p.length;
    total += p.length;
  }
  EXPECT_EQ(total, length);
  EXPECT_EQ(CountPieces(local, local_chunk, remote, remote_chunk, length), pieces.size());
}

constexpr uint64_t kChunk = kMinMrChunk;

TEST(ChunkPiecesTest, CutsAtEachSidesBoundaries) {
  // Inside one chunk on both sides: one piece.
  EXPECT_EQ(CountPieces(0, kChunk, 4096, kChunk, 4096), 1u);
  // Ending exactly at a boundary is no cut.
  EXPECT_EQ(CountPieces(kChunk - 4096, kChunk, 0, kChunk, 4096), 1u);
  // Across a local boundary only, a remote one only, both at different bytes.
  EXPECT_EQ(CountPieces(kChunk - 100, kChunk, 0, kChunk, 4096), 2u);
  EXPECT_EQ(CountPieces(0, kChunk, kChunk - 100, kChunk, 4096), 2u);
  EXPECT_EQ(CountPieces(kChunk - 100, kChunk, kChunk - 200, kChunk, 4096), 3u);
  // Both at the same byte: one cut.
  EXPECT_EQ(CountPieces(kChunk - 100, kChunk, 2 * kChunk - 100, kChunk, 4096), 2u);
  EXPECT_EQ(CountPieces(0, kChunk, 0, kChunk, 0), 0u);
  const std::vector<Piece> three = Pieces(kChunk - 100, kChunk, kChunk - 200, kChunk, 4096);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three[0].length, 100u);   // to the local boundary
  EXPECT_EQ(three[1].length, 100u);   // to the remote one
  EXPECT_EQ(three[2].length, 3896u);  // the rest
}

// kMaxWrsPerBlock holds for every block a lane can carry: at most a slice
// long, with chunks of at least kMinMrChunk (a region smaller than that is
// one chunk of its size, which a block cannot cross).
TEST(ChunkPiecesTest, NoBlockNeedsMoreThanKMaxWrsPerBlock) {
  EXPECT_EQ(CountPieces(kChunk - 1, kChunk, kChunk - 2, kChunk, kMaxSliceBytes), kMaxWrsPerBlock);
  std::mt19937_64 rng(8);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t local_chunk = kChunk << (rng() % 3);
    const uint64_t remote_chunk = kChunk << (rng() % 3);
    const uint32_t length = 1 + static_cast<uint32_t>(rng() % kMaxSliceBytes);
    const uint64_t local = rng() % (8 * kChunk);
    const uint64_t remote = rng() % (8 * kChunk);
    ASSERT_LE(CountPieces(local, local_chunk, remote, remote_chunk, length), kMaxWrsPerBlock)
        << local << " " << remote << " " << length;
    ExpectValidCut(local, local_chunk, remote, remote_chunk, length);
    if (HasFatalFailure()) return;
  }
}

// Small regions are one chunk of their own size; blocks near their
// boundaries are cut as well.
TEST(ChunkPiecesTest, OddChunkSizes) {
  for (uint64_t local = 0; local < 40; ++local) {
    for (uint32_t length = 1; length < 40; ++length) {
      ExpectValidCut(local, 7, local * 3, 5, length);
      if (HasFatalFailure()) return;
    }
  }
}

// The bound the send queue is sized by: the worst op (a notice and 64 blocks
// cut on both sides) fits the smallest queue, and a lane_depth of contiguous
// ops (one block each, cut on both sides, a notice on one) fits the default.
TEST(ChunkPiecesTest, WorstOpsFitTheQueue) {
  uint32_t worst = 1;
  for (uint32_t b = 0; b < kMaxBlocksPerOp; ++b) {
    worst += CountPieces(kChunk - 100 - b, kChunk, 3 * kChunk - 300 - b, kChunk, 4096);
  }
  EXPECT_EQ(worst, kMaxWrsPerOp);
  EXPECT_EQ(1 + CountPieces(kChunk - 1, kChunk, kChunk - 2, kChunk, kMaxSliceBytes),
            kMaxWrsPerContiguousOp);
  EXPECT_LE(kMaxWrsPerContiguousOp, kSendWrsPerOp);
}

}  // namespace
}  // namespace xferd::transport::verbs
