// The transport conformance suite's fixture (transport_conformance_fixture.h):
// its helpers, the refusal check the refusal tests share, and the one
// instantiation of the suite over every transport of AllTransportFactories()
// (TCP, TCP with TLS lanes, verbs and the fake), which every file's TEST_Ps run
// under.
#include "tests/transport/transport_conformance_fixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

namespace xferd::transport::conformance {

void Recorder::OnOpDone(const OpCompletion& c) {
  done[c.cookie] = c.error == nullptr ? absl::OkStatus() : *c.error;
  if (c.mismatch != nullptr) mismatched[c.cookie] = *c.mismatch;
  order.push_back(c.cookie);
}

void TransportConformanceTest::SetUp() {
  for (Side* side : {&a_, &b_}) {
    memory::RegistryOptions options;
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

bool TransportConformanceTest::Pump(const std::function<bool()>& done, absl::Duration timeout) {
  return PumpUntil(
      done, [this] { PumpOnce(); }, timeout);
}

void TransportConformanceTest::PumpOnce() {
  for (Side* side : {&a_, &b_}) PumpSide(*side);
}

void TransportConformanceTest::PumpSide(Side& side) {
  if (side.transport == nullptr) return;
  for (uint32_t i = 0; i < kPollers; ++i) side.transport->worker(i).Poll(side.sink);
}

std::shared_ptr<memory::Region> TransportConformanceTest::Register(Side& side,
                                                                   const std::string& name,
                                                                   uint64_t size, bool remote_write,
                                                                   std::vector<std::string> acl,
                                                                   bool remote_read) {
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

void TransportConformanceTest::Fill(memory::Region& region, uint8_t seed, uint64_t from,
                                    uint64_t to) {
  for (uint64_t i = from; i < std::min(to, region.size()); i += 8) {
    const uint64_t word = (i + seed + 1) * 0x9E3779B97F4A7C15ull;
    std::memcpy(region.data() + i, &word, std::min<uint64_t>(8, region.size() - i));
  }
}

uint64_t TransportConformanceTest::Post(Side& from, uint32_t lane, const memory::Region& src,
                                        uint64_t src_offset, const RemoteRegion& dst,
                                        uint64_t dst_offset, uint32_t length,
                                        const LandingNotice* notice) {
  const uint64_t cookie = next_cookie_++;
  // An op's blocks must outlive it: kept until the test ends.
  const Block* block = &blocks_.emplace_back(Block{src_offset, dst_offset, length});
  DataOp op = OneBlockWrite(cookie, src, dst, block);
  op.notice = notice;
  EXPECT_TRUE(Pump([&] { return from.link->lane(lane).credits() > 0; }));
  EXPECT_EQ(from.link->lane(lane).Post({&op, 1}), 1u);
  return cookie;
}

uint64_t TransportConformanceTest::PostBlocks(Side& from, uint32_t lane, OpKind kind,
                                              const memory::Region& local,
                                              const RemoteRegion& remote,
                                              const std::vector<Block>& blocks,
                                              const LandingNotice* notice, uint64_t* checksums) {
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
  op.checksums = checksums;
  EXPECT_TRUE(Pump([&] { return from.link->lane(lane).credits() > 0; }));
  EXPECT_EQ(from.link->lane(lane).Post({&op, 1}), 1u);
  return cookie;
}

void TransportConformanceTest::MovePermuted(OpKind kind, const memory::Region& from,
                                            const memory::Region& to, const RemoteRegion& remote) {
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

std::vector<Block> TransportConformanceTest::WorstCaseBlocks(OpKind kind, uint32_t k) {
  std::vector<Block> blocks;
  for (uint32_t i = 0; i < kMaxBlocksPerOp; ++i) {
    const uint64_t j = k * kMaxBlocksPerOp + i;
    // A write reads locally and lands remotely; a read the other way.
    blocks.push_back(kind == OpKind::kWrite ? Block{kWorstFrom - j, kWorstTo - j, 4096}
                                            : Block{kWorstTo - j, kWorstFrom - j, 4096});
  }
  return blocks;
}

void TransportConformanceTest::ExpectBlocksEqual(const memory::Region& local,
                                                 const memory::Region& remote,
                                                 const std::vector<Block>& blocks) {
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Block& b = blocks[i];
    ASSERT_EQ(std::memcmp(local.data() + b.local_offset, remote.data() + b.remote_offset, b.length),
              0)
        << "block #" << i << " (local " << b.local_offset << ", remote " << b.remote_offset << ", "
        << b.length << " bytes)";
  }
}

void TransportConformanceTest::ExpectPeerCannotWrite(Side& side, const RemoteRegion& to,
                                                     const memory::Region& from) {
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

RemoteRegion TransportConformanceTest::Keys(Side& owner, const memory::Region& region) {
  auto key = GrantPumping(
      *owner.transport, *owner.link, region, [this] { PumpOnce(); }, kTimeout);
  EXPECT_TRUE(key.ok()) << key.status();
  return key.value_or(RemoteRegion{});
}

absl::Status TransportConformanceTest::WaitFor(Side& side, uint64_t cookie) {
  if (!Pump([&] { return side.sink.done.count(cookie) > 0; })) {
    return absl::DeadlineExceededError("no completion");
  }
  return side.sink.done[cookie];
}

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

INSTANTIATE_TEST_SUITE_P(Transports, TransportConformanceTest,
                         ::testing::ValuesIn(AllTransportFactories()),
                         [](const ::testing::TestParamInfo<TransportFactory>& info) {
                           return info.param.name;
                         });

}  // namespace xferd::transport::conformance
