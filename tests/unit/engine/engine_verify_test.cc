// Verified transfers checked at the peer (docs/integrity.md), through two
// engines whose fake transports report themselves as verbs: once every op
// completed, the initiator asks the peer for its side's checksums
// (ChecksumBlocks, in chunks) and compares. A write's landed event comes
// from that check, only when every block matches; a corruption made just
// before the peer checksums (the RPC's hook) fails the transfer DATA_LOSS
// naming the block.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "daemon/engine/peer_rpc.h"
#include "daemon/memory/checksum.h"
#include "tests/testing/landed_recorder.h"
#include "tests/testing/wait_until.h"
#include "tests/unit/engine/engine_harness.h"

namespace xferd::testing {
namespace {

using engine::BlockSpec;
using engine::TransferState;
using transport::OpKind;

constexpr uint64_t kBlock = 4096;
constexpr uint64_t kBlocks = 256;
constexpr uint64_t kRegion = kBlock * kBlocks;

class EngineVerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    h_.fake_kind = transport::TransportKind::kVerbs;
    a_ = &h_.Add("a");
    b_ = &h_.Add("b");
    a_region_ = Region(*a_, "a_buf");
    b_region_ = Region(*b_, "b_buf");
    for (uint64_t i = 0; i < kRegion; ++i) {
      a_region_->data()[i] = static_cast<std::byte>(i * 13 + (i >> 12));
      b_region_->data()[i] = static_cast<std::byte>(i * 7 + 3);
    }
    ASSERT_TRUE(h_.Connect(*a_, *b_).ok());
  }

  std::shared_ptr<memory::Region> Region(Node& node, const std::string& name) {
    memory::RegionSpec spec;
    spec.name = name;
    spec.size = kRegion;
    spec.access.remote_write = true;
    spec.access.remote_read = true;
    return *h_.Register(node, spec);
  }

  // Every 4 KiB block, block i of the source to block (i * 5) % kBlocks.
  static engine::TransferSpec Blocks(OpKind direction) {
    engine::TransferSpec w;
    w.direction = direction;
    w.peer = "b";
    w.src_region = direction == OpKind::kWrite ? "a_buf" : "b_buf";
    w.dst_region = direction == OpKind::kWrite ? "b_buf" : "a_buf";
    w.blocks.form = BlockSpec::Form::kList;
    w.blocks.block_length = kBlock;
    for (uint64_t i = 0; i < kBlocks; ++i) {
      w.blocks.src_offsets.push_back(i * kBlock);
      w.blocks.dst_offsets.push_back(i * 5 % kBlocks * kBlock);
    }
    w.verify = true;
    return w;
  }

  engine::TransferInfo Run(engine::TransferSpec spec) {
    auto submitted = h_.Submit(*a_, {std::move(spec)});
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    if (!submitted.ok()) return {};
    return h_.Wait(submitted->front());
  }

  static uint64_t Sum(const memory::Region& r, uint64_t offset) {
    return memory::BlockChecksum(r.data() + offset, kBlock);
  }

  EngineHarness h_;
  Node* a_ = nullptr;
  Node* b_ = nullptr;
  std::shared_ptr<memory::Region> a_region_;
  std::shared_ptr<memory::Region> b_region_;
};

TEST_F(EngineVerifyTest, AWriteIsCheckedAtThePeerWhichThenLandsIt) {
  LandedRecorder watcher(*b_region_);
  const engine::TransferInfo done = Run(Blocks(OpKind::kWrite));
  ASSERT_EQ(done.state, TransferState::kDone) << done.error;
  EXPECT_EQ(h_.rpc().checksum_calls.load(), 1);
  ASSERT_NE(done.checksums, nullptr);
  ASSERT_EQ(done.checksums->size(), kBlocks);
  for (uint64_t i = 0; i < kBlocks; ++i) {
    EXPECT_EQ((*done.checksums)[i], Sum(*a_region_, i * kBlock)) << i;
    ASSERT_EQ(std::memcmp(a_region_->data() + i * kBlock,
                          b_region_->data() + i * 5 % kBlocks * kBlock, kBlock),
              0);
  }
  ASSERT_TRUE(WaitUntil([&] { return watcher.news > 0; }));
  const std::vector<memory::LandedEvent> events = watcher.Take();
  ASSERT_EQ(events.size(), 1u);  // from the check: the final op carried no notice
  EXPECT_EQ(events[0].source_transfer_id, done.id);
  EXPECT_EQ(events[0].blocks, kBlocks);
}

