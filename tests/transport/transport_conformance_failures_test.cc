// Transport conformance (fixture: transport_conformance_fixture.h), a
// misbehaving peer and failures: writes and reads outside the peer's rights
// (unknown region, out of range, no remote write or read, not in the ACL)
// are refused and touch no memory; a closed link fails what is in flight or
// held with the close's reason, in order; a peer going away fails writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/transport/transport_conformance_fixture.h"

namespace xferd::transport::conformance {
namespace {

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
  ExpectRefused(this, WaitFor(a_, Post(a_, 0, *src, 0, Keys(b_, *dst), 0, 4096)),
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

}  // namespace
}  // namespace xferd::transport::conformance
