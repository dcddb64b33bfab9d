// The Transport contract, checked the same way for every transport: two
// "daemons" (registry + transport each) in one process, linked as the engine
// links them, their workers pumped by the test thread. A transport that
// cannot run here (verbs without an RDMA device) is skipped, not faked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "daemon/memory/region_registry.h"
#include "daemon/transport/transport.h"
#include "tests/testing/landed_recorder.h"
#include "tests/transport/transport_factories.h"

namespace xferd::transport {
namespace {

constexpr uint32_t kPollers = 2;
constexpr absl::Duration kTimeout = absl::Seconds(20);

// Records completions by cookie, and their order.
struct Recorder : CompletionSink {
  std::map<uint64_t, absl::Status> done;
  std::vector<uint64_t> order;
  void OnOpDone(const OpCompletion& c) override {
    done[c.cookie] = c.error == nullptr ? absl::OkStatus() : *c.error;
    order.push_back(c.cookie);
  }
};

struct Side {
  std::string name;
  std::unique_ptr<memory::RegionRegistry> regions;
  std::unique_ptr<Transport> transport;
  std::shared_ptr<Link> link;
  Recorder sink;
};

class TransportConformanceTest : public ::testing::TestWithParam<TransportFactory> {
 protected:
  void SetUp() override {
    for (Side* side : {&a_, &b_}) {
      memory::RegistryOptions options;
      options.shm_prefix = "conformance-" + side->name;
      side->regions = std::make_unique<memory::RegionRegistry>(options);
      absl::StatusOr<std::unique_ptr<Transport>> transport =
          GetParam().create(*side->regions, kPollers, side->name);
      if (!transport.ok()) GTEST_SKIP() << GetParam().name << ": " << transport.status();
      side->transport = *std::move(transport);
    }
    LinkEndpoints offer, answer;
    auto initiator = a_.transport->CreateLink(&offer);
    ASSERT_TRUE(initiator.ok()) << initiator.status();
    auto responder = b_.transport->AcceptLink(PeerIdentity{"a", 1}, offer, &answer);
    ASSERT_TRUE(responder.ok()) << responder.status();
    a_.link = *initiator;
    b_.link = *responder;
    ASSERT_TRUE(a_.link->Connect(PeerIdentity{"b", 2}, answer, absl::Now() + kTimeout).ok());
    ASSERT_TRUE(Pump([&] {
      return a_.link->ready() && b_.link->ready() && a_.link->lane(0).credits() > 0 &&
             b_.link->lane(0).credits() > 0;
    }));
    EXPECT_EQ(a_.link->lane_count(), kPollers);
    EXPECT_EQ(a_.link->peer().node_id, "b");
    EXPECT_EQ(b_.link->peer().node_id, "a");
  }

  // Polls every worker of both sides until `done` or the timeout.
  bool Pump(const std::function<bool()>& done, absl::Duration timeout = kTimeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!done()) {
      if (absl::Now() > deadline) return false;
      PumpOnce();
    }
    return true;
  }
  void PumpOnce() {
    for (Side* side : {&a_, &b_}) {
      if (side->transport == nullptr) continue;
      for (uint32_t i = 0; i < kPollers; ++i) side->transport->worker(i).Poll(side->sink);
    }
  }

  std::shared_ptr<memory::Region> Register(Side& side, const std::string& name, uint64_t size,
                                           bool remote_write, std::vector<std::string> acl = {},
                                           bool remote_read = false) {
    memory::RegionSpec spec;
    spec.name = name;
    spec.size = size;
    spec.access.remote_write = remote_write;
    spec.access.remote_read = remote_read;
    spec.allowed_peers = std::move(acl);
    auto region = side.regions->Register(spec, side.transport.get());
    EXPECT_TRUE(region.ok()) << region.status();
    return *region;
  }

  // Every 8-byte word gets a value of its own (a hash of its offset), so a
  // block that lands in another block's place shows: a short-period pattern
  // would repeat in every 4 KiB block.
  // Only [from, to) when given (large regions whose tests touch a window:
  // filling tens of MiB takes seconds unoptimized in the Soft-RoCE VM).
  static void Fill(memory::Region& region, uint8_t seed, uint64_t from = 0,
                   uint64_t to = UINT64_MAX) {
    for (uint64_t i = from; i < std::min(to, region.size()); i += 8) {
      const uint64_t word = (i + seed + 1) * 0x9E3779B97F4A7C15ull;
      std::memcpy(region.data() + i, &word, std::min<uint64_t>(8, region.size() - i));
    }
  }