TEST_F(EngineVerifyTest, ADestinationChangedBeforeThePeersCheckFailsAndNeverLands) {
  LandedRecorder watcher(*b_region_);
  // Block 9 lands at 45 * 4 KiB; it changes once landed, before the check.
  h_.rpc().before_checksums = [&] { b_region_->data()[45 * kBlock + 100] ^= std::byte{1}; };
  const engine::TransferInfo failed = Run(Blocks(OpKind::kWrite));
  ASSERT_EQ(failed.state, TransferState::kFailed);
  EXPECT_EQ(failed.error.code(), absl::StatusCode::kDataLoss) << failed.error;
  EXPECT_NE(failed.error.message().find("verify: block #9 (source offset 36864, destination "
                                        "offset 184320, 4096 bytes) landed with CRC-64 0x"),
            std::string::npos)
      << failed.error;
  EXPECT_NE(failed.error.message().find("; 1 of 256 blocks differ"), std::string::npos);
  EXPECT_EQ(failed.checksums, nullptr);
  // No landed event: the next one is the clean retry's.
  h_.rpc().before_checksums = nullptr;
  const engine::TransferInfo retry = Run(Blocks(OpKind::kWrite));
  ASSERT_EQ(retry.state, TransferState::kDone) << retry.error;
  ASSERT_TRUE(WaitUntil([&] { return watcher.news > 0; }));
  const std::vector<memory::LandedEvent> events = watcher.Take();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].source_transfer_id, retry.id);
}

TEST_F(EngineVerifyTest, AReadGetsTheSourcesChecksumsAndChecksWhatLanded) {
  const engine::TransferInfo done = Run(Blocks(OpKind::kRead));
  ASSERT_EQ(done.state, TransferState::kDone) << done.error;
  ASSERT_NE(done.checksums, nullptr);
  for (uint64_t i = 0; i < kBlocks; ++i) {
    EXPECT_EQ((*done.checksums)[i], Sum(*b_region_, i * kBlock)) << i;
  }
  // What landed here changes before the check: block 3 (at 15 * 4 KiB).
  h_.rpc().before_checksums = [&] { a_region_->data()[15 * kBlock] ^= std::byte{0x80}; };
  const engine::TransferInfo failed = Run(Blocks(OpKind::kRead));
  EXPECT_EQ(failed.error.code(), absl::StatusCode::kDataLoss) << failed.error;
  EXPECT_NE(failed.error.message().find("verify: block #3 (source offset 12288, destination "
                                        "offset 61440, 4096 bytes)"),
            std::string::npos)
      << failed.error;
}

TEST_F(EngineVerifyTest, ARestoreIsCheckedAgainstExpectedChecksums) {
  engine::TransferSpec read = Blocks(OpKind::kRead);
  auto expected = std::make_shared<std::vector<uint64_t>>();
  for (uint64_t i = 0; i < kBlocks; ++i) expected->push_back(Sum(*b_region_, i * kBlock));
  read.expected_checksums = expected;
  EXPECT_EQ(Run(read).state, TransferState::kDone);
  (*expected)[200] ^= 1;  // as if the source changed since they were taken
  const engine::TransferInfo failed = Run(read);
  EXPECT_EQ(failed.error.code(), absl::StatusCode::kDataLoss) << failed.error;
  EXPECT_NE(failed.error.message().find("expected_checksums[200] is"), std::string::npos)
      << failed.error;
}

