// Transport conformance (fixture: transport_conformance_fixture.h), verified
// ops (DataOp::checksums): a write's checksums travel with its blocks and
// the receiver checks what landed, reporting the blocks that differ instead
// of acknowledging them and landing no notice; a read gets the source's
// checksums, taken as the blocks were sent, and checks what it received.
// Transports that leave the check to the engine (verbs: it asks the peer
// once the ops completed, engine_verify_test) are skipped.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "daemon/memory/checksum.h"
#include "tests/testing/landed_recorder.h"
#include "tests/transport/transport_conformance_fixture.h"

namespace xferd::transport::conformance {
namespace {

constexpr uint32_t kBlocks = 48;
constexpr uint32_t kBlockBytes = 4096;

// kBlocks blocks of 4 KiB, scattered: block i reads slot i and lands in slot
// (i * 7) % kBlocks of the other side.
std::vector<Block> Scattered() {
  std::vector<Block> blocks;
  for (uint32_t i = 0; i < kBlocks; ++i) {
    blocks.push_back(
        {uint64_t{i} * kBlockBytes, uint64_t{i * 7 % kBlocks} * kBlockBytes, kBlockBytes});
  }
  return blocks;
}

std::vector<uint64_t> Checksums(const memory::Region& region, const std::vector<Block>& blocks,
                                bool local) {
  std::vector<uint64_t> sums;
  for (const Block& b : blocks) {
    sums.push_back(memory::BlockChecksum(region.data() + (local ? b.local_offset : b.remote_offset),
                                         b.length));
  }
  return sums;
}

#define SKIP_UNLESS_VERIFIES() \
  if (!GetParam().verifies) GTEST_SKIP() << GetParam().name << " leaves the check to the engine"

TEST_P(TransportConformanceTest, VerifiedAWriteThatLandsAsSentIsAcknowledgedAndLanded) {
  SKIP_UNLESS_VERIFIES();
  auto src = Register(a_, "src", kBlocks * kBlockBytes, false);
  auto dst = Register(b_, "dst", kBlocks * kBlockBytes, true);
  Fill(*src, 5);
  xferd::testing::LandedRecorder watcher(*dst);
  const std::vector<Block> blocks = Scattered();
  std::vector<uint64_t> sums = Checksums(*src, blocks, /*local=*/true);
  const LandingNotice notice{7, 0, kBlocks * kBlockBytes, kBlocks, kBlocks * kBlockBytes};
  const uint64_t op =
      PostBlocks(a_, 0, OpKind::kWrite, *src, Keys(b_, *dst), blocks, &notice, sums.data());
  ASSERT_TRUE(WaitFor(a_, op).ok());
  EXPECT_EQ(a_.sink.mismatched.count(op), 0u);
  ExpectBlocksEqual(*src, *dst, blocks);
  ASSERT_TRUE(Pump([&] { return watcher.news > 0; }));
  EXPECT_EQ(watcher.Take().size(), 1u);
}

// Checksums that do not match the bytes (as when the source changed between
// its checksum and the wire): the receiver names the first block that
// differs and how many, lands no notice, and the lane carries on.
TEST_P(TransportConformanceTest,
       VerifiedBlocksThatLandOtherThanTheirChecksumsAreReportedAndNotLanded) {
  SKIP_UNLESS_VERIFIES();
  auto src = Register(a_, "src", kBlocks * kBlockBytes, false);
  auto dst = Register(b_, "dst", kBlocks * kBlockBytes, true);
  Fill(*src, 6);
  xferd::testing::LandedRecorder watcher(*dst);
  const RemoteRegion key = Keys(b_, *dst);
  const std::vector<Block> blocks = Scattered();
  std::vector<uint64_t> sums = Checksums(*src, blocks, /*local=*/true);
  sums[9] ^= 1;
  sums[31] ^= 1;
  const LandingNotice notice{8, 0, kBlocks * kBlockBytes, kBlocks, kBlocks * kBlockBytes};
  const uint64_t bad = PostBlocks(a_, 0, OpKind::kWrite, *src, key, blocks, &notice, sums.data());
  ASSERT_TRUE(WaitFor(a_, bad).ok());  // it moved: what it found is its mismatch
  ASSERT_EQ(a_.sink.mismatched.count(bad), 1u);
  const ChecksumMismatch m = a_.sink.mismatched[bad];
  EXPECT_EQ(m.checksums, sums.data());
  EXPECT_EQ(m.blocks, 2u);
  EXPECT_EQ(m.first, 9u);
  EXPECT_EQ(m.landed, sums[9] ^ 1);  // the checksum of the bytes that landed
  EXPECT_EQ(b_.link->counters().writes_rejected.load(), 1u);

  // The lane still carries verified writes, and only this one landed.
  sums[9] ^= 1;
  sums[31] ^= 1;
  const LandingNotice good_notice{9, 0, kBlocks * kBlockBytes, kBlocks, kBlocks * kBlockBytes};
  const uint64_t good =
      PostBlocks(a_, 0, OpKind::kWrite, *src, key, blocks, &good_notice, sums.data());
  ASSERT_TRUE(WaitFor(a_, good).ok());
  EXPECT_EQ(a_.sink.mismatched.count(good), 0u);
  ASSERT_TRUE(Pump([&] { return watcher.news > 0; }));
  const std::vector<memory::LandedEvent> events = watcher.Take();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].source_transfer_id, 9u);
}