  // Posts a write on `lane` of `from`, waiting for credits; returns its cookie.
  uint64_t Post(Side& from, uint32_t lane, const memory::Region& src, uint64_t src_offset,
                const RemoteRegion& dst, uint64_t dst_offset, uint32_t length,
                const LandingNotice* notice = nullptr) {
    const uint64_t cookie = next_cookie_++;
    // An op's blocks must outlive it: kept until the test ends.
    const Block* block = &blocks_.emplace_back(Block{src_offset, dst_offset, length});
    DataOp op = OneBlockWrite(cookie, src, dst, block);
    op.notice = notice;
    EXPECT_TRUE(Pump([&] { return from.link->lane(lane).credits() > 0; }));
    EXPECT_EQ(from.transport->worker(lane).Post(from.link->lane(lane), {&op, 1}), 1u);
    return cookie;
  }

  // Posts one op of `blocks` (kept until the test ends) on `lane` of `from`.
  uint64_t PostBlocks(Side& from, uint32_t lane, OpKind kind, const memory::Region& local,
                      const RemoteRegion& remote, const std::vector<Block>& blocks,
                      const LandingNotice* notice = nullptr) {
    const uint64_t cookie = next_cookie_++;
    DataOp op;
    for (const Block& b : blocks) op.length += b.length;
    op.cookie = cookie;
    op.kind = kind;
    op.local_base = local.data();
    op.local_registration = local.registration();
    op.remote = &remote;
    op.blocks = op_blocks_.emplace_back(blocks).data();
    op.block_count = static_cast<uint32_t>(blocks.size());
    op.notice = notice;
    EXPECT_TRUE(Pump([&] { return from.link->lane(lane).credits() > 0; }));
    EXPECT_EQ(from.transport->worker(lane).Post(from.link->lane(lane), {&op, 1}), 1u);
    return cookie;
  }

  // Moves every 4 KiB block of `from` to a random permutation of `to`'s
  // blocks, kMaxBlocksPerOp blocks per op, and checks every byte. A write
  // when `from` is on side a, a read (a pulls from b) otherwise.
  void MovePermuted(OpKind kind, const memory::Region& from, const memory::Region& to,
                    const RemoteRegion& remote) {
    const uint64_t count = from.size() / 4096;
    std::vector<uint64_t> perm(count);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937_64(count));
    const memory::Region& local = kind == OpKind::kWrite ? from : to;
    std::vector<uint64_t> cookies;
    for (uint64_t first = 0; first < count; first += kMaxBlocksPerOp) {
      std::vector<Block> blocks;
      for (uint64_t i = first; i < std::min<uint64_t>(count, first + kMaxBlocksPerOp); ++i) {
        // Block i: from's block i, to's block perm[i].
        const uint64_t f = i * 4096, t = perm[i] * 4096;
        blocks.push_back(kind == OpKind::kWrite ? Block{f, t, 4096} : Block{t, f, 4096});
      }
      cookies.push_back(PostBlocks(a_, cookies.size() % kPollers, kind, local, remote, blocks));
    }
    for (uint64_t c : cookies) ASSERT_TRUE(WaitFor(a_, c).ok());
    for (uint64_t i = 0; i < count; ++i) {
      ASSERT_EQ(std::memcmp(from.data() + i * 4096, to.data() + perm[i] * 4096, 4096), 0) << i;
    }
  }

