// Transport conformance (fixture: transport_conformance_fixture.h), verified
// ops (DataOp::checksums): a write's checksums, taken by the transport as
// its blocks are sent, follow them and the receiver checks what landed,
// reporting the blocks that differ instead of acknowledging them and
// landing no notice; a read gets the source's checksums, taken as the
// blocks were sent, and checks what it received.
// Transports that leave the check to the engine (verbs: it asks the peer
// once the ops completed, engine_verify_test) are skipped.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
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
  std::vector<uint64_t> sums(kBlocks, 0);  // the transport takes them as it sends
  const LandingNotice notice{7, 0, kBlocks * kBlockBytes, kBlocks, kBlocks * kBlockBytes};
  const uint64_t op =
      PostBlocks(a_, 0, OpKind::kWrite, *src, Keys(b_, *dst), blocks, &notice, sums.data());
  ASSERT_TRUE(WaitFor(a_, op).ok());
  EXPECT_EQ(a_.sink.mismatched.count(op), 0u);
  EXPECT_EQ(sums, Checksums(*src, blocks, /*local=*/true));
  ExpectBlocksEqual(*src, *dst, blocks);
  ASSERT_TRUE(Pump([&] { return watcher.news > 0; }));
  EXPECT_EQ(watcher.Take().size(), 1u);
}

// Posts kOps verified writes of kMaxBlocksPerOp blocks of 64 KiB each: more
// than the kernel buffers between two unread sockets hold, so the writer's
// socket fills mid-frame. Block j of op k is at the same offset both sides.
class StalledWrites {
 public:
  static constexpr uint32_t kOps = 8;
  static constexpr uint32_t kBlockBytes = 64 << 10;
  static constexpr uint64_t kOpBytes = uint64_t{kMaxBlocksPerOp} * kBlockBytes;

  // `post` posts a verified write of the blocks, its checksums into `sums`.
  using Post = std::function<uint64_t(const std::vector<Block>& blocks, uint64_t* sums)>;

  explicit StalledWrites(const Post& post)
      : ops(kOps), sums(kOps, std::vector<uint64_t>(kMaxBlocksPerOp, 0)) {
    for (uint32_t k = 0; k < kOps; ++k) {
      for (uint32_t j = 0; j < kMaxBlocksPerOp; ++j) {
        const uint64_t at = k * kOpBytes + uint64_t{j} * kBlockBytes;
        ops[k].push_back({at, at, kBlockBytes});
      }
      cookies.push_back(post(ops[k], sums[k].data()));
    }
  }

  std::vector<std::vector<Block>> ops;
  std::vector<std::vector<uint64_t>> sums;
  std::vector<uint64_t> cookies;
};

// A source rewritten while its frames are on the wire (an application
// changing memory it asked to send): a large frame's checksums are taken
// behind the kernel's copy, of the bytes the socket took. The writer sends
// until its socket is full, mid-frame; the source is rewritten; then the
// peer reads. Every frame is acknowledged, and every block's checksum is
// of what landed: the old bytes, the new, or (the block that straddled
// the rewrite) the old ones' start and the new ones' rest.
TEST_P(TransportConformanceTest, VerifiedChecksumsAreOfTheBytesThatWentWhileTheSourceChanges) {
  SKIP_UNLESS_VERIFIES();
  auto src = Register(a_, "src", StalledWrites::kOps * StalledWrites::kOpBytes, false);
  auto dst = Register(b_, "dst", StalledWrites::kOps * StalledWrites::kOpBytes, true);
  Fill(*src, 11);
  const std::vector<std::byte> before(src->data(), src->data() + src->size());
  const RemoteRegion key = Keys(b_, *dst);
  StalledWrites writes([&](const std::vector<Block>& blocks, uint64_t* sums) {
    return PostBlocks(a_, 0, OpKind::kWrite, *src, key, blocks, nullptr, sums);
  });
  PumpSide(a_);  // sends until the socket takes no more
  Fill(*src, 12);
  for (uint64_t c : writes.cookies) ASSERT_TRUE(WaitFor(a_, c).ok());

  EXPECT_TRUE(a_.sink.mismatched.empty());
  uint32_t old_blocks = 0;
  uint32_t new_blocks = 0;
  for (uint32_t k = 0; k < StalledWrites::kOps; ++k) {
    for (uint32_t j = 0; j < kMaxBlocksPerOp; ++j) {
      const Block& b = writes.ops[k][j];
      const std::byte* landed = dst->data() + b.remote_offset;
      EXPECT_EQ(writes.sums[k][j], memory::BlockChecksum(landed, b.length)) << k << "/" << j;
      old_blocks += std::memcmp(landed, before.data() + b.local_offset, b.length) == 0;
      new_blocks += std::memcmp(landed, src->data() + b.local_offset, b.length) == 0;
    }
  }
  EXPECT_GT(old_blocks, 0u) << "the socket took nothing before the rewrite";
  EXPECT_GT(new_blocks, 0u) << "the socket took everything before the rewrite";
  EXPECT_EQ(b_.link->counters().writes_rejected.load(), 0u);
}