TEST_P(TransportConformanceTest, VerifiedAReadGetsTheSourcesChecksums) {
  SKIP_UNLESS_VERIFIES();
  auto src = Register(b_, "src", kBlocks * kBlockBytes, false, {}, /*remote_read=*/true);
  auto dst = Register(a_, "dst", kBlocks * kBlockBytes, false);
  Fill(*src, 7);
  const std::vector<Block> blocks = Scattered();
  std::vector<uint64_t> sums(kBlocks, 0);
  const uint64_t op =
      PostBlocks(a_, 1, OpKind::kRead, *dst, Keys(b_, *src), blocks, nullptr, sums.data());
  ASSERT_TRUE(WaitFor(a_, op).ok());
  EXPECT_EQ(a_.sink.mismatched.count(op), 0u);
  EXPECT_EQ(sums, Checksums(*src, blocks, /*local=*/false));
  ExpectBlocksEqual(*dst, *src, blocks);
}

// Unverified and verified frames share a lane in both directions.
TEST_P(TransportConformanceTest, VerifiedAndPlainOpsShareALane) {
  SKIP_UNLESS_VERIFIES();
  auto a_buf = Register(a_, "abuf", kBlocks * kBlockBytes, true);
  auto b_buf = Register(b_, "bbuf", kBlocks * kBlockBytes, true, {}, /*remote_read=*/true);
  Fill(*a_buf, 8);
  Fill(*b_buf, 9);
  const RemoteRegion key = Keys(b_, *b_buf);
  const std::vector<Block> blocks = Scattered();
  std::vector<uint64_t> write_sums = Checksums(*a_buf, blocks, /*local=*/true);
  std::vector<uint64_t> read_sums(kBlocks, 0);
  std::vector<Block> half(blocks.begin(), blocks.begin() + kBlocks / 2);
  const uint64_t w1 = PostBlocks(a_, 0, OpKind::kWrite, *a_buf, key, half);
  const uint64_t w2 =
      PostBlocks(a_, 0, OpKind::kWrite, *a_buf, key, blocks, nullptr, write_sums.data());
  for (uint64_t op : {w1, w2}) ASSERT_TRUE(WaitFor(a_, op).ok());
  Fill(*b_buf, 10);
  const uint64_t r1 =
      PostBlocks(a_, 0, OpKind::kRead, *a_buf, key, blocks, nullptr, read_sums.data());
  ASSERT_TRUE(WaitFor(a_, r1).ok());
  EXPECT_TRUE(a_.sink.mismatched.empty());
  EXPECT_EQ(read_sums, Checksums(*b_buf, blocks, /*local=*/false));
  ExpectBlocksEqual(*a_buf, *b_buf, blocks);
}

}  // namespace
}  // namespace xferd::transport::conformance