  // Op k of a run of worst-case ops (see WorstCaseOpsQueueInTheLane): 64
  // blocks of 4 KiB, block j of the run starting 100 + j bytes before the
  // 16 MiB boundary on the side it is read from and 400 + j bytes before it
  // on the side it lands on, so every block crosses an MR chunk on both
  // sides at different bytes (verbs, 16 MiB chunks: three work requests per
  // block). All blocks map source to destination by one shift: they may
  // overlap. Regions of kWorstRegion bytes; the blocks stay in kWorstWindow.
  static constexpr uint64_t kWorstFrom = (16 << 20) - 100, kWorstTo = (16 << 20) - 400;
  static constexpr uint64_t kWorstRegion = 17 << 20;
  static constexpr uint64_t kWorstWindow[2] = {15 << 20, 17 << 20};
  static std::vector<Block> WorstCaseBlocks(OpKind kind, uint32_t k) {
    std::vector<Block> blocks;
    for (uint32_t i = 0; i < kMaxBlocksPerOp; ++i) {
      const uint64_t j = k * kMaxBlocksPerOp + i;
      // A write reads locally and lands remotely; a read the other way.
      blocks.push_back(kind == OpKind::kWrite ? Block{kWorstFrom - j, kWorstTo - j, 4096}
                                              : Block{kWorstTo - j, kWorstFrom - j, 4096});
    }
    return blocks;
  }

  // Every block's bytes are the same on both sides.
  static void ExpectBlocksEqual(const memory::Region& local, const memory::Region& remote,
                                const std::vector<Block>& blocks) {
    for (size_t i = 0; i < blocks.size(); ++i) {
      const Block& b = blocks[i];
      ASSERT_EQ(
          std::memcmp(local.data() + b.local_offset, remote.data() + b.remote_offset, b.length), 0)
          << "block #" << i << " (local " << b.local_offset << ", remote " << b.remote_offset
          << ", " << b.length << " bytes)";
    }
  }

  // After the other end closed or died, `side` learns it: at once (TCP sees
  // the connection end), or with its next write, which fails instead of
  // hanging (RC has no keepalive: a NIC notices a dead peer when it sends).
  void ExpectPeerCannotWrite(Side& side, const RemoteRegion& to, const memory::Region& from) {
    Pump([&] { return side.link->broken(); }, absl::Seconds(1));
    if (!side.link->broken()) {
      const absl::Time start = absl::Now();
      absl::Status s = WaitFor(side, Post(side, 0, from, 0, to, 0, 4096));
      EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
      // QP timeout 14 (67 ms) x retry count 3: well under two seconds.
      EXPECT_LT(absl::Now() - start, absl::Seconds(2));
    }
    EXPECT_TRUE(side.link->broken());
  }

  // What `owner` grants its peer for `region` (verbs binds on the pollers this thread drives).
  RemoteRegion Keys(Side& owner, const memory::Region& region) {
    auto key = GrantPumping(*owner.transport, *owner.link, region, [this] { PumpOnce(); }, kTimeout);
    EXPECT_TRUE(key.ok()) << key.status();
    return key.value_or(RemoteRegion{});
  }

  absl::Status WaitFor(Side& side, uint64_t cookie) {
    if (!Pump([&] { return side.sink.done.count(cookie) > 0; })) {
      return absl::DeadlineExceededError("no completion");
    }
    return side.sink.done[cookie];
  }

  Side a_{"a"};
  Side b_{"b"};
  uint64_t next_cookie_ = 8;
  std::deque<Block> blocks_;
  std::deque<std::vector<Block>> op_blocks_;  // each op's blocks, contiguous
};

TEST_P(TransportConformanceTest, WritesLandOnEveryLane) {
  auto src = Register(a_, "src", 3 << 20, false);
  auto dst = Register(b_, "dst", 3 << 20, true);
  Fill(*src, 1);
  const RemoteRegion key = Keys(b_, *dst);
  std::vector<uint64_t> cookies;
  for (uint32_t i = 0; i < 3; ++i) {
    cookies.push_back(Post(a_, i % kPollers, *src, i << 20, key, i << 20, 1 << 20));
  }
  for (uint64_t c : cookies) EXPECT_TRUE(WaitFor(a_, c).ok());
  EXPECT_EQ(std::memcmp(src->data(), dst->data(), 3 << 20), 0);
  EXPECT_EQ(a_.link->counters().bytes_sent.load(), 3u << 20);
}

TEST_P(TransportConformanceTest, OddSizesAndOffsets) {
  auto src = Register(a_, "src", 100003, false);
  auto dst = Register(b_, "dst", 200009, true);
  Fill(*src, 7);
  const RemoteRegion key = Keys(b_, *dst);
  ASSERT_TRUE(WaitFor(a_, Post(a_, 1, *src, 3, key, 77777, 99991)).ok());
  EXPECT_EQ(std::memcmp(src->data() + 3, dst->data() + 77777, 99991), 0);
  EXPECT_EQ(dst->data()[77776], std::byte{0});
  EXPECT_EQ(dst->data()[77777 + 99991], std::byte{0});
}