// A destination rewritten while a frame lands (another process writing
// memory a transfer is filling). The writer fills its socket; the peer
// reads what is there, placing whole frames and the start of the next;
// the destination is rewritten; then the rest comes. The frame that was
// landing is reported (its first block that differs, how many, that
// block's landed checksum) instead of acknowledged; every other frame is
// acknowledged: those before were checked before the rewrite, those after
// landed after it.
TEST_P(TransportConformanceTest, VerifiedADestinationRewrittenWhileItLandsIsReported) {
  SKIP_UNLESS_VERIFIES();
  auto src = Register(a_, "src", StalledWrites::kOps * StalledWrites::kOpBytes, false);
  auto dst = Register(b_, "dst", StalledWrites::kOps * StalledWrites::kOpBytes, true);
  Fill(*src, 13);
  const RemoteRegion key = Keys(b_, *dst);
  StalledWrites writes([&](const std::vector<Block>& blocks, uint64_t* sums) {
    return PostBlocks(a_, 0, OpKind::kWrite, *src, key, blocks, nullptr, sums);
  });
  PumpSide(a_);  // sends until the socket takes no more
  PumpSide(b_);  // reads what is there: mid-frame
  Fill(*dst, 14);
  const std::vector<std::byte> rewritten(dst->data(), dst->data() + dst->size());
  for (uint64_t c : writes.cookies) ASSERT_TRUE(WaitFor(a_, c).ok());

  ASSERT_EQ(a_.sink.mismatched.size(), 1u) << "no frame was landing at the rewrite";
  for (uint32_t k = 0; k < StalledWrites::kOps; ++k) {
    for (uint32_t j = 0; j < kMaxBlocksPerOp; ++j) {
      const Block& b = writes.ops[k][j];
      EXPECT_EQ(writes.sums[k][j], memory::BlockChecksum(src->data() + b.local_offset, b.length));
    }
    const auto found = a_.sink.mismatched.find(writes.cookies[k]);
    if (found == a_.sink.mismatched.end()) {
      for (const Block& b : writes.ops[k]) {
        const std::byte* landed = dst->data() + b.remote_offset;
        const bool sent = std::memcmp(landed, src->data() + b.local_offset, b.length) == 0;
        const bool before = std::memcmp(landed, rewritten.data() + b.remote_offset, b.length) == 0;
        EXPECT_TRUE(sent || before) << "op " << k << " block at " << b.local_offset;
      }
      continue;
    }
    const ChecksumMismatch& m = found->second;
    EXPECT_EQ(m.checksums, writes.sums[k].data());
    ASSERT_LT(m.first, kMaxBlocksPerOp);
    EXPECT_GE(m.blocks, 1u);
    const Block& first = writes.ops[k][m.first];
    EXPECT_EQ(m.landed, memory::BlockChecksum(dst->data() + first.remote_offset, first.length));
    EXPECT_NE(m.landed, writes.sums[k][m.first]);
  }
  EXPECT_EQ(b_.link->counters().writes_rejected.load(), 1u);
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
  std::vector<uint64_t> write_sums(kBlocks, 0);
  std::vector<uint64_t> read_sums(kBlocks, 0);
  std::vector<Block> half(blocks.begin(), blocks.begin() + kBlocks / 2);
  const uint64_t w1 = PostBlocks(a_, 0, OpKind::kWrite, *a_buf, key, half);
  const uint64_t w2 =
      PostBlocks(a_, 0, OpKind::kWrite, *a_buf, key, blocks, nullptr, write_sums.data());
  for (uint64_t op : {w1, w2}) ASSERT_TRUE(WaitFor(a_, op).ok());
  EXPECT_EQ(write_sums, Checksums(*a_buf, blocks, /*local=*/true));
  Fill(*b_buf, 10);
  const uint64_t r1 =
      PostBlocks(a_, 0, OpKind::kRead, *a_buf, key, blocks, nullptr, read_sums.data());
  ASSERT_TRUE(WaitFor(a_, r1).ok());
  EXPECT_TRUE(a_.sink.mismatched.empty());
  EXPECT_EQ(read_sums, Checksums(*b_buf, blocks, /*local=*/false));
  ExpectBlocksEqual(*a_buf, *b_buf, blocks);
}