// More blocks than one ChecksumBlocks call carries: the check goes in
// chunks, and the landing with the last.
TEST_F(EngineVerifyTest, ManyBlocksAreCheckedInChunks) {
  constexpr uint64_t kSmall = 8;  // bytes a block
  constexpr uint64_t kMany = engine::kChecksumBlocksPerCall + 1000;
  std::shared_ptr<memory::Region> src = *h_.Register(*a_, [] {
    memory::RegionSpec spec;
    spec.name = "many_a";
    spec.size = kSmall * kMany;
    return spec;
  }());
  std::shared_ptr<memory::Region> dst = *h_.Register(*b_, [] {
    memory::RegionSpec spec;
    spec.name = "many_b";
    spec.size = kSmall * kMany;
    spec.access.remote_write = true;
    return spec;
  }());
  for (uint64_t i = 0; i < src->size(); ++i) src->data()[i] = static_cast<std::byte>(i * 31);
  LandedRecorder watcher(*dst);
  engine::TransferSpec w;
  w.peer = "b";
  w.src_region = "many_a";
  w.dst_region = "many_b";
  w.blocks.form = BlockSpec::Form::kStrided;
  // The halves swapped, block by block: contiguous runs, which a verified
  // transfer still keeps apart (a checksum per block).
  w.blocks.runs = {{0, kSmall * (kMany / 2), kSmall, kSmall, kSmall, kMany / 2},
                   {kSmall * (kMany / 2), 0, kSmall, kSmall, kSmall, kMany / 2}};
  w.verify = true;
  const engine::TransferInfo done = Run(w);
  ASSERT_EQ(done.state, TransferState::kDone) << done.error;
  EXPECT_EQ(h_.rpc().checksum_calls.load(), 2);
  ASSERT_EQ(done.checksums->size(), kMany);
  ASSERT_TRUE(WaitUntil([&] { return watcher.news > 0; }));
  EXPECT_EQ(watcher.Take().size(), 1u);
  EXPECT_EQ(std::memcmp(src->data(), dst->data() + kSmall * (kMany / 2), kSmall * (kMany / 2)), 0);
}

// The callee's checks: the caller, the region as resolved, its ACL, the
// arrays, every block's range; a notice only with checksums to compare.
TEST_F(EngineVerifyTest, ChecksumBlocksChecksWhoAsksAndWhat) {
  const uint64_t incarnation = a_->engine->self().incarnation;
  engine::ChecksumQuery query;
  query.region_id = b_region_->id();
  query.region = "b_buf";
  query.offsets = std::string(8, '\0');
  query.lengths = std::string("\x00\x10\x00\x00", 4);  // one block of 4 KiB at 0
  auto ask = [&](const std::string& node) {
    return b_->engine->OnChecksumBlocks(node, incarnation, query);
  };
  absl::StatusOr<std::string> sums = ask("a");
  ASSERT_TRUE(sums.ok()) << sums.status();
  ASSERT_EQ(sums->size(), 8u);
  uint64_t sum;
  std::memcpy(&sum, sums->data(), 8);
  EXPECT_EQ(sum, Sum(*b_region_, 0));
  EXPECT_EQ(ask("nobody").status().code(), absl::StatusCode::kFailedPrecondition);
  query.region_id += 1;  // a region of that name, but not the one resolved
  EXPECT_EQ(ask("a").status().code(), absl::StatusCode::kNotFound);
  query.region_id -= 1;
  query.lengths = std::string(3, '\0');  // not one uint32 per offset
  EXPECT_EQ(ask("a").status().code(), absl::StatusCode::kInvalidArgument);
  query.lengths = std::string("\x01\x00\x00\x00", 4);
  query.offsets = std::string("\x00\x00\x10\x00\x00\x00\x00\x00", 8);  // at 1 MiB: past the end
  EXPECT_EQ(ask("a").status().code(), absl::StatusCode::kOutOfRange);
  query.offsets = std::string(8, '\0');
  query.notice = transport::LandingNotice{1, 0, 1, 1, 1};  // without checksums to compare
  EXPECT_EQ(ask("a").status().code(), absl::StatusCode::kInvalidArgument);
  query.notice.reset();
  std::shared_ptr<memory::Region> closed = *h_.Register(*b_, [] {
    memory::RegionSpec spec;
    spec.name = "closed";
    spec.size = kBlock;
    spec.allowed_peers = {"c"};
    return spec;
  }());
  query.region_id = closed->id();
  query.region = "closed";
  EXPECT_EQ(ask("a").status().code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace xferd::testing