TEST_P(TransportConformanceTest, NoticeRaisesLandedEvent) {
  auto src = Register(a_, "src", 65536, false);
  auto dst = Register(b_, "dst", 65536, true);
  Fill(*src, 3);
  xferd::testing::LandedRecorder watcher(*dst);
  const RemoteRegion key = Keys(b_, *dst);
  const LandingNotice notice{1234, 0, 65536, 1, 65536};
  ASSERT_TRUE(WaitFor(a_, Post(a_, 0, *src, 0, key, 0, 65536, &notice)).ok());
  ASSERT_TRUE(Pump([&] { return watcher.news > 0; }));
  const std::vector<memory::LandedEvent> events = watcher.Take();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].source_node, "a");
  EXPECT_EQ(events[0].source_transfer_id, 1234u);
  EXPECT_EQ(events[0].offset, 0u);
  EXPECT_EQ(events[0].length, 65536u);
  EXPECT_EQ(events[0].sequence, 1u);
  EXPECT_EQ(std::memcmp(src->data(), dst->data(), 65536), 0);
  EXPECT_EQ(b_.link->counters().bytes_received.load(), 65536u);
}

void ExpectRefused(TransportConformanceTest* test, const absl::Status& status,
                   absl::StatusCode tcp_code);

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

TEST_P(TransportConformanceTest, RefusedBlockFrameWritesNothing) {
  auto src = Register(a_, "src", 65536, false);
  auto dst = Register(b_, "dst", 65536, true);
  Fill(*src, 23);
  const RemoteRegion key = Keys(b_, *dst);
  // The last block runs past the end: the op is refused. TCP checks the
  // whole frame first and writes nothing; an RDMA NIC checks each work
  // request, so the blocks before the refused one may land (users never see
  // that: the engine checks every block before it posts any), and the
  // refused block itself writes nothing, not even its part inside the region.
  const std::vector<Block> blocks = {{0, 0, 4096}, {4096, 8192, 4096}, {8192, 65536 - 100, 200}};
  ExpectRefused(this, WaitFor(a_, PostBlocks(a_, 0, OpKind::kWrite, *src, key, blocks)),
                absl::StatusCode::kOutOfRange);
  const std::byte* untouched = GetParam().refuses_per_write ? dst->data() : dst->data() + 65436;
  const std::byte* end = dst->data() + 65536;
  EXPECT_TRUE(std::all_of(untouched, end, [](std::byte b) { return b == std::byte{0}; }));
}

