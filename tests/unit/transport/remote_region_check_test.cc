#include "daemon/transport/verbs/remote_region_check.h"

#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace xferd::transport::verbs {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint32_t kLanes = 2;

RemoteRegion Region(uint64_t size, uint64_t chunk, size_t rkeys) {
  return RemoteRegion{7, size, 0x10000, chunk, std::vector<uint32_t>(rkeys, 42)};
}

TEST(RemoteRegionCheckTest, AcceptsOneRkeyPerChunk) {
  EXPECT_TRUE(CheckRemoteRegionKeys(Region(kGiB, kGiB, 1), kLanes).ok());
  EXPECT_TRUE(CheckRemoteRegionKeys(Region(kGiB + 1, kGiB, 2), kLanes).ok());
  EXPECT_TRUE(CheckRemoteRegionKeys(Region(3 * kGiB, kGiB, 3), kLanes).ok());
  // A chunk below kMinMrChunk is fine when it covers the whole region.
  EXPECT_TRUE(CheckRemoteRegionKeys(Region(4096, 4096, 1), kLanes).ok());
}

TEST(RemoteRegionCheckTest, RefusesMalformedKeys) {
  EXPECT_FALSE(CheckRemoteRegionKeys(Region(kGiB + 1, kGiB, 1), kLanes).ok());  // too few
  EXPECT_FALSE(CheckRemoteRegionKeys(Region(kGiB, kGiB, 2), kLanes).ok());      // too many
  EXPECT_FALSE(CheckRemoteRegionKeys(Region(0, kGiB, 0), kLanes).ok());         // empty region
  EXPECT_FALSE(CheckRemoteRegionKeys(Region(kGiB, 0, 0), kLanes).ok());         // no chunk size
  EXPECT_FALSE(CheckRemoteRegionKeys(Region(2 * kGiB, 4096, 2 * kGiB / 4096), kLanes).ok());
  RemoteRegion no_addr = Region(kGiB, kGiB, 1);
  no_addr.addr = 0;
  EXPECT_FALSE(CheckRemoteRegionKeys(no_addr, kLanes).ok());
}

// The datapath indexes rkeys[offset / mr_chunk_bytes] for offsets below
// size: rounding the chunk count up must not wrap around for huge sizes.
TEST(RemoteRegionCheckTest, HugeSizeNeedsItsRkeys) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  EXPECT_FALSE(CheckRemoteRegionKeys(Region(kMax, kGiB, 0), kLanes).ok());
  EXPECT_FALSE(CheckRemoteRegionKeys(Region(kMax, kMax, 0), kLanes).ok());
  RemoteRegion whole_space = Region(kMax, kMax, 1);
  whole_space.addr = 1;  // bytes 1 .. 2^64-1
  EXPECT_TRUE(CheckRemoteRegionKeys(whole_space, kLanes).ok());
  EXPECT_FALSE(CheckRemoteRegionKeys(Region(kMax - kGiB + 2, kGiB, 0), kLanes).ok());
}

// The region must not wrap around the peer's address space.
TEST(RemoteRegionCheckTest, RefusesAddressWrap) {
  RemoteRegion r = Region(kGiB, kGiB, 1);
  r.addr = std::numeric_limits<uint64_t>::max() - 4096;
  EXPECT_FALSE(CheckRemoteRegionKeys(r, kLanes).ok());
}

// Memory windows: a key per lane and chunk on each device the link uses.
RemoteRegion PerLane(uint64_t size, uint64_t chunk, uint32_t lanes, size_t rkeys) {
  RemoteRegion r = Region(size, chunk, rkeys);
  r.key_lanes = lanes;
  return r;
}

