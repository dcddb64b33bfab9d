// Transport conformance (fixture: transport_conformance_fixture.h), writes
// and landing notices: bytes land on every lane, at odd sizes and offsets,
// in both directions of one link at once, and a write's notice raises one
// landed event on the receiver (one-block and many-block writes).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/testing/landed_recorder.h"
#include "tests/transport/transport_conformance_fixture.h"

namespace xferd::transport::conformance {
namespace {

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

}  // namespace
}  // namespace xferd::transport::conformance