TEST_P(TransportConformanceTest, ReadWithoutRemoteReadReadsNothing) {
  auto mine = Register(a_, "mine", 65536, false);
  auto theirs = Register(b_, "theirs", 65536, true);  // remote_write only
  Fill(*theirs, 29);
  const RemoteRegion key = Keys(b_, *theirs);
  ExpectRefused(this, WaitFor(a_, PostBlocks(a_, 0, OpKind::kRead, *mine, key, {{0, 0, 4096}})),
                absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(std::all_of(mine->data(), mine->data() + 65536,
                          [](std::byte b) { return b == std::byte{0}; }));
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

TEST_P(TransportConformanceTest, BothDirectionsShareTheLink) {
  auto a_buf = Register(a_, "abuf", 1 << 20, true);
  auto b_buf = Register(b_, "bbuf", 1 << 20, true);
  Fill(*a_buf, 11);
  std::vector<std::byte> a_orig(a_buf->data(), a_buf->data() + (1 << 19));
  Fill(*b_buf, 22);
  const RemoteRegion to_b = Keys(b_, *b_buf);
  const RemoteRegion to_a = Keys(a_, *a_buf);
  // A sends its first half to B's second half while B sends its first half
  // to A's second half.
  const uint64_t ab = Post(a_, 0, *a_buf, 0, to_b, 1 << 19, 1 << 19);
  const uint64_t ba = Post(b_, 1, *b_buf, 0, to_a, 1 << 19, 1 << 19);
  ASSERT_TRUE(WaitFor(a_, ab).ok());
  ASSERT_TRUE(WaitFor(b_, ba).ok());
  EXPECT_EQ(std::memcmp(b_buf->data() + (1 << 19), a_orig.data(), 1 << 19), 0);
  EXPECT_EQ(std::memcmp(a_buf->data() + (1 << 19), b_buf->data(), 1 << 19), 0);
}

// Refused writes fail and leave the destination alone. TCP refuses per frame
// with the precise reason and keeps the lane; an RDMA NIC reports every
// refusal as one remote access error and the queue pair breaks, which is what
// RDMA hardware does (UNAVAILABLE: a retry reconnects and resolves afresh).
void ExpectRefused(TransportConformanceTest* test, const absl::Status& status,
                   absl::StatusCode tcp_code) {
  ASSERT_FALSE(status.ok());
  if (test->GetParam().refuses_per_write) {
    EXPECT_EQ(status.code(), tcp_code) << status;
  } else {
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
    EXPECT_NE(status.message().find("refused"), absl::string_view::npos) << status;
  }
}

TEST_P(TransportConformanceTest, RefusesUnknownRegion) {
  auto src = Register(a_, "src", 8192, false);
  auto dst = Register(b_, "dst", 8192, true);
  RemoteRegion bogus = Keys(b_, *dst);
  bogus.region_id += 1000;
  for (uint32_t& rkey : bogus.rkeys) rkey += 1000;
  ExpectRefused(this, WaitFor(a_, Post(a_, 0, *src, 0, bogus, 0, 4096)),
                absl::StatusCode::kNotFound);
  if (GetParam().refuses_per_write) {  // the lane still works
    const RemoteRegion key = Keys(b_, *dst);
    Fill(*src, 5);
    EXPECT_TRUE(WaitFor(a_, Post(a_, 0, *src, 0, key, 0, 8192)).ok());
    EXPECT_EQ(std::memcmp(src->data(), dst->data(), 8192), 0);
  }
}

TEST_P(TransportConformanceTest, RefusesOutOfRangeWithoutTouchingMemory) {
  auto src = Register(a_, "src", 8192, false);
  auto dst = Register(b_, "dst", 8192, true);
  auto neighbour = Register(b_, "neighbour", 8192, true);
  Fill(*src, 5);
  const RemoteRegion key = Keys(b_, *dst);
  ExpectRefused(this, WaitFor(a_, Post(a_, 0, *src, 0, key, 4096, 8192)),
                absl::StatusCode::kOutOfRange);
  for (const auto& region : {dst, neighbour}) {
    for (uint64_t i = 0; i < 8192; ++i) ASSERT_EQ(region->data()[i], std::byte{0});
  }
}

TEST_P(TransportConformanceTest, RefusesRegionWithoutRemoteWrite) {
  auto src = Register(a_, "src", 4096, false);
  auto dst = Register(b_, "readonly", 4096, false);
  Fill(*src, 5);
  ExpectRefused(this,
                WaitFor(a_, Post(a_, 0, *src, 0, Keys(b_, *dst), 0, 4096)),
                absl::StatusCode::kPermissionDenied);
  for (uint64_t i = 0; i < 4096; ++i) ASSERT_EQ(dst->data()[i], std::byte{0});
}

TEST_P(TransportConformanceTest, RefusesPeerOutsideTheAcl) {
  if (!GetParam().enforces_acl_per_write) {
    GTEST_SKIP() << "ACL is enforced when keys are handed out (ResolveRegion), not per write";
  }
  auto src = Register(a_, "src", 4096, false);
  auto dst = Register(b_, "private", 4096, true, {"someone-else"});
  Fill(*src, 5);
  EXPECT_EQ(WaitFor(a_, Post(a_, 0, *src, 0, Keys(b_, *dst), 0, 4096)).code(),
            absl::StatusCode::kPermissionDenied);
  for (uint64_t i = 0; i < 4096; ++i) ASSERT_EQ(dst->data()[i], std::byte{0});
}

TEST_P(TransportConformanceTest, CloseFailsWhatIsInFlightWithTheReason) {
  auto src = Register(a_, "src", 16 << 20, false);
  auto dst = Register(b_, "dst", 16 << 20, true);
  auto back = Register(a_, "back", 4096, true);
  const RemoteRegion key = Keys(b_, *dst);
  const RemoteRegion back_key = Keys(a_, *back);  // while a's link is up
  std::vector<uint64_t> cookies;
  for (uint32_t i = 0; i < 16; ++i) {
    cookies.push_back(Post(a_, i % kPollers, *src, i << 20, key, i << 20, 1 << 20));
  }
  a_.link->Close(absl::CancelledError("closing for the test"));
  for (uint64_t c : cookies) {
    absl::Status s = WaitFor(a_, c);
    if (!s.ok()) {
      EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
    }
  }
  EXPECT_TRUE(a_.link->broken());
  EXPECT_EQ(a_.link->status().code(), absl::StatusCode::kCancelled);
  ASSERT_TRUE(Pump([&] { return a_.link->lane(0).broken() && a_.link->lane(0).credits() == 0; }));
  ExpectPeerCannotWrite(b_, back_key, *dst);
}

TEST_P(TransportConformanceTest, PeerGoingAwayFailsWrites) {
  auto src = Register(a_, "src", 1 << 20, false);
  auto dst = Register(b_, "dst", 1 << 20, true);
  const RemoteRegion key = Keys(b_, *dst);
  ASSERT_TRUE(WaitFor(a_, Post(a_, 0, *src, 0, key, 0, 1 << 20)).ok());
  b_.transport->Shutdown();
  ExpectPeerCannotWrite(a_, key, *src);
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

// A lane closed while it holds ops its send queue had no room for (verbs;
// the others send them at once): every op is still reported once, in the
// order posted, done or failed with the close's reason, and none completes
// after one before it failed.
TEST_P(TransportConformanceTest, CloseFailsHeldOpsInOrder) {
  auto a_buf = Register(a_, "abuf", kWorstRegion, false);
  auto b_buf = Register(b_, "bbuf", kWorstRegion, true);
  Fill(*a_buf, 41, kWorstWindow[0], kWorstWindow[1]);
  const RemoteRegion key = Keys(b_, *b_buf);
  const uint32_t depth = a_.link->lane(0).credits();
  std::vector<uint64_t> cookies;
  for (uint32_t k = 0; k < depth; ++k) {
    cookies.push_back(
        PostBlocks(a_, 0, OpKind::kWrite, *a_buf, key, WorstCaseBlocks(OpKind::kWrite, k)));
  }
  EXPECT_EQ(a_.link->lane(0).credits(), 0u);  // all taken, whatever the send queue holds
  a_.link->Close(absl::CancelledError("closing for the test"));
  bool failed = false;
  for (uint64_t c : cookies) {
    const absl::Status s = WaitFor(a_, c);
    if (s.ok()) {
      EXPECT_FALSE(failed) << "op " << c << " completed after one before it failed";
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
      failed = true;
    }
  }
  EXPECT_EQ(a_.sink.order, cookies);
  ASSERT_TRUE(Pump([&] { return a_.link->lane(0).broken() && a_.link->lane(0).credits() == 0; }));
}

// One landed event for a many-block write, with its block count and payload.
TEST_P(TransportConformanceTest, NoticeOfManyBlocks) {
  auto src = Register(a_, "src", 1 << 20, false);
  auto dst = Register(b_, "dst", 1 << 20, true);
  Fill(*src, 23);
  xferd::testing::LandedRecorder watcher(*dst);
  const std::vector<Block> blocks = {{0, 8192, 4096}, {65536, 500000, 100}, {4096, 900000, 7}};
  const LandingNotice notice{99, 8192, 900007 - 8192, 3, 4203};
  const RemoteRegion key = Keys(b_, *dst);
  ASSERT_TRUE(WaitFor(a_, PostBlocks(a_, 0, OpKind::kWrite, *src, key, blocks, &notice)).ok());
  ASSERT_TRUE(Pump([&] { return watcher.news > 0; }));
  const std::vector<memory::LandedEvent> events = watcher.Take();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].source_transfer_id, 99u);
  EXPECT_EQ(events[0].offset, 8192u);
  EXPECT_EQ(events[0].length, 900007u - 8192);
  EXPECT_EQ(events[0].blocks, 3u);
  EXPECT_EQ(events[0].bytes, 4203u);
  ExpectBlocksEqual(*src, *dst, blocks);
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportConformanceTest,
                         ::testing::ValuesIn(AllTransportFactories()),
                         [](const ::testing::TestParamInfo<TransportFactory>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace xferd::transport