TEST(RemoteRegionCheckTest, AcceptsOneKeyPerLaneAndChunk) {
  EXPECT_TRUE(CheckRemoteRegionKeys(PerLane(3 * kGiB, kGiB, 2, 6), kLanes).ok());
  // More lanes of keys than the link has: the extra ones go unused.
  EXPECT_TRUE(CheckRemoteRegionKeys(PerLane(kGiB, kGiB, 4, 4), kLanes).ok());
  // Keys on the second device only: the link uses that one alone.
  RemoteRegion second = PerLane(kGiB, kGiB, 2, 0);
  second.more_rkeys = {{1, 2}};
  EXPECT_TRUE(CheckRemoteRegionKeys(second, kLanes).ok());
}

TEST(RemoteRegionCheckTest, RefusesTooFewPerLaneKeys) {
  // Lane 1 would index past them.
  EXPECT_FALSE(CheckRemoteRegionKeys(PerLane(kGiB, kGiB, 1, 1), kLanes).ok());
  EXPECT_FALSE(CheckRemoteRegionKeys(PerLane(2 * kGiB, kGiB, 2, 3), kLanes).ok());
  EXPECT_FALSE(CheckRemoteRegionKeys(PerLane(kGiB, kGiB, 2, 0), kLanes).ok());  // none at all
  EXPECT_FALSE(CheckRemoteRegionKeys(PerLane(kGiB, kGiB, kMaxKeyLanes + 1, kMaxKeyLanes + 1),
                                     kLanes)
                   .ok());
  RemoteRegion uneven = PerLane(kGiB, kGiB, 2, 2);
  uneven.more_rkeys = {{1}};
  EXPECT_FALSE(CheckRemoteRegionKeys(uneven, kLanes).ok());
  // has_lane_keys would index past the queue pairs named.
  RemoteRegion short_qpns = PerLane(kGiB, kGiB, 2, 2);
  short_qpns.key_qpns = {7};
  EXPECT_FALSE(CheckRemoteRegionKeys(short_qpns, kLanes).ok());
}

// Keys bound through the owner's queue pairs work only on lanes connected to
// them: after a rejoin of the device pair, the lanes' fresh peers have none.
TEST(RemoteRegionCheckTest, LaneKeysNameTheirQueuePairs) {
  RemoteRegion r = PerLane(kGiB, kGiB, 2, 2);
  r.more_rkeys = {{3, 4}};
  r.key_qpns = {100, 101, 200, 201};
  EXPECT_TRUE(CheckRemoteRegionKeys(r, kLanes).ok());
  EXPECT_TRUE(r.has_lane_keys(0, 1, 101));
  EXPECT_TRUE(r.has_lane_keys(1, 0, 200));
  EXPECT_FALSE(r.has_lane_keys(1, 0, 300));  // a rejoined pair's fresh queue pair
  EXPECT_FALSE(r.has_lane_keys(2, 0, 0));    // no keys on that device
  // Keys not bound to queue pairs (MR keys) work on any lane of the device.
  EXPECT_TRUE(PerLane(kGiB, kGiB, 2, 2).has_lane_keys(0, 1, 12345));
}

// The data path's O(1) lookup: lane i's keys start at i x chunks.
TEST(RemoteRegionCheckTest, LaneKeysAreLaneMajor) {
  RemoteRegion r = PerLane(2 * kGiB, kGiB, 2, 0);
  r.rkeys = {10, 11, 20, 21};
  EXPECT_EQ(r.lane_rkeys(0, 0)[1], 11u);
  EXPECT_EQ(r.lane_rkeys(0, 1)[0], 20u);
  EXPECT_EQ(r.lane_rkeys(0, 1)[1], 21u);
  EXPECT_TRUE(r.has_keys(0));
  EXPECT_FALSE(r.has_keys(1));
  // Without per-lane keys every lane uses the same.
  RemoteRegion shared = Region(2 * kGiB, kGiB, 2);
  EXPECT_EQ(shared.lane_rkeys(0, 1), shared.lane_rkeys(0, 0));
}

}  // namespace
}  // namespace xferd::transport::verbs
