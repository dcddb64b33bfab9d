// Transport conformance (fixture: transport_conformance_fixture.h), many
// blocks and credits: many-block writes and reads of a permutation, blocks
// crossing memory-registration chunks, many small writes within the lane's
// credits, and ops of the most work requests queued in one lane.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/testing/landed_recorder.h"
#include "tests/transport/transport_conformance_fixture.h"

namespace xferd::transport::conformance {
namespace {

TEST_P(TransportConformanceTest, ManyBlockWritesOfAPermutation) {
  auto src = Register(a_, "src", 2 << 20, false);
  auto dst = Register(b_, "dst", 2 << 20, true);
  Fill(*src, 13);
  MovePermuted(OpKind::kWrite, *src, *dst, Keys(b_, *dst));
}

// Verbs posts far more RDMA READs than its queue pairs may have outstanding
// (max_rd_atomic 2 in these tests): the NIC holds back the rest.
TEST_P(TransportConformanceTest, ManyBlockReadsOfAPermutation) {
  auto src = Register(b_, "src", 2 << 20, false, {}, /*remote_read=*/true);
  auto dst = Register(a_, "dst", 2 << 20, false);
  Fill(*src, 17);
  MovePermuted(OpKind::kRead, *src, *dst, Keys(b_, *src));
  EXPECT_EQ(a_.link->counters().bytes_received.load(), 2u << 20);
}

TEST_P(TransportConformanceTest, ManySmallWritesStayWithinCredits) {
  constexpr uint32_t kWrites = 2000;
  auto src = Register(a_, "src", kWrites * 4096, false);
  auto dst = Register(b_, "dst", kWrites * 4096, true);
  Fill(*src, 9);
  const RemoteRegion key = Keys(b_, *dst);
  const uint32_t depth = a_.link->lane(0).credits();
  std::vector<uint64_t> cookies;
  for (uint32_t i = 0; i < kWrites; ++i) {
    cookies.push_back(Post(a_, i % kPollers, *src, i * 4096ull, key, i * 4096ull, 4096));
    EXPECT_LE(a_.link->lane(i % kPollers).credits(), depth);
  }
  for (uint64_t c : cookies) ASSERT_TRUE(WaitFor(a_, c).ok());
  EXPECT_EQ(std::memcmp(src->data(), dst->data(), kWrites * 4096ull), 0);
}

// Blocks cut by memory-registration chunks (verbs: 16 MiB, the least, in
// these tests) on one side, the other, and both, in one op each way.
TEST_P(TransportConformanceTest, BlocksCrossingRegistrationChunks) {
  constexpr uint64_t kMiB = 1 << 20;
  auto a_buf = Register(a_, "abuf", 40 * kMiB, true);
  auto b_buf = Register(b_, "bbuf", 40 * kMiB, true, {}, /*remote_read=*/true);
  Fill(*a_buf, 13);
  Fill(*b_buf, 29);
  const RemoteRegion key = Keys(b_, *b_buf);
  const std::vector<Block> out = {
      {16 * kMiB - 3000, 1 * kMiB, 70000},       // crosses a chunk here only
      {2 * kMiB, 32 * kMiB - 5000, 9000},        // there only
      {32 * kMiB - 100, 16 * kMiB - 200, 300}};  // both, at different points
  ASSERT_TRUE(WaitFor(a_, PostBlocks(a_, 0, OpKind::kWrite, *a_buf, key, out)).ok());
  ExpectBlocksEqual(*a_buf, *b_buf, out);
  // And back: reads land at chunk-crossing local offsets.
  const std::vector<Block> in = {{16 * kMiB - 7, 16 * kMiB - 9, 1 << 20},  // both
                                 {3 * kMiB, 32 * kMiB - 1, 2},             // remote
                                 {32 * kMiB - 4096, 8 * kMiB, 65536}};     // local
  ASSERT_TRUE(WaitFor(a_, PostBlocks(a_, 1, OpKind::kRead, *a_buf, key, in)).ok());
  ExpectBlocksEqual(*a_buf, *b_buf, in);
}

// Ops of the most work requests an op can need, back to back on one lane
// (WorstCaseBlocks, and a write's notice: 193 requests over verbs, as many
// as the conformance lanes' whole send queue holds). The lane takes every
// op it has credit for and holds what its send queue has no room for:
// nothing overflows, every op completes, in order, and every byte lands
// (the ops overlap, but by one shift, so the result is still exact).
TEST_P(TransportConformanceTest, WorstCaseOpsQueueInTheLane) {
  constexpr uint32_t kOps = 24;
  auto a_buf = Register(a_, "abuf", kWorstRegion, true);
  auto b_buf = Register(b_, "bbuf", kWorstRegion, true, {}, /*remote_read=*/true);
  // Zeros elsewhere: a stray block would bring non-zero bytes there.
  Fill(*a_buf, 31, kWorstWindow[0], kWorstWindow[1]);
  Fill(*b_buf, 37, kWorstWindow[0], kWorstWindow[1]);
  const RemoteRegion key = Keys(b_, *b_buf);
  xferd::testing::LandedRecorder watcher(*b_buf);
  const LandingNotice notice{77, 0, kWorstRegion, kMaxBlocksPerOp, kMaxBlocksPerOp * 4096};
  const uint64_t low = kOps * kMaxBlocksPerOp - 1;  // the last block's distance below the first
  // Writes a -> b, then reads b -> a (from b's bytes as the writes left them).
  for (OpKind kind : {OpKind::kWrite, OpKind::kRead}) {
    SCOPED_TRACE(kind == OpKind::kWrite ? "write" : "read");
    const memory::Region& from = kind == OpKind::kWrite ? *a_buf : *b_buf;
    const memory::Region& to = kind == OpKind::kWrite ? *b_buf : *a_buf;
    const std::vector<std::byte> from_before(from.data(), from.data() + from.size());
    const std::vector<std::byte> to_before(to.data(), to.data() + to.size());
    const size_t first = a_.sink.order.size();
    std::vector<uint64_t> cookies;
    for (uint32_t k = 0; k < kOps; ++k) {
      cookies.push_back(PostBlocks(a_, 0, kind, *a_buf, key, WorstCaseBlocks(kind, k),
                                   kind == OpKind::kWrite ? &notice : nullptr));
    }
    for (uint64_t c : cookies) ASSERT_TRUE(WaitFor(a_, c).ok());
    const std::vector<uint64_t> order(a_.sink.order.begin() + first, a_.sink.order.end());
    EXPECT_EQ(order, cookies);
    // The destination holds the source's span, shifted; nothing else moved.
    const uint64_t start = kWorstTo - low, span = low + 4096;
    ASSERT_EQ(std::memcmp(to.data() + start, from_before.data() + kWorstFrom - low, span), 0);
    ASSERT_EQ(std::memcmp(to.data(), to_before.data(), start), 0);
    ASSERT_EQ(std::memcmp(to.data() + start + span, to_before.data() + start + span,
                          to.size() - start - span),
              0);
  }
  // Every write op carried a notice: one landed event each.
  ASSERT_TRUE(Pump([&] { return watcher.news >= static_cast<int>(kOps); }));
  EXPECT_EQ(watcher.Take().size(), kOps);
}

}  // namespace
}  // namespace xferd::transport::conformance