// A large verified read's answer has its table follow in a frame of its own
// (TCP: after later answers of the same kind, before any other answer):
// large and small verified reads, plain reads and writes (whose ACKs the
// same peer sends) all in flight on one lane at once; each ends with its
// own source's checksums and bytes.
TEST_P(TransportConformanceTest, VerifiedReadsAnswersAndAcknowledgementsKeepTheirOrder) {
  SKIP_UNLESS_VERIFIES();
  constexpr uint32_t kOps = 12;
  constexpr uint64_t kOpBytes = uint64_t{kMaxBlocksPerOp} * kBlockBytes;
  auto a_buf = Register(a_, "abuf", kOps * kOpBytes, true);
  auto b_buf = Register(b_, "bbuf", 2 * kOps * kOpBytes, true, {}, /*remote_read=*/true);
  Fill(*a_buf, 11);
  Fill(*b_buf, 12);
  const RemoteRegion key = Keys(b_, *b_buf);
  std::vector<std::vector<uint64_t>> sums(kOps);
  std::vector<std::vector<Block>> op_blocks(kOps);
  std::vector<uint64_t> ops;
  for (uint32_t k = 0; k < kOps; ++k) {
    // Reads come from b's first half, writes land in its second half.
    const uint64_t base = uint64_t{k} * kOpBytes;
    const uint32_t count = k % 4 == 3 ? 8 : kMaxBlocksPerOp;  // 32 KiB: its table inline
    for (uint32_t i = 0; i < count; ++i) {
      const uint64_t at = base + uint64_t{(i * 5) % count} * kBlockBytes;
      op_blocks[k].push_back(
          {base + uint64_t{i} * kBlockBytes, k % 4 == 1 ? kOps * kOpBytes + at : at, kBlockBytes});
    }
    sums[k].assign(count, 0);
    const OpKind kind = k % 4 == 1 ? OpKind::kWrite : OpKind::kRead;
    const bool verified = k % 4 != 2;
    ops.push_back(PostBlocks(a_, 0, kind, *a_buf, key, op_blocks[k], nullptr,
                             verified ? sums[k].data() : nullptr));
  }
  for (uint32_t k = 0; k < kOps; ++k) {
    ASSERT_TRUE(WaitFor(a_, ops[k]).ok()) << "op " << k;
    EXPECT_EQ(a_.sink.mismatched.count(ops[k]), 0u) << "op " << k;
    ExpectBlocksEqual(*a_buf, *b_buf, op_blocks[k]);
    if (k % 4 == 2) continue;  // plain
    EXPECT_EQ(sums[k], Checksums(k % 4 == 1 ? *a_buf : *b_buf, op_blocks[k], k % 4 == 1))
        << "op " << k;
  }
}

}  // namespace
}  // namespace xferd::transport::conformance
